//===- ONNXOrigin.h - the ONNX op type an op was converted from -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The ONNX conversion gives every kiln op it builds for a node the location
// NameLoc("node", FusedLoc<"onnx.OpType">[file:line]): the node's name stays
// the outermost location (what diagnostics and the plan name), and the op
// type rides in the fused location's metadata, so passes that take ONNX op
// types from the user (--kiln-mixed-precision's fp32-ops) can find the ops a
// node became, and the op type survives autodiff's copies of the location.
//===----------------------------------------------------------------------===//
#ifndef KILN_SUPPORT_ONNXORIGIN_H
#define KILN_SUPPORT_ONNXORIGIN_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/StringRef.h"

#include <optional>

namespace kiln {

inline constexpr llvm::StringLiteral kONNXOpTypePrefix = "onnx.";

/// `loc` marked as converted from an ONNX node of type `opType`. A location
/// that is not a NameLoc (a node without a name) is wrapped whole.
inline mlir::Location withONNXOpType(mlir::Location loc, llvm::StringRef opType) {
  mlir::MLIRContext *ctx = loc->getContext();
  auto tag = mlir::StringAttr::get(ctx, kONNXOpTypePrefix + opType);
  if (auto name = mlir::dyn_cast<mlir::NameLoc>(loc))
    return mlir::NameLoc::get(
        name.getName(), mlir::FusedLoc::get({name.getChildLoc()}, tag, ctx));
  return mlir::FusedLoc::get({loc}, tag, ctx);
}

/// The ONNX op type `loc` was marked with (withONNXOpType), if any.
inline std::optional<llvm::StringRef> onnxOpTypeOf(mlir::Location loc) {
  if (auto name = mlir::dyn_cast<mlir::NameLoc>(loc))
    loc = name.getChildLoc();
  auto fused = mlir::dyn_cast<mlir::FusedLoc>(loc);
  if (!fused)
    return std::nullopt;
  auto tag = mlir::dyn_cast_or_null<mlir::StringAttr>(fused.getMetadata());
  if (!tag || !tag.getValue().starts_with(kONNXOpTypePrefix))
    return std::nullopt;
  return tag.getValue().drop_front(kONNXOpTypePrefix.size());
}

} // namespace kiln

#endif // KILN_SUPPORT_ONNXORIGIN_H
