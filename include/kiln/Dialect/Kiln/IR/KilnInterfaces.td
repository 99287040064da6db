//===- KilnInterfaces.td - op interfaces of the kiln dialect -*- tablegen -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The rules every pass needs from an op live here, as interfaces, so that a
// pass asks the op instead of switching over op kinds.
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_KILN_IR_KILNINTERFACES_TD
#define KILN_DIALECT_KILN_IR_KILNINTERFACES_TD

include "mlir/IR/OpBase.td"

def Kiln_CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::kiln";
  let description = [{
    The work an op does, for planners (fusion, pipeline balancing, overlap)
    and for `--kiln-print-cost`. Counts are for the op's static shapes: one
    fused multiply-add is 2 FLOPs; bytes are the operand and result bytes an
    unfused kernel would move.

    ```mlir
    // 2 * 4 * 8 * 16 = 1024 FLOPs
    %0 = kiln.matmul %a, %b : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    ```
  }];
  let methods = [
    InterfaceMethod<
      /*desc=*/[{Floating-point operations of one execution of the op.
                 The default is one per result element.}],
      /*retTy=*/"int64_t", /*methodName=*/"getFlops", /*args=*/(ins),
      /*methodBody=*/"",
      /*defaultImplementation=*/[{
        return ::kiln::detail::defaultFlops($_op.getOperation());
      }]>,
    InterfaceMethod<
      /*desc=*/[{Bytes read and written by an unfused kernel for the op:
                 the sizes of all tensor operands and results.}],
      /*retTy=*/"int64_t", /*methodName=*/"getBytesAccessed", /*args=*/(ins),
      /*methodBody=*/"",
      /*defaultImplementation=*/[{
        return ::kiln::detail::defaultBytesAccessed($_op.getOperation());
      }]>,
  ];
}


def Kiln_DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let cppNamespace = "::kiln";
  let description = [{
    The op's vector-Jacobian product, which `--kiln-autodiff` calls for every
    op on a path from a trainable parameter to the loss, in reverse order.
    Given the gradient of the loss with respect to each result, the op builds
    (with `builder`, before the function's return) the gradient with respect
    to each operand. Gradients have the type of the value they belong to.
  }];
  let methods = [
    InterfaceMethod<
      /*desc=*/[{Builds the operand gradients. `resultGrads` has one entry per
                 result; a null entry is a zero gradient (that result does not
                 reach the loss), and at least one is non-null.
                 `operandGrads` receives one entry per operand, null where no
                 gradient flows (integer operands, constants of the rule).
                 Fails with a diagnostic when the op cannot be differentiated
                 as configured.}],
      /*retTy=*/"::llvm::LogicalResult", /*methodName=*/"buildVJP",
      /*args=*/(ins "::mlir::OpBuilder &":$builder,
                    "::llvm::ArrayRef<::mlir::Value>":$resultGrads,
                    "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>,
  ];
}

def Kiln_StatefulOpInterface : OpInterface<"StatefulOpInterface"> {
  let cppNamespace = "::kiln";
  let description = [{
    An op that, in training, returns the next value of some of its operands
    (BatchNorm's running statistics). `--kiln-autodiff` threads each such
    result back into the parameter the operand reads, as ONNX specifies.
  }];
  let methods = [
    InterfaceMethod<
      /*desc=*/[{Pairs (operand index, result index): the result is the
                 operand's value after this training step.}],
      /*retTy=*/"void", /*methodName=*/"getStateUpdates",
      /*args=*/(ins "::llvm::SmallVectorImpl<std::pair<unsigned, unsigned>> &":$updates)>,
  ];
}

def Kiln_ShardingRuleOpInterface : OpInterface<"ShardingRuleOpInterface"> {
  let cppNamespace = "::kiln";
  let description = [{
    How the op's dimensions shard (ShardingRule.h): its factors (parallel,
    reduction with the reduction that combines partial results, or
    per-shard), and the factor of each operand and result dimension.
    `--kiln-shard-propagation` and `--kiln-partition` are generic code over
    this rule; every kiln op has one, and an op without one is a compile
    error naming it.

    ```mlir
    // (m, k), (k, n) -> (m, n); k: reduction sum
    %y = kiln.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    ```
  }];
  let methods = [
    InterfaceMethod<
      /*desc=*/[{The op's sharding rule for its current types and attributes.}],
      /*retTy=*/"::kiln::ShardingRule", /*methodName=*/"getShardingRule",
      /*args=*/(ins)>,
    InterfaceMethod<
      /*desc=*/[{After `--kiln-partition` gave the op its per-rank operand
        and result types: rewrites attributes that spell a whole
        dimension's size (a slice's limit over a dimension it leaves
        untouched) to the per-rank size, or records where the rank's block
        lies in the whole (dropout numbers its elements in the whole
        tensor; a gather from a table split on the gathered axis looks up
        this rank's rows only). `operandShardings` and `resultShardings`
        are the operands' and results' `kiln.sharding`s (axis names per
        dimension; null for a non-tensor), `wholeOperandTypes` and
        `wholeResultTypes` their types before partitioning. Most ops have
        none.}],
      /*retTy=*/"void", /*methodName=*/"localizeAttributes",
      /*args=*/(ins "::llvm::ArrayRef<::mlir::Attribute>":$operandShardings,
                    "::llvm::ArrayRef<::mlir::Attribute>":$resultShardings,
                    "::mlir::TypeRange":$wholeOperandTypes,
                    "::mlir::TypeRange":$wholeResultTypes),
      /*methodBody=*/"", /*defaultImplementation=*/"return;">,
  ];
}

def Kiln_PrecisionOpInterface : OpInterface<"PrecisionOpInterface"> {
  let cppNamespace = "::kiln";
  let description = [{
    Where the op computes when the model trains in bf16 or fp16
    (`--kiln-mixed-precision`): its PrecisionClass (KilnEnums.td), low,
    float32, follow or keep. Every kiln op states one
    (KilnPrecisionRules.cpp); an op without one is a compile error naming it.

    ```mlir
    // low: computes in bf16, its f32 operands cast down
    %y = kiln.matmul %x, %w : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
    ```
  }];
  let methods = [
    InterfaceMethod<
      /*desc=*/[{The op's precision class.}],
      /*retTy=*/"::kiln::PrecisionClass", /*methodName=*/"getPrecisionClass",
      /*args=*/(ins)>,
  ];
}

#endif // KILN_DIALECT_KILN_IR_KILNINTERFACES_TD
