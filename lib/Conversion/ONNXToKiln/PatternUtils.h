//===- PatternUtils.h - helpers shared by the ONNX patterns -----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Private to lib/Conversion/ONNXToKiln. KILN_TRY unwraps a FailureOr inside
// a pattern, returning failure (the error has been reported) when it failed;
// it is a GNU statement expression, which GCC and Clang both accept.
//===----------------------------------------------------------------------===//
#ifndef KILN_LIB_CONVERSION_ONNXTOKILN_PATTERNUTILS_H
#define KILN_LIB_CONVERSION_ONNXTOKILN_PATTERNUTILS_H

#include "kiln/Conversion/ONNXToKiln/ONNXToKiln.h"

#define KILN_TRY(expr)                                                         \
  ({                                                                           \
    auto kilnTryResult = (expr);                                               \
    if (::mlir::failed(kilnTryResult))                                         \
      return ::mlir::failure();                                                \
    std::move(*kilnTryResult);                                                 \
  })

namespace kiln {

/// Normalises, sorts and de-duplicates `axes` for `rank`.
mlir::FailureOr<llvm::SmallVector<int64_t>>
normalizeAxes(NodeRewriter &rw, llvm::ArrayRef<int64_t> axes, int64_t rank);

/// Product of `dims`.
inline int64_t product(llvm::ArrayRef<int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims)
    p *= d;
  return p;
}

} // namespace kiln

#endif // KILN_LIB_CONVERSION_ONNXTOKILN_PATTERNUTILS_H
