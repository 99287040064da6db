//===- PlanDType.cpp - MLIR element types to plan dtypes --------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "kiln/Target/Plan/PlanDType.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace kiln;

// A dtype added to KILN_DTYPES needs its MLIR type in the switch below; this
// stops the build until it has one (the switch alone would only warn).
static_assert(rt::kNumDTypes == 13,
              "a dtype was added to KILN_DTYPES: map it in mlirElementType "
              "and update this count");

Type kiln::mlirElementType(rt::DType t, MLIRContext *ctx) {
  Builder b(ctx);
  switch (t) {
  case rt::DType::F32: return b.getF32Type();
  case rt::DType::F64: return b.getF64Type();
  case rt::DType::F16: return b.getF16Type();
  case rt::DType::BF16: return b.getBF16Type();
  case rt::DType::I64: return b.getIntegerType(64);
  case rt::DType::I32: return b.getIntegerType(32);
  case rt::DType::I16: return b.getIntegerType(16);
  case rt::DType::I8: return b.getIntegerType(8);
  case rt::DType::U64: return b.getIntegerType(64, /*isSigned=*/false);
  case rt::DType::U32: return b.getIntegerType(32, /*isSigned=*/false);
  case rt::DType::U16: return b.getIntegerType(16, /*isSigned=*/false);
  case rt::DType::U8: return b.getIntegerType(8, /*isSigned=*/false);
  case rt::DType::Bool: return b.getIntegerType(1);
  }
  return {};
}

std::optional<rt::DType> kiln::planDType(Type t) {
  if (!t)
    return std::nullopt;
  for (int i = 0; i < rt::kNumDTypes; ++i)
    if (mlirElementType(rt::DType(i), t.getContext()) == t)
      return rt::DType(i);
  // siN is the plan's iN, and i1 is Bool whatever its signedness.
  auto it = dyn_cast<IntegerType>(t);
  if (it && !it.isSignless() && (it.isSigned() || it.getWidth() == 1))
    return planDType(IntegerType::get(t.getContext(), it.getWidth()));
  return std::nullopt;
}
