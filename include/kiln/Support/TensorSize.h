//===- TensorSize.h - checked byte sizes of MLIR tensor types ---*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The compiler's view of kiln/runtime/CheckedMath.h: the byte size of a
// tensor or memref type, checked against overflow and against the largest
// tensor (rt::kMaxTensorBytes), and the one-line text that names a tensor
// which is too large. The importer (graph inputs, initializers, inferred
// node outputs), the ONNX conversion (each node's results), the krt buffer
// verifier, buffer assignment and the plan writer all size tensors here.
//===----------------------------------------------------------------------===//
#ifndef KILN_SUPPORT_TENSORSIZE_H
#define KILN_SUPPORT_TENSORSIZE_H

#include "kiln/runtime/CheckedMath.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace kiln {

/// Bytes of one element of `elem` in a buffer: the bit width rounded up to
/// whole bytes (an i1 takes one byte); one for a type without a width.
inline size_t elementBytes(mlir::Type elem) {
  if (!elem.isIntOrFloat())
    return 1;
  unsigned bits = elem.getIntOrFloatBitWidth();
  return bits == 0 ? 1 : (bits + 7) / 8;
}

/// The byte size of a statically shaped `type`; false when its shape is not
/// static or the size overflows or exceeds rt::kMaxTensorBytes.
inline bool checkedTypeBytes(mlir::ShapedType type, int64_t &bytes) {
  if (!type.hasRank() || !type.hasStaticShape())
    return false;
  return rt::checkedBytes(type.getShape(), elementBytes(type.getElementType()),
                          bytes);
}

/// "f32[2, 3]": a tensor's element type and shape as messages show them.
inline std::string tensorTypeText(mlir::ShapedType type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << type.getElementType() << "[";
  if (type.hasRank())
    for (auto [i, d] : llvm::enumerate(type.getShape())) {
      if (i)
        os << ", ";
      if (mlir::ShapedType::isDynamic(d))
        os << "?";
      else
        os << d;
    }
  os << "]";
  return s;
}

/// A byte count for people: "68719476736 bytes (64 GiB)". Takes a double so
/// that a size which overflows int64 can still be shown.
inline std::string byteSizeText(double bytes) {
  static const char *units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB",
                                "EiB", "ZiB", "YiB"};
  int u = 0;
  double v = bytes;
  while (v >= 1024 && u < 8) {
    v /= 1024;
    ++u;
  }
  std::string s;
  llvm::raw_string_ostream os(s);
  if (bytes < 9.007199254740992e15) // exact as a double: print every digit
    os << llvm::format("%.0f bytes", bytes);
  else
    os << llvm::format("%.3g bytes", bytes);
  if (u > 0)
    os << llvm::format(" (%.4g %s)", v, units[u]);
  return s;
}

/// The size `type` would have, as a double (never overflows).
inline double approximateBytes(mlir::ShapedType type) {
  double n = double(elementBytes(type.getElementType()));
  for (int64_t d : type.getShape())
    n *= double(d);
  return n;
}

/// "<what> f32[4611686018427387904] would take 1.845e+19 bytes (16 EiB),
/// more than the 2^60 bytes a tensor may hold": the one-line reason a
/// statically shaped type fails checkedTypeBytes.
inline std::string tooLargeText(const std::string &what,
                                mlir::ShapedType type) {
  for (int64_t d : type.getShape())
    if (d < 0)
      return what + " " + tensorTypeText(type) + " has a negative dimension";
  if (llvm::is_contained(type.getShape(), 0))
    return what + " " + tensorTypeText(type) +
           " is empty, but its other dimensions multiply past the " +
           rt::kMaxTensorBytesText + " a tensor may hold";
  return what + " " + tensorTypeText(type) + " would take " +
         byteSizeText(approximateBytes(type)) + ", more than the " +
         rt::kMaxTensorBytesText + " a tensor may hold";
}

} // namespace kiln

#endif // KILN_SUPPORT_TENSORSIZE_H
