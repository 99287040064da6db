//===- Passes.td - Kiln conversion passes -------------------*- tablegen -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#ifndef KILN_CONVERSION_PASSES_TD
#define KILN_CONVERSION_PASSES_TD

include "kiln/Dialect/Kiln/IR/KilnEnums.td"
include "mlir/Pass/PassBase.td"

def ConvertONNXToKilnPass : Pass<"convert-onnx-to-kiln", "mlir::ModuleOp"> {
  let summary = "Gives the imported onnx graph its semantics as kiln ops";
  let description = [{
    Rewrites every `onnx.node` with the pattern registered for its (domain,
    op type, opset range), visiting nodes in graph order so each sees its
    operands already converted and statically shaped. Shape-computation
    subgraphs on constants (`Shape -> Gather -> Unsqueeze -> Concat ->
    Reshape`, `ConstantOfShape`, `Range`, ...) fold to constants as they are
    converted, so exported models end with static shapes. The function's type
    is updated to the static result types at the end.

    A node without a pattern, or whose pattern cannot handle its attributes or
    operands, stops the pass with an error that names the node and op type;
    no `onnx` op is left behind on success.

    ```mlir
    // before
    %y = onnx.node "Relu"(%x) opset 17 {} : (tensor<4xf32>) -> tensor<4xf32>
    // after
    %y = kiln.relu %x : tensor<4xf32>
    ```
  }];
  let dependentDialects = ["::kiln::KilnDialect", "::mlir::func::FuncDialect"];
  let statistics = [
    Statistic<"numConverted", "converted-nodes", "Number of onnx nodes converted">,
  ];
}

def KilnLowerToRuntimePass : Pass<"kiln-lower-to-runtime", "mlir::ModuleOp"> {
  let summary = "Lowers kiln ops on tensors to krt kernel launches on buffers";
  let description = [{
    Rewrites every function of `kiln` ops into the `krt` form the runtime
    executes: tensors become buffers (`memref`s), each result of a `kiln` op a
    `krt.alloc` that a `krt.launch` of the op's kernel writes, with the op's
    attributes (default-valued ones included) as the launch's `params`.
    `kiln.constant` becomes `krt.constant` and `kiln.reshape` a `krt.view`
    (no copy). Ops marked `InPlaceElementwise` launch with `in_place`, so
    buffer assignment may write their result over a dying operand. Any op
    that is not a `kiln` op stops the pass with an error naming it.

    ```mlir
    // before
    %y = kiln.relu %x : tensor<4xf32>
    // after
    %0 = krt.alloc : memref<4xf32>
    krt.launch "relu" ins(%x : memref<4xf32>) outs(%0 : memref<4xf32>) {in_place}
    ```
  }];
  let options = [
    Kiln_EnumOption<"target", "target", Kiln_TargetKind, /*defaultCase=*/"CPU",
                    "The device whose runtime runs the program">,
  ];
  let dependentDialects = ["::kiln::krt::KRTDialect", "::mlir::func::FuncDialect"];
  let statistics = [
    Statistic<"numLaunches", "launches", "Number of kernel launches">,
    Statistic<"numViews", "views", "Number of reshapes that became views">,
  ];
}

#endif // KILN_CONVERSION_PASSES_TD
