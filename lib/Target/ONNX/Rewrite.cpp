//===- Rewrite.cpp - edits of an ONNX model ---------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "kiln/Target/ONNX/Rewrite.h"

#include <onnx/onnx_pb.h>

#include <climits>
#include <cstring>
#include <set>
#include <vector>

bool kiln::pruneONNXInitializers(const std::string &model,
                                 const std::map<std::string, KeptIndices> &kept,
                                 std::string &out, std::string &err) {
  onnx::ModelProto m;
  if (model.size() > (size_t)INT_MAX || !m.ParseFromArray(model.data(), (int)model.size())) {
    err = "the model does not parse as ONNX";
    return false;
  }
  onnx::GraphProto &g = *m.mutable_graph();
  std::set<std::string> done;
  for (onnx::TensorProto &t : *g.mutable_initializer()) {
    auto it = kept.find(t.name());
    if (it == kept.end())
      continue;
    if (t.data_type() != onnx::TensorProto::FLOAT ||
        t.data_location() == onnx::TensorProto::EXTERNAL) {
      err = "initializer '" + t.name() + "' is not float32 data in the model";
      return false;
    }
    std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
    int64_t n = 1;
    for (int64_t d : dims)
      n *= d;
    std::string raw;
    if (t.has_raw_data()) {
      raw = t.raw_data();
    } else {
      raw.resize((size_t)n * 4);
      if (t.float_data_size() != n) {
        err = "initializer '" + t.name() + "' has the wrong element count";
        return false;
      }
      std::memcpy(raw.data(), t.float_data().data(), raw.size());
    }
    std::string sliced = sliceTensorBytes(raw, dims, 4, it->second);
    if (sliced.empty()) {
      err = "initializer '" + t.name() + "' does not have the pruned shape's source size";
      return false;
    }
    t.clear_float_data();
    t.clear_dims();
    for (size_t a = 0; a < dims.size(); ++a) {
      auto k = it->second.find((int64_t)a);
      t.add_dims(k == it->second.end() ? dims[a] : (int64_t)k->second.size());
    }
    t.set_raw_data(sliced);
    done.insert(t.name());
    // An initializer also declared as a graph input (IR < 4) gets its shape.
    for (onnx::ValueInfoProto &in : *g.mutable_input())
      if (in.name() == t.name() && in.type().has_tensor_type()) {
        auto *shape = in.mutable_type()->mutable_tensor_type()->mutable_shape();
        shape->clear_dim();
        for (int64_t d : t.dims())
          shape->add_dim()->set_dim_value(d);
      }
  }
  for (const auto &[name, k] : kept)
    if (!done.count(name)) {
      err = "the model has no initializer '" + name + "' to prune";
      return false;
    }
  g.clear_value_info();
  // Which channels of the original each pruned initializer kept:
  // {"name": {"axis": [indices]}}, for tools that map back.
  std::string j = "{";
  bool firstName = true;
  for (const auto &[name, k] : kept) {
    j += (firstName ? "\"" : ",\"") + name + "\":{";
    firstName = false;
    bool firstAxis = true;
    for (const auto &[axis, idx] : k) {
      j += (firstAxis ? "\"" : ",\"") + std::to_string(axis) + "\":[";
      firstAxis = false;
      for (size_t i = 0; i < idx.size(); ++i)
        j += (i ? "," : "") + std::to_string(idx[i]);
      j += "]";
    }
    j += "}";
  }
  j += "}";
  bool set = false;
  for (auto &p : *m.mutable_metadata_props())
    if (p.key() == "kiln.pruned_channels") {
      p.set_value(j);
      set = true;
    }
  if (!set) {
    auto *p = m.add_metadata_props();
    p->set_key("kiln.pruned_channels");
    p->set_value(j);
  }
  if (!m.SerializeToString(&out)) {
    err = "cannot serialise the pruned model";
    return false;
  }
  return true;
}
