//===- ONNXOps.td - onnx dialect ops ------------------------*- tablegen -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_ONNX_IR_ONNXOPS_TD
#define KILN_DIALECT_ONNX_IR_ONNXOPS_TD

include "kiln/Dialect/ONNX/IR/ONNXDialect.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def ONNX_NodeOp : ONNX_Op<"node"> {
  let summary = "one ONNX NodeProto, generically";
  let description = [{
    A node of the imported graph. `op_type`, `domain` (empty for the default
    `ai.onnx` domain) and `opset` (the version of that domain the model
    imports) identify the operator; `attrs` holds the node's attributes
    converted to MLIR attributes (ints as `i64`, floats as `f32`, strings,
    tensors as elements attributes, lists as arrays). An omitted optional input
    is the value of an `onnx.none`. Results are typed by ONNX shape inference;
    a dimension it could not resolve is `?`, an unknown rank `tensor<*x...>`.

    Example:

    ```mlir
    %y = onnx.node "Gemm"(%x, %w, %b) opset 17 {transB = 1 : i64}
        : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
        loc("/fc/Gemm")
    ```
  }];
  let arguments = (ins StrAttr:$op_type, DefaultValuedStrAttr<StrAttr, "">:$domain,
                   I64Attr:$opset, DictionaryAttr:$attrs,
                   Variadic<AnyType>:$inputs);
  let results = (outs Variadic<AnyType>:$outputs);
  let assemblyFormat = [{
    $op_type `(` $inputs `)` (`domain` $domain^)? `opset` $opset $attrs attr-dict
    `:` functional-type($inputs, $outputs)
  }];
  let extraClassDeclaration = [{
    /// The node's name (from its location), or "" when it had none.
    std::string getNodeName();
    /// A key naming this node stably: its name, or, for a node read from a
    /// .mlir file printed without locations, its `file:line:col`.
    std::string getNodeKey();
    /// The attribute `name` of the ONNX node, or null.
    ::mlir::Attribute getONNXAttr(::llvm::StringRef name) {
      return getAttrs().get(name);
    }
  }];
}

def ONNX_NoneOp : ONNX_Op<"none", [Pure]> {
  let summary = "an omitted optional ONNX input";
  let description = [{
    Stands for an input a node left empty (the empty name in ONNX).

    ```mlir
    %none = onnx.none
    ```
  }];
  let results = (outs NoneType:$result);
  let assemblyFormat = "attr-dict";
}

def ONNX_ConstantOp : ONNX_Op<"constant", [Pure, AllTypesMatch<["value", "result"]>]> {
  let summary = "a non-floating initializer";
  let description = [{
    An integer or boolean initializer (a shape, indices, a mask). Floating
    initializers are parameters (function arguments) instead.

    ```mlir
    %shape = onnx.constant dense<[2, -1]> : tensor<2xi64> loc("shape")
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$value attr-dict";
}

#endif // KILN_DIALECT_ONNX_IR_ONNXOPS_TD
