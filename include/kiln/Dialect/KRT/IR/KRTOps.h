//===- KRTOps.h - krt dialect -----------------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The runtime dialect: buffers, kernel launches, collectives, events.
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_KRT_IR_KRTOPS_H
#define KILN_DIALECT_KRT_IR_KRTOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace kiln::krt {
/// Byte alignment of every arena buffer (a cache line; AVX-512 vectors).
constexpr int64_t kArenaAlignment = 64;
/// Bytes of a buffer of `type` (i1 is stored as one byte), at most
/// rt::kMaxTensorBytes: the krt verifiers refuse a buffer whose size
/// overflows or exceeds it (kiln/Support/TensorSize.h), so this is for
/// verified buffer types. A type no verifier saw (a function argument) is
/// sized with checkedTypeBytes.
int64_t bufferBytes(mlir::MemRefType type);
} // namespace kiln::krt

#include "kiln/Dialect/KRT/IR/KRTDialect.h.inc"
#include "kiln/Dialect/KRT/IR/KRTEnums.h.inc"

#define GET_OP_CLASSES
#include "kiln/Dialect/KRT/IR/KRTOps.h.inc"

#endif // KILN_DIALECT_KRT_IR_KRTOPS_H
