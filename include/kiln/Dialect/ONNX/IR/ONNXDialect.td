//===- ONNXDialect.td - the onnx import dialect -------------*- tablegen -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_ONNX_IR_ONNXDIALECT_TD
#define KILN_DIALECT_ONNX_IR_ONNXDIALECT_TD

include "mlir/IR/OpBase.td"

def ONNX_Dialect : Dialect {
  let name = "onnx";
  let cppNamespace = "::kiln::onnx";
  let summary = "The faithful import form of an ONNX graph";
  let description = [{
    The `onnx` dialect mirrors an ONNX `GraphProto` one to one: every `NodeProto`
    becomes one generic `onnx.node` op carrying its op type, domain, opset and
    attributes, with result types taken from ONNX shape inference and the node
    name kept as the op's location. It has no semantics of its own: all of them
    live in `--convert-onnx-to-kiln`, a registry of patterns keyed by
    (domain, op type, opset range).

    The graph becomes `func.func @forward`: graph inputs first, then the
    floating-point initializers (parameters), each argument tagged with its
    ONNX name (`onnx.name`) and, for initializers, `kiln.param`. Parameter
    values are not printed: the module attribute `kiln.weights` names the model
    file that holds them. Non-floating initializers (shapes, indices, masks)
    are `onnx.constant` ops.
  }];
}

class ONNX_Op<string mnemonic, list<Trait> traits = []>
    : Op<ONNX_Dialect, mnemonic, traits>;

#endif // KILN_DIALECT_ONNX_IR_ONNXDIALECT_TD
