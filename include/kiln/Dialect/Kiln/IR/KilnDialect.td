//===- KilnDialect.td - the kiln tensor dialect -------------*- tablegen -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_KILN_IR_KILNDIALECT_TD
#define KILN_DIALECT_KILN_IR_KILNDIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/CommonTypeConstraints.td"

def Kiln_Dialect : Dialect {
  let name = "kiln";
  let cppNamespace = "::kiln";
  let summary = "Kiln's value-semantics tensor graph dialect";
  let description = [{
    The hub of the compiler: a small core of tensor ops on ranked tensors of
    static shape, enough for MLPs, CNNs with BatchNorm and pooling, ResNets
    and decoder-only transformers, their losses and the shape ops exporters
    emit. Binary elementwise ops broadcast as NumPy (and ONNX) do. Result
    types are inferred from operands and attributes (`InferTypeOpInterface`),
    so a mistyped op fails verification; rules passes need (cost, and later
    differentiation and sharding) are op interfaces.
  }];
  let hasConstantMaterializer = 1;
}

class Kiln_Op<string mnemonic, list<Trait> traits = []>
    : Op<Kiln_Dialect, mnemonic, traits>;

// An elementwise op whose kernel reads element `i` of every operand before
// writing element `i` of its result, so the result may take the bytes of an
// operand of the same type (buffer assignment's in-place reuse).
def Kiln_InPlaceElementwise : NativeOpTrait<"InPlaceElementwise"> {
  let cppNamespace = "::kiln::trait";
}

def Kiln_Tensor : StaticShapeTensorOf<[AnyType]>;
def Kiln_FloatTensor : StaticShapeTensorOf<[AnyFloat]>;
def Kiln_BoolTensor : StaticShapeTensorOf<[I1]>;
def Kiln_IndexTensor : StaticShapeTensorOf<[I32, I64]>;

#endif // KILN_DIALECT_KILN_IR_KILNDIALECT_TD
