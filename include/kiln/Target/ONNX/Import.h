//===- Import.h - ONNX model to the onnx dialect -----------------*- C++
//-*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Imports an ONNX ModelProto file into a module holding `func.func @forward`
// made of `onnx.node`, `onnx.none` and `onnx.constant` ops.
//===----------------------------------------------------------------------===//
#ifndef KILN_TARGET_ONNX_IMPORT_H
#define KILN_TARGET_ONNX_IMPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <map>
#include <vector>
#include <string>

namespace kiln {

/// How to resolve the symbolic dimensions of a model.
struct ImportOptions {
  /// Values for symbolic dimensions by name (dim_param), as `--dim name=N`.
  /// They apply wherever the symbol occurs.
  std::map<std::string, int64_t> dimValues;
  /// When > 0, the size of dimension 0 of every graph input whose dimension 0
  /// is symbolic or unknown (`--batch-size N`). dimValues takes precedence.
  int64_t batchSize = 0;
  /// With batchSize, also replace a static dimension 0 of every graph input
  /// and output (kiln-compile compiles the model for its --batch-size).
  bool overrideBatch = false;
  /// When set, receives the value of every parameter (floating initializer)
  /// as raw little-endian bytes, by initializer name: what a plan carries.
  std::map<std::string, std::string> *paramData = nullptr;
  /// Graph inputs fixed to a value at compile time (ahead-of-time
  /// specialisation, for inputs Kiln needs as constants: shapes, axes, a
  /// Trilu's k, a Dropout ratio): input name -> a serialized TensorProto of
  /// the input's declared type, integer or boolean, or a floating scalar. A bound input is not an argument of
  /// @forward but a constant, as a non-floating initializer would be. A
  /// name that is not a graph input of the model fails the import.
  std::map<std::string, std::string> boundInputs;
  /// Record each node's output value names on its onnx.node (`onnx.outputs`,
  /// one string per result), for annotations by ONNX value name
  /// (kiln-compile --shard on an activation).
  bool valueNames = false;
};

/// Loads, validates and shape-infers the ONNX model at `path` and imports it
/// into `ctx`. The module carries `onnx.opset` (the default-domain opset after
/// any upgrade to opset 17; absent when the model imports only other domains),
/// `kiln.weights` (the model's absolute path) and `onnx.producer`. Returns
/// null after emitting exactly one error, located at the model file (line =
/// 1-based node index for node errors).
mlir::OwningOpRef<mlir::ModuleOp> importONNX(llvm::StringRef path,
                                             mlir::MLIRContext &ctx,
                                             const ImportOptions &opts = {});

/// The model's graph inputs that are not initializers, in order: what a
/// backend test's input_K.pb files feed. False, with `err`, when the file is
/// not a readable model.
bool onnxGraphInputNames(const std::string &path, std::vector<std::string> &names,
                         std::string &err);

/// As importONNX, for a model already read into `bytes`; `path` names the
/// model in locations and `kiln.weights`, and its folder holds external data.
mlir::OwningOpRef<mlir::ModuleOp>
importONNXFromBuffer(llvm::StringRef bytes, llvm::StringRef path,
                     mlir::MLIRContext &ctx, const ImportOptions &opts = {});

/// Registers the `--import-onnx` translation with its `--dim name=N` and
/// `--batch-size N` options.
void registerONNXImportTranslation();

} // namespace kiln

#endif // KILN_TARGET_ONNX_IMPORT_H
