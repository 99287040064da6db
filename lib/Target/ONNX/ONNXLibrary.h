//===- ONNXLibrary.h - no-throw wrapper over libonnx -------------*- C++
//-*-===//
// SPDX-License-Identifier: Apache-2.0
//
// libonnx (protobuf parsing, the checker, the version converter and shape
// inference) reports errors by throwing. Kiln builds with -fno-exceptions, so
// every call into libonnx goes through this header, whose implementation is the
// only file of the project compiled with -fexceptions. It includes no MLIR
// header; errors come back as one-line messages.
//===----------------------------------------------------------------------===//
#ifndef KILN_LIB_TARGET_ONNX_ONNXLIBRARY_H
#define KILN_LIB_TARGET_ONNX_ONNXLIBRARY_H

#include <onnx/onnx_pb.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

namespace kiln {
namespace onnxlib {

/// The operator set version models are upgraded to when they import an older
/// default-domain opset.
constexpr int kTargetOpset = 17;
/// The oldest default-domain operator set Kiln accepts.
constexpr int kMinOpset = 1;

/// How to load a model.
struct LoadOptions {
  /// Values for symbolic dimensions (dim_param), applied to the whole graph
  /// before shape inference.
  std::map<std::string, int64_t> dimValues;
  /// When > 0, the size of a symbolic or unknown dimension 0 of every graph
  /// input (and of every other occurrence of that dimension's symbol).
  int64_t batchSize = 0;
  /// Also replace a static dimension 0 of the graph inputs (kiln-compile's
  /// --batch-size: the model is compiled for that batch).
  bool overrideBatch = false;
};

/// Why loading failed.
struct LoadError {
  /// One line, no trailing newline.
  std::string message;
  /// Index of the offending node in the file's main graph, or -1.
  int nodeIndex = -1;
};

/// Reads, parses and validates the ONNX model at `path`, inlines its external
/// data (which must live in the model's folder), upgrades it to opset
/// kTargetOpset when it is older, and runs shape inference. Returns false and
/// fills `err` on any problem; never throws.
///
/// The checker, the version converter and shape inference run in a forked
/// child process: libonnx 1.12's inference functions trust their inputs (a
/// Conv of a rank-3 input with a rank-4 weight segfaults), so a crash there
/// must end the child, not the compiler. The child sees the model without its
/// large initializers (graph inputs of the same type stand in for them) and
/// sends back the result; set KILN_ONNX_IN_PROCESS=1 to run the stages in
/// process instead (faster fuzzing, debugging libonnx).
bool loadModel(const std::string &path, const LoadOptions &options,
               ::onnx::ModelProto &out, LoadError &err);

/// As above, for a model already in memory. `displayName` names it in error
/// messages; external data is resolved relative to `baseDir`.
bool loadModelFromBuffer(const char *data, size_t size,
                         const std::string &displayName,
                         const std::string &baseDir, const LoadOptions &options,
                         ::onnx::ModelProto &out, LoadError &err);

/// Convenience form of loadModel with default options and a plain message.
bool loadModel(const std::string &path, ::onnx::ModelProto &out,
               std::string &err);

/// `node`'s name, or "<op_type>_<index>" when it has none.
std::string nodeDisplayName(const ::onnx::NodeProto &node, int index);

/// The name of a TensorProto::DataType value ("FLOAT", "STRING", ...), or
/// "type N" for a value the enum does not know.
std::string dataTypeName(int32_t dataType);

/// `text` made printable on one line: control characters and backslashes as
/// \NN hex escapes (the MLIR string syntax), cut after 200 bytes.
std::string sanitize(const std::string &text);

/// sanitize(text) in single quotes, for error messages.
std::string quote(const std::string &text);

/// `tensor`'s dims as "[2, 3]" ("[] (a scalar)" for none).
std::string shapeString(const ::onnx::TensorProto &tensor);

/// Normalises an operator domain: "ai.onnx" becomes "".
std::string normalizeDomain(const std::string &domain);

} // namespace onnxlib
} // namespace kiln

#endif // KILN_LIB_TARGET_ONNX_ONNXLIBRARY_H
