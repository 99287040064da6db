//===- KilnAttributes.h - the training contract's names ---------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The function names and the typed accessors of the discardable `kiln.*`
// attributes that the import, the training passes, the lowering and the plan
// writer pass to each other (docs/Training.md). The attribute names are
// KilnDialect's constants (KilnDialect.td) and the dialect verifier
// (KilnAttrs.cpp) checks every value, so an accessor may trust the type it
// reads: code reads and writes these attributes only through this header.
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_KILN_IR_KILNATTRIBUTES_H
#define KILN_DIALECT_KILN_IR_KILNATTRIBUTES_H

#include "kiln/Dialect/Kiln/IR/KilnEnums.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include <optional>
#include <string>

namespace kiln {

/// The imported model: inputs and parameters to outputs.
inline constexpr llvm::StringLiteral kForwardFuncName = "forward";
/// The training step --kiln-autodiff builds from @forward.
inline constexpr llvm::StringLiteral kTrainStepFuncName = "train_step";
/// `onnx.name` of @train_step's learning-rate input (tensor<f32>), which the
/// trainer feeds each step (the config's `lr_input`).
inline constexpr llvm::StringLiteral kLrInputName = "kiln.lr";
/// `onnx.name` of @train_step's 1-based step input (tensor<i64>; the
/// config's `step_input`).
inline constexpr llvm::StringLiteral kStepInputName = "kiln.step";
/// `onnx.name` of @train_step's loss-scale input (tensor<f32>, with
/// --kiln-autodiff loss-scale): backward's seed; the trainer feeds the
/// dynamic scale each step (the config's `loss_scale.input`).
inline constexpr llvm::StringLiteral kLossScaleInputName = "kiln.loss_scale";

//===----------------------------------------------------------------------===//
// Arguments
//===----------------------------------------------------------------------===//

/// Whether argument `arg` is a model parameter (`kiln.param`).
inline bool isParam(mlir::FunctionOpInterface f, unsigned arg) {
  return bool(f.getArgAttr(arg, KilnDialect::getParamAttrName()));
}
/// The role of parameter `arg` (`kiln.role`), if it has one.
inline std::optional<ParamRole> getRole(mlir::FunctionOpInterface f,
                                        unsigned arg) {
  auto s =
      f.getArgAttrOfType<mlir::StringAttr>(arg, KilnDialect::getRoleAttrName());
  return s ? symbolizeParamRole(s.getValue()) : std::nullopt;
}
/// Argument `arg`'s ONNX name (`onnx.name`: a model input or initializer,
/// or a name the training passes gave it), "arg<N>" when it has none: how
/// diagnostics and the plan name it.
inline std::string argName(mlir::FunctionOpInterface f, unsigned arg) {
  if (auto n = f.getArgAttrOfType<mlir::StringAttr>(arg, "onnx.name"))
    return n.getValue().str();
  return "arg" + std::to_string(arg);
}
/// Sets the role of parameter `arg`.
inline void setRole(mlir::FunctionOpInterface f, unsigned arg, ParamRole r) {
  f.setArgAttr(arg, KilnDialect::getRoleAttrName(),
               mlir::StringAttr::get(f->getContext(), stringifyParamRole(r)));
}
/// The initialiser of parameter `arg` (`kiln.init`), if it has one.
inline std::optional<ParamInit> getInit(mlir::FunctionOpInterface f,
                                        unsigned arg) {
  auto s =
      f.getArgAttrOfType<mlir::StringAttr>(arg, KilnDialect::getInitAttrName());
  return s ? symbolizeParamInit(s.getValue()) : std::nullopt;
}

/// Adds the attributes of a new parameter with `role` (and `init`, if any) to
/// the argument attributes `attrs`.
inline void addParamAttrs(mlir::MLIRContext *ctx, mlir::NamedAttrList &attrs,
                          ParamRole role,
                          std::optional<ParamInit> init = std::nullopt) {
  attrs.set(KilnDialect::getParamAttrName(), mlir::UnitAttr::get(ctx));
  attrs.set(KilnDialect::getRoleAttrName(),
            mlir::StringAttr::get(ctx, stringifyParamRole(role)));
  if (init)
    attrs.set(KilnDialect::getInitAttrName(),
              mlir::StringAttr::get(ctx, stringifyParamInit(*init)));
}

//===----------------------------------------------------------------------===//
// Results
//===----------------------------------------------------------------------===//

/// Whether result `res` is the loss (`kiln.loss`).
inline bool isLoss(mlir::FunctionOpInterface f, unsigned res) {
  return bool(f.getResultAttr(res, KilnDialect::getLossAttrName()));
}
/// The argument whose gradient `attrs` (a result's attributes) marks
/// (`kiln.grad_of`).
inline std::optional<unsigned> getGradOf(mlir::DictionaryAttr attrs) {
  auto i =
      attrs ? attrs.getAs<mlir::IntegerAttr>(KilnDialect::getGradOfAttrName())
            : nullptr;
  return i ? std::optional<unsigned>(i.getInt()) : std::nullopt;
}
/// The argument whose new value `attrs` (a result's attributes) marks
/// (`kiln.update`).
inline std::optional<unsigned> getUpdateOf(mlir::DictionaryAttr attrs) {
  auto i =
      attrs ? attrs.getAs<mlir::IntegerAttr>(KilnDialect::getUpdateAttrName())
            : nullptr;
  return i ? std::optional<unsigned>(i.getInt()) : std::nullopt;
}

//===----------------------------------------------------------------------===//
// Functions and modules
//===----------------------------------------------------------------------===//

/// The optimizer @train_step applies (`kiln.optimizer`), if one is attached.
inline std::optional<OptimizerKind> getOptimizer(mlir::Operation *f) {
  auto s =
      f->getAttrOfType<mlir::StringAttr>(KilnDialect::getOptimizerAttrName());
  return s ? symbolizeOptimizerKind(s.getValue()) : std::nullopt;
}
/// Records the optimizer @train_step applies.
inline void setOptimizer(mlir::Operation *f, OptimizerKind k) {
  f->setAttr(KilnDialect::getOptimizerAttrName(),
             mlir::StringAttr::get(f->getContext(), stringifyOptimizerKind(k)));
}

} // namespace kiln

#endif // KILN_DIALECT_KILN_IR_KILNATTRIBUTES_H
