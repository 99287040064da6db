//===- ExportOnnx.cpp - the trained model as ONNX ---------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "ExportOnnx.h"

#include "Util.h"

#include <onnx/onnx_pb.h>

#include <climits>

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

} // namespace

void checkExportable(std::string_view model, const std::string &outPath) {
  onnx::ModelProto m;
  parseModel(model, outPath, m);
}

size_t exportOnnx(std::string_view bytes, const rt::Program &program,
                  const std::string &outPath,
                  const std::map<std::string, rt::HostTensor> *whole) {
  const std::string where = "--export-onnx " + outPath + ": ";
  onnx::ModelProto model;
  parseModel(bytes, outPath, model);
  size_t replaced = 0;
  std::string err;
  for (onnx::TensorProto &t : *model.mutable_graph()->mutable_initializer()) {
    rt::TensorDesc desc;
    if (!program.getParamDesc(t.name(), desc))
      continue;
    const rt::HostTensor *gathered = nullptr;
    if (whole) {
      auto it = whole->find(t.name());
      if (it != whole->end())
        gathered = &it->second;
    }
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
  std::string out;
  if (!model.SerializeToString(&out))
    fail(where + "cannot serialise the model");
  if (!writeFileAtomic(outPath, {out}, err))
    fail("--export-onnx " + err);
  return replaced;
}

} // namespace kiln::train
