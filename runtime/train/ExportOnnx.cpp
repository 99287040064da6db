//===- ExportOnnx.cpp - the trained model as ONNX ---------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "ExportOnnx.h"

#include "PruneChannels.h"
#include "Util.h"

#include "kiln/runtime/Quantize.h"
#include "kiln/runtime/SliceTensor.h"

#include <onnx/onnx_pb.h>

#include <climits>
#include <cmath>
#include <cstring>
#include <set>
#include <vector>

namespace kiln::train {

using rt::DType;

namespace {

bool onnxType(int t, DType &out) {
  using TP = onnx::TensorProto;
  switch (t) {
  case TP::FLOAT: out = DType::F32; return true;
  case TP::DOUBLE: out = DType::F64; return true;
  case TP::FLOAT16: out = DType::F16; return true;
  case TP::BFLOAT16: out = DType::BF16; return true;
  case TP::INT64: out = DType::I64; return true;
  case TP::INT32: out = DType::I32; return true;
  case TP::INT16: out = DType::I16; return true;
  case TP::INT8: out = DType::I8; return true;
  case TP::UINT64: out = DType::U64; return true;
  case TP::UINT32: out = DType::U32; return true;
  case TP::UINT16: out = DType::U16; return true;
  case TP::UINT8: out = DType::U8; return true;
  case TP::BOOL: out = DType::Bool; return true;
  default: return false;
  }
}

bool hasExternal(const onnx::TensorProto &t) {
  return t.data_location() == onnx::TensorProto::EXTERNAL ||
         t.external_data_size() > 0;
}

/// Whether a graph (or a subgraph of one of its nodes) keeps data outside.
bool graphHasExternal(const onnx::GraphProto &g, std::string &which) {
  for (const auto &t : g.initializer())
    if (hasExternal(t)) {
      which = t.name();
      return true;
    }
  for (const auto &n : g.node())
    for (const auto &a : n.attribute()) {
      if (a.has_t() && hasExternal(a.t())) {
        which = n.name().empty() ? n.op_type() : n.name();
        return true;
      }
      if (a.has_g() && graphHasExternal(a.g(), which))
        return true;
      for (const auto &sg : a.graphs())
        if (graphHasExternal(sg, which))
          return true;
    }
  return false;
}

void parseModel(std::string_view bytes, const std::string &outPath,
                onnx::ModelProto &model) {
  const std::string where = "--export-onnx " + outPath + ": ";
  if (bytes.empty())
    fail(where + "this executable carries no model to export");
  if (bytes.size() > (size_t)INT_MAX)
    fail(where + "the embedded model is over 2 GiB (needs external data, "
                 "which export does not support)");
  if (!model.ParseFromArray(bytes.data(), (int)bytes.size()))
    fail(where + "the embedded model does not parse as ONNX");
  std::string which;
  if (graphHasExternal(model.graph(), which))
    fail(where + "the model keeps tensors in external data files ('" + which +
         "'); exporting such models is not supported");
}

/// A float initializer's values (raw_data or float_data).
std::vector<float> floatValues(const onnx::TensorProto &t, const std::string &where) {
  if (t.data_type() != onnx::TensorProto::FLOAT)
    fail(where + "initializer '" + t.name() + "' is not float32");
  int64_t n = 1;
  for (int64_t d : t.dims())
    n *= d;
  std::vector<float> v((size_t)n);
  if (t.has_raw_data()) {
    if (t.raw_data().size() != (size_t)n * 4)
      fail(where + "initializer '" + t.name() + "' has the wrong byte count");
    std::memcpy(v.data(), t.raw_data().data(), (size_t)n * 4);
  } else {
    if (t.float_data_size() != n)
      fail(where + "initializer '" + t.name() + "' has the wrong element count");
    for (int64_t i = 0; i < n; ++i)
      v[(size_t)i] = t.float_data((int)i);
  }
  return v;
}

onnx::TensorProto makeTensor(const std::string &name, int type,
                             const std::vector<int64_t> &dims, const void *data,
                             size_t bytes) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(type);
  for (int64_t d : dims)
    t.add_dims(d);
  t.set_raw_data(data, bytes);
  return t;
}

/// Rewrites a QAT model as QDQ (exportOnnx's comment).
void writeQdq(onnx::ModelProto &model, const rt::Program &program,
              const QatConfig &qat, const std::string &where) {
  namespace q = rt::quant;
  int64_t opset = 0;
  for (const auto &o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx")
      opset = o.version();
  if (opset < 13)
    fail(where + "a QAT model leaves as QDQ, which needs opset 13 or later "
                 "(per-channel DequantizeLinear); the model has opset " +
         std::to_string(opset));
  onnx::GraphProto &g = *model.mutable_graph();
  std::vector<onnx::NodeProto> front;               // weight DequantizeLinear
  std::map<int, std::vector<onnx::NodeProto>> before; // Q/DQ before node i
  std::set<std::string> weightsDone;
  std::map<std::string, std::string> actDone; // observer -> dequantized name
  std::string err;
  for (const QatSite &site : qat.sites) {
    if (site.node < 0 || site.node >= g.node_size())
      fail(where + "QAT site '" + site.name + "': node " + std::to_string(site.node) +
           " is not in the model's graph");
    onnx::NodeProto &node = *g.mutable_node((int)site.node);
    const std::string &op = node.op_type();
    if (op != "MatMul" && op != "Gemm" && op != "Conv")
      fail(where + "QAT site '" + site.name + "': node " + std::to_string(site.node) +
           " is a " + op + ", not a MatMul, Gemm or Conv");
    int wIn = -1, xIn = -1;
    for (int i = 0; i < std::min(2, node.input_size()); ++i)
      (node.input(i) == site.weight ? wIn : xIn) = i;
    if (wIn < 0 || xIn < 0)
      fail(where + "QAT site '" + site.name + "': the node does not read weight '" +
           site.weight + "'");
    // The weight: int8 per channel behind a DequantizeLinear named as it.
    if (weightsDone.insert(site.weight).second) {
      int at = -1;
      for (int i = 0; i < g.initializer_size(); ++i)
        if (g.initializer(i).name() == site.weight)
          at = i;
      if (at < 0)
        fail(where + "QAT weight '" + site.weight + "' is not an initializer");
      const onnx::TensorProto &t = g.initializer(at);
      std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
      if (site.axis >= (int64_t)dims.size())
        fail(where + "QAT weight '" + site.weight + "': axis out of range");
      std::vector<float> w = floatValues(t, where);
      int64_t outer = 1, ch = dims[site.axis], inner = 1;
      for (int64_t i = 0; i < site.axis; ++i)
        outer *= dims[i];
      for (size_t i = site.axis + 1; i < dims.size(); ++i)
        inner *= dims[i];
      std::vector<float> amax((size_t)ch, 0.0f), scale((size_t)ch);
      for (int64_t b = 0; b < outer; ++b)
        for (int64_t c = 0; c < ch; ++c)
          for (int64_t i = 0; i < inner; ++i)
            amax[c] = std::fmax(amax[c], std::fabs(w[(size_t)((b * ch + c) * inner + i)]));
      for (int64_t c = 0; c < ch; ++c)
        scale[c] = q::symmetricScale(amax[c], q::kWeightMax);
      std::vector<int8_t> qw(w.size());
      for (int64_t b = 0; b < outer; ++b)
        for (int64_t c = 0; c < ch; ++c) {
          float inv = 1.0f / scale[c];
          for (int64_t i = 0; i < inner; ++i) {
            size_t k = (size_t)((b * ch + c) * inner + i);
            qw[k] = (int8_t)std::clamp(q::unclamped(w[k], inv, 0.0f), q::kWeightMin,
                                       q::kWeightMax);
          }
        }
      std::vector<int8_t> zeros((size_t)ch, 0);
      std::string base = site.weight;
      g.mutable_initializer()->DeleteSubrange(at, 1);
      *g.add_initializer() = makeTensor(base + "_quantized", onnx::TensorProto::INT8, dims,
                                        qw.data(), qw.size());
      *g.add_initializer() = makeTensor(base + "_scale", onnx::TensorProto::FLOAT, {ch},
                                        scale.data(), scale.size() * 4);
      *g.add_initializer() = makeTensor(base + "_zero_point", onnx::TensorProto::INT8, {ch},
                                        zeros.data(), zeros.size());
      for (int i = 0; i < g.input_size(); ++i)
        if (g.input(i).name() == base) {
          g.mutable_input()->DeleteSubrange(i, 1);
          break;
        }
      onnx::NodeProto dq;
      dq.set_op_type("DequantizeLinear");
      dq.set_name(base + "/DequantizeLinear");
      dq.add_input(base + "_quantized");
      dq.add_input(base + "_scale");
      dq.add_input(base + "_zero_point");
      dq.add_output(base);
      auto *a = dq.add_attribute();
      a->set_name("axis");
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(site.axis);
      front.push_back(dq);
    }
    // The activation: QuantizeLinear -> DequantizeLinear before the node.
    std::string x = node.input(xIn);
    auto done = actDone.find(site.observer);
    if (done == actDone.end()) {
      rt::HostTensor obs;
      if (!program.getParam(site.observer, obs, err))
        fail(where + err);
      if (obs.desc().dtype != rt::DType::F32 || obs.desc().numel() != 3)
        fail(where + "QAT observer '" + site.observer + "' is not f32 [3]");
      const float *o = static_cast<const float *>(obs.data());
      q::Affine p = q::affineParams(o[0], o[1], q::kActMin, q::kActMax);
      uint8_t zp = (uint8_t)p.zeroPoint;
      std::string base = site.name + "/input";
      *g.add_initializer() = makeTensor(base + "_scale", onnx::TensorProto::FLOAT, {},
                                        &p.scale, 4);
      *g.add_initializer() = makeTensor(base + "_zero_point", onnx::TensorProto::UINT8, {},
                                        &zp, 1);
      onnx::NodeProto qn, dq;
      qn.set_op_type("QuantizeLinear");
      qn.set_name(base + "/QuantizeLinear");
      qn.add_input(x);
      qn.add_input(base + "_scale");
      qn.add_input(base + "_zero_point");
      qn.add_output(base + "_quantized");
      dq.set_op_type("DequantizeLinear");
      dq.set_name(base + "/DequantizeLinear");
      dq.add_input(base + "_quantized");
      dq.add_input(base + "_scale");
      dq.add_input(base + "_zero_point");
      dq.add_output(base + "_dequantized");
      before[(int)site.node].push_back(qn);
      before[(int)site.node].push_back(dq);
      done = actDone.emplace(site.observer, base + "_dequantized").first;
    }
    node.set_input(xIn, done->second);
  }
  // The nodes in order: weight DQs first, each site's Q/DQ before it.
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (auto &n : front)
    *nodes.Add() = n;
  for (int i = 0; i < g.node_size(); ++i) {
    if (auto it = before.find(i); it != before.end())
      for (auto &n : it->second)
        *nodes.Add() = n;
    *nodes.Add() = g.node(i);
  }
  g.mutable_node()->Swap(&nodes);
}

/// Cuts the initializers of channel-pruned classes (l1-channel at a step)
/// to the channels their masks keep.
void cutPrunedChannels(onnx::ModelProto &model, const rt::Program &program,
                       const PruneConfig &prune, const std::string &where) {
  std::map<std::string, kiln::KeptIndices> kept =
      keptChannels(program, prune, where);
  if (kept.empty())
    return;
  onnx::GraphProto &g = *model.mutable_graph();
  for (onnx::TensorProto &t : *g.mutable_initializer()) {
    auto it = kept.find(t.name());
    if (it == kept.end())
      continue;
    if (t.data_type() != onnx::TensorProto::FLOAT || !t.has_raw_data())
      fail(where + "initializer '" + t.name() + "' is not float32 raw data");
    std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
    std::string cut = kiln::sliceTensorBytes(t.raw_data(), dims, 4, it->second);
    if (cut.empty())
      fail(where + "initializer '" + t.name() + "' does not match its channels");
    t.clear_dims();
    for (size_t a = 0; a < dims.size(); ++a) {
      auto k = it->second.find((int64_t)a);
      t.add_dims(k == it->second.end() ? dims[a] : (int64_t)k->second.size());
    }
    t.set_raw_data(cut);
  }
  g.clear_value_info();
}

} // namespace

void checkExportable(std::string_view model, const std::string &outPath) {
  onnx::ModelProto m;
  parseModel(model, outPath, m);
}

size_t exportOnnx(std::string_view bytes, const rt::Program &program,
                  const std::string &outPath,
                  const std::map<std::string, rt::HostTensor> *whole,
                  const QatConfig *qat, const PruneConfig *prune) {
  const std::string where = "--export-onnx " + outPath + ": ";
  onnx::ModelProto model;
  parseModel(bytes, outPath, model);
  size_t replaced = 0;
  std::string err;
  for (onnx::TensorProto &t : *model.mutable_graph()->mutable_initializer()) {
    rt::TensorDesc desc;
    const rt::HostTensor *gathered = nullptr;
    if (whole) {
      auto it = whole->find(t.name());
      if (it != whole->end())
        gathered = &it->second;
    }
    // A parameter of this plan, or of another pipeline stage's (gathered).
    if (!program.getParamDesc(t.name(), desc) && !gathered)
      continue;
    if (gathered)
      desc = gathered->desc();
    DType dt;
    if (!onnxType(t.data_type(), dt) || dt != desc.dtype)
      fail(where + "initializer '" + t.name() + "' has ONNX data type " +
           std::to_string(t.data_type()) + ", the trained parameter is " +
           desc.str());
    int64_t numel = 1;
    for (int64_t d : t.dims())
      numel *= d;
    if (numel != desc.numel())
      fail(where + "initializer '" + t.name() + "' has " +
           std::to_string(numel) + " elements, the trained parameter is " +
           desc.str());
    rt::HostTensor value;
    if (gathered)
      value = *gathered;
    else if (!program.getParam(t.name(), value, err))
      fail(where + err);
    t.clear_float_data();
    t.clear_int32_data();
    t.clear_string_data();
    t.clear_int64_data();
    t.clear_double_data();
    t.clear_uint64_data();
    t.clear_external_data();
    t.clear_data_location();
    if (value.bytes())
      t.set_raw_data(value.data(), value.bytes());
    else
      t.set_raw_data(std::string());
    ++replaced;
  }
  if (prune && prune->kind == "l1-channel" && !prune->channels.empty())
    cutPrunedChannels(model, program, *prune, where);
  if (qat)
    writeQdq(model, program, *qat, where);
  std::string out;
  if (!model.SerializeToString(&out))
    fail(where + "cannot serialise the model");
  if (!writeFileAtomic(outPath, {out}, err))
    fail("--export-onnx " + err);
  return replaced;
}

} // namespace kiln::train
