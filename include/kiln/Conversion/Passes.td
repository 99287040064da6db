//===- Passes.td - Kiln conversion passes -------------------*- tablegen -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#ifndef KILN_CONVERSION_PASSES_TD
#define KILN_CONVERSION_PASSES_TD

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

#endif // KILN_CONVERSION_PASSES_TD
