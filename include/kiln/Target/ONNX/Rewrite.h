//===- Rewrite.h - edits of an ONNX model -----------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The ONNX side of structured channel pruning: the model the executable
// embeds (and --export-onnx writes) gets the pruned parameters' shapes.
//===----------------------------------------------------------------------===//
#ifndef KILN_TARGET_ONNX_REWRITE_H
#define KILN_TARGET_ONNX_REWRITE_H

#include "kiln/runtime/SliceTensor.h"

#include <map>
#include <string>

namespace kiln {

/// `model` (serialized ModelProto bytes) with each initializer named in
/// `kept` cut to those indices along those axes (as sliceTensorBytes), its
/// graph-input declaration (if any) resized alike, and the inferred shapes
/// of intermediate values (value_info) dropped, and the kept indices
/// recorded as the metadata property "kiln.pruned_channels" (JSON: name ->
/// axis -> indices of the original). False with `err` on a model
/// that does not parse, a named initializer that is missing or not float32,
/// or external data.
bool pruneONNXInitializers(const std::string &model,
                           const std::map<std::string, KeptIndices> &kept,
                           std::string &out, std::string &err);

} // namespace kiln

#endif // KILN_TARGET_ONNX_REWRITE_H
