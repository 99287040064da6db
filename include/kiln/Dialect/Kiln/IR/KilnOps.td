//===- KilnOps.td - kiln dialect ops ------------------------*- tablegen -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The core tensor ops. Every op is Pure (value semantics), has a summary, a
// description with an example, an assembly format, and infers its result
// types from operands and attributes, so the verifier checks them.
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_KILN_IR_KILNOPS_TD
#define KILN_DIALECT_KILN_IR_KILNOPS_TD

include "kiln/Dialect/Kiln/IR/KilnDialect.td"
include "kiln/Dialect/Kiln/IR/KilnInterfaces.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// Ops with a vector-Jacobian product (lib/Dialect/Kiln/IR/KilnVJP.cpp).
defvar Kiln_Differentiable = DeclareOpInterfaceMethods<Kiln_DifferentiableOpInterface>;

// An op whose result types are computed by a C++ `inferReturnTypes`.
class Kiln_InferOp<string mnemonic, list<Trait> traits = [],
                   list<string> costMethods = [],
                   list<string> shardingMethods = []>
    : Kiln_Op<mnemonic, !listconcat([Pure, InferTypeOpAdaptor,
                                     DeclareOpInterfaceMethods<Kiln_CostOpInterface,
                                                               costMethods>],
                                    traits), shardingMethods> {
  let assemblyFormat =
      "operands attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

def Kiln_ConstantOp : Kiln_Op<"constant", [ConstantLike, Pure,
    AllTypesMatch<["value", "result"]>]> {
  let summary = "a constant tensor";
  let description = [{
    A tensor constant. Large values are `dense_resource` blobs so the IR text
    stays readable.

    ```mlir
    %c = kiln.constant dense<[2, 3]> : tensor<2xi64>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
  let builders = [
    OpBuilder<(ins "::mlir::ElementsAttr":$value), [{
      build($_builder, $_state, value.getType(), value);
    }]>];
}

//===----------------------------------------------------------------------===//
// Elementwise unary
//===----------------------------------------------------------------------===//

class Kiln_UnaryOp<string mnemonic, string what, Type operandType = Kiln_FloatTensor,
                   list<Trait> traits = []>
    : Kiln_Op<mnemonic, !listconcat([Pure, Elementwise, SameOperandsAndResultType,
        Kiln_InPlaceElementwise,
        DeclareOpInterfaceMethods<Kiln_CostOpInterface>], traits)> {
  let summary = "elementwise " # what;
  let description = "Computes " # what # " of each element.\n\n"
      # "```mlir\n%y = kiln." # mnemonic # " %x : tensor<4x8xf32>\n```";
  let arguments = (ins operandType:$input);
  let results = (outs operandType:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Kiln_NegOp : Kiln_UnaryOp<"neg", "-x", Kiln_Tensor, [Kiln_Differentiable]>;
def Kiln_AbsOp : Kiln_UnaryOp<"abs", "|x|", Kiln_Tensor, [Kiln_Differentiable]>;
def Kiln_SignOp : Kiln_UnaryOp<"sign", "the sign (-1, 0, 1)", Kiln_Tensor, [Kiln_Differentiable]>;
def Kiln_ExpOp : Kiln_UnaryOp<"exp", "e^x", Kiln_FloatTensor, [Kiln_Differentiable]>;
def Kiln_LogOp : Kiln_UnaryOp<"log", "the natural logarithm", Kiln_FloatTensor, [Kiln_Differentiable]>;
def Kiln_TanhOp : Kiln_UnaryOp<"tanh", "the hyperbolic tangent", Kiln_FloatTensor, [Kiln_Differentiable]>;
def Kiln_SigmoidOp : Kiln_UnaryOp<"sigmoid", "the logistic sigmoid 1/(1+e^-x)", Kiln_FloatTensor, [Kiln_Differentiable]>;
def Kiln_ReluOp : Kiln_UnaryOp<"relu", "max(x, 0)", Kiln_FloatTensor, [Kiln_Differentiable]>;
def Kiln_SqrtOp : Kiln_UnaryOp<"sqrt", "the square root", Kiln_FloatTensor, [Kiln_Differentiable]>;
def Kiln_RsqrtOp : Kiln_UnaryOp<"rsqrt", "the reciprocal square root", Kiln_FloatTensor, [Kiln_Differentiable]>;
def Kiln_ReciprocalOp : Kiln_UnaryOp<"reciprocal", "1/x", Kiln_FloatTensor, [Kiln_Differentiable]>;
def Kiln_ErfOp : Kiln_UnaryOp<"erf", "the Gauss error function", Kiln_FloatTensor, [Kiln_Differentiable]>;
def Kiln_SoftplusOp : Kiln_UnaryOp<"softplus", "log(1 + e^x)", Kiln_FloatTensor, [Kiln_Differentiable]>;
def Kiln_FloorOp : Kiln_UnaryOp<"floor", "the floor", Kiln_FloatTensor, [Kiln_Differentiable]>;
def Kiln_RoundOp : Kiln_UnaryOp<"round", "the nearest integer, halves to even", Kiln_FloatTensor, [Kiln_Differentiable]>;
def Kiln_CeilOp : Kiln_UnaryOp<"ceil", "the ceiling", Kiln_FloatTensor, [Kiln_Differentiable]>;
def Kiln_SinOp : Kiln_UnaryOp<"sin", "the sine", Kiln_FloatTensor, [Kiln_Differentiable]>;
def Kiln_CosOp : Kiln_UnaryOp<"cos", "the cosine", Kiln_FloatTensor, [Kiln_Differentiable]>;
def Kiln_NotOp : Kiln_UnaryOp<"not", "logical negation", Kiln_BoolTensor>;

def Kiln_LeakyReluOp : Kiln_UnaryOp<"leaky_relu", "x if x >= 0 else alpha * x", Kiln_FloatTensor, [Kiln_Differentiable]> {
  let arguments = (ins Kiln_FloatTensor:$input, F32Attr:$alpha);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}
def Kiln_EluOp : Kiln_UnaryOp<"elu", "x if x > 0 else alpha * (e^x - 1)", Kiln_FloatTensor, [Kiln_Differentiable]> {
  let arguments = (ins Kiln_FloatTensor:$input, F32Attr:$alpha);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}
def Kiln_GeluOp : Kiln_UnaryOp<"gelu", "x * Phi(x) (`approximate = \"tanh\"` for the tanh form)", Kiln_FloatTensor, [Kiln_Differentiable]> {
  let arguments = (ins Kiln_FloatTensor:$input,
                   DefaultValuedStrAttr<StrAttr, "none">:$approximate);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Kiln_CastOp : Kiln_Op<"cast", [Pure, Elementwise, SameOperandsAndResultShape,
    Kiln_Differentiable,
    DeclareOpInterfaceMethods<Kiln_CostOpInterface>]> {
  let summary = "elementwise conversion of the element type";
  let description = [{
    Converts each element to the result's element type: floats round to
    nearest even, float to integer truncates toward zero, anything to `i1` is
    `x != 0`.

    ```mlir
    %y = kiln.cast %x : tensor<4xf32> -> tensor<4xi64>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise binary and ternary, with NumPy broadcasting
//===----------------------------------------------------------------------===//

class Kiln_BinaryOp<string mnemonic, string what, string kind = "arith",
                    Type operandType = Kiln_Tensor, list<Trait> traits = []>
    : Kiln_InferOp<mnemonic, !listconcat([Kiln_InPlaceElementwise], traits)> {
  let summary = "elementwise " # what # ", broadcasting";
  let description = "Computes " # what # " elementwise. The operands have "
      # "the same element type and broadcast as in NumPy: shapes align at the "
      # "right, and a dimension of 1 stretches to the other's size.\n\n"
      # "```mlir\n%z = kiln." # mnemonic
      # " %x, %y : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8x"
      # !if(!eq(kind, "compare"), "i1", "f32") # ">\n```";
  let arguments = (ins operandType:$lhs, operandType:$rhs);
  let results = (outs Kiln_Tensor:$result);
  let hasFolder = 1;
  string resultKind = kind;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *ctx, std::optional<::mlir::Location> loc,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &results) {
      return ::kiln::detail::inferBroadcastTypes(
          loc, {adaptor.getLhs().getType(), adaptor.getRhs().getType()},
          /*boolResult=*/}] # !if(!eq(kind, "compare"), "true", "false") # [{,
          results);
    }
  }];
}

def Kiln_AddOp : Kiln_BinaryOp<"add", "x + y", "arith", Kiln_Tensor, [Kiln_Differentiable]>;
def Kiln_SubOp : Kiln_BinaryOp<"sub", "x - y", "arith", Kiln_Tensor, [Kiln_Differentiable]>;
def Kiln_MulOp : Kiln_BinaryOp<"mul", "x * y", "arith", Kiln_Tensor, [Kiln_Differentiable]>;
def Kiln_DivOp : Kiln_BinaryOp<"div", "x / y (integers truncate toward zero)", "arith", Kiln_Tensor, [Kiln_Differentiable]>;
def Kiln_PowOp : Kiln_BinaryOp<"pow", "x ^ y", "arith", Kiln_Tensor, [Kiln_Differentiable]>;
def Kiln_MaxOp : Kiln_BinaryOp<"max", "max(x, y)", "arith", Kiln_Tensor, [Kiln_Differentiable]>;
def Kiln_MinOp : Kiln_BinaryOp<"min", "min(x, y)", "arith", Kiln_Tensor, [Kiln_Differentiable]>;
def Kiln_EqualOp : Kiln_BinaryOp<"equal", "x == y", "compare">;
def Kiln_LessOp : Kiln_BinaryOp<"less", "x < y", "compare">;
def Kiln_LessEqualOp : Kiln_BinaryOp<"less_equal", "x <= y", "compare">;
def Kiln_GreaterOp : Kiln_BinaryOp<"greater", "x > y", "compare">;
def Kiln_GreaterEqualOp : Kiln_BinaryOp<"greater_equal", "x >= y", "compare">;
def Kiln_AndOp : Kiln_BinaryOp<"and", "logical and", "arith", Kiln_BoolTensor>;
def Kiln_OrOp : Kiln_BinaryOp<"or", "logical or", "arith", Kiln_BoolTensor>;
def Kiln_XorOp : Kiln_BinaryOp<"xor", "logical exclusive or", "arith", Kiln_BoolTensor>;

def Kiln_SelectOp : Kiln_InferOp<"select", [Kiln_Differentiable, Kiln_InPlaceElementwise]> {
  let summary = "elementwise choice, broadcasting";
  let description = [{
    `cond ? on_true : on_false` per element, the three operands broadcast
    together (ONNX `Where`).

    ```mlir
    %y = kiln.select %mask, %scores, %neg_inf
        : (tensor<1x1x8x8xi1>, tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins Kiln_BoolTensor:$cond, Kiln_Tensor:$on_true,
                   Kiln_Tensor:$on_false);
  let results = (outs Kiln_Tensor:$result);
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Linear algebra and convolution
//===----------------------------------------------------------------------===//

def Kiln_MatmulOp : Kiln_InferOp<"matmul", [Kiln_Differentiable], ["getFlops"]> {
  let summary = "batched matrix product";
  let description = [{
    `[..., M, K] x [..., K, N] -> [..., M, N]`; both operands have rank 2 or
    more and their batch dimensions broadcast. `transpose_lhs`/`transpose_rhs`
    swap the last two dimensions of an operand before the product.

    ```mlir
    %y = kiln.matmul %x, %w {transpose_rhs = true}
        : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$lhs, Kiln_FloatTensor:$rhs,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_lhs,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs);
  let results = (outs Kiln_FloatTensor:$result);
  let hasCanonicalizer = 1;
}

def Kiln_ConvOp : Kiln_InferOp<"conv", [Kiln_Differentiable], ["getFlops"]> {
  let summary = "N-d convolution (cross-correlation), grouped";
  let description = [{
    `input [N, C, D1..Dn]`, `weight [O, C/groups, K1..Kn]` -> `[N, O, ...]`.
    `padding` holds the begin pads of each spatial dimension, then the end
    pads (ONNX order); `strides` and `dilations` have one entry per spatial
    dimension. Bias is a separate broadcast `kiln.add`.

    ```mlir
    %y = kiln.conv %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>,
                           padding = array<i64: 1, 1, 1, 1>, groups = 1 : i64}
        : (tensor<2x3x8x8xf32>, tensor<16x3x3x3xf32>) -> tensor<2x16x8x8xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$weight,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$dilations,
                   DenseI64ArrayAttr:$padding, I64Attr:$groups);
  let results = (outs Kiln_FloatTensor:$result);
  // Slices off kernel taps that only ever read padding (KilnCanonicalize.cpp).
  let hasCanonicalizer = 1;
}

def Kiln_ConvTransposeOp : Kiln_InferOp<"conv_transpose", [], ["getFlops"]> {
  let summary = "N-d transposed convolution, grouped";
  let description = [{
    The gradient of `kiln.conv` with respect to its input, as ONNX
    `ConvTranspose` defines it: `input [N, C, D1..Dn]`, `weight [C, O/groups,
    K1..Kn]`; output size per spatial dim is `stride * (in - 1) +
    output_padding + ((k - 1) * dilation + 1) - pad_begin - pad_end`.

    ```mlir
    %y = kiln.conv_transpose %x, %w {strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>,
            padding = array<i64: 0, 0, 0, 0>, output_padding = array<i64: 0, 0>, groups = 1 : i64}
        : (tensor<1x4x4x4xf32>, tensor<4x2x2x2xf32>) -> tensor<1x2x8x8xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$weight,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$dilations,
                   DenseI64ArrayAttr:$padding, DenseI64ArrayAttr:$output_padding,
                   I64Attr:$groups);
  let results = (outs Kiln_FloatTensor:$result);
}

class Kiln_PoolOp<string mnemonic, string what, list<Trait> traits = []>
    : Kiln_InferOp<mnemonic, traits> {
  let summary = what # " pooling over the spatial dimensions";
  let description = "Pools `[N, C, D1..Dn]` windows of `kernel` (per spatial "
      # "dim) with `strides`, `dilations` and `padding` (begin pads, then end "
      # "pads). Output size: `floor((in + pads - dilation*(k-1) - 1) / stride) + 1`; "
      # "ceil-mode pooling is expressed by extra end padding that never "
      # "contributes.\n\n```mlir\n%y = kiln." # mnemonic
      # " %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, "
      # "dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>}\n"
      # "    : (tensor<1x3x8x8xf32>) -> tensor<1x3x4x4xf32>\n```";
  let results = (outs Kiln_FloatTensor:$result);
}

def Kiln_MaxPoolOp : Kiln_PoolOp<"max_pool", "max", [Kiln_Differentiable]> {
  let arguments = (ins Kiln_FloatTensor:$input, DenseI64ArrayAttr:$kernel,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$dilations,
                   DenseI64ArrayAttr:$padding);
}

def Kiln_AvgPoolOp : Kiln_PoolOp<"avg_pool", "average", [Kiln_Differentiable]> {
  let arguments = (ins Kiln_FloatTensor:$input, DenseI64ArrayAttr:$kernel,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$dilations,
                   DenseI64ArrayAttr:$padding,
                   DefaultValuedAttr<BoolAttr, "false">:$count_include_pad,
                   DefaultValuedAttr<DenseI64ArrayAttr, "{}">:$ceil_pad);
  let description = [{
    Averages windows of `[N, C, D1..Dn]`. With `count_include_pad`, the
    divisor counts the `padding` elements but never the `ceil_pad` ones (the
    extra end padding ceil-mode pooling adds, one entry per spatial dim).

    ```mlir
    %y = kiln.avg_pool %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>,
                           dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>}
        : (tensor<1x3x8x8xf32>) -> tensor<1x3x4x4xf32>
    ```
  }];
}

//===----------------------------------------------------------------------===//
// Normalisation and softmax
//===----------------------------------------------------------------------===//

def Kiln_BatchNormOp : Kiln_InferOp<"batch_norm"> {
  let summary = "batch normalisation with given statistics (inference)";
  let description = [{
    `y = scale * (x - mean) / sqrt(var + epsilon) + bias` over the channel
    axis 1 of `[N, C, ...]`; scale, bias, mean and var are `[C]`.

    ```mlir
    %y = kiln.batch_norm %x, %s, %b, %m, %v {epsilon = 1.0e-05 : f32}
        : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
        -> tensor<2x3x4x4xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$scale,
                   Kiln_FloatTensor:$bias, Kiln_FloatTensor:$mean,
                   Kiln_FloatTensor:$var, F32Attr:$epsilon);
  let results = (outs Kiln_FloatTensor:$result);
}

def Kiln_BatchNormTrainOp : Kiln_InferOp<"batch_norm_train", [Kiln_Differentiable,
    DeclareOpInterfaceMethods<Kiln_StatefulOpInterface>]> {
  let summary = "batch normalisation with batch statistics (training)";
  let description = [{
    Normalises with the mean and biased variance of the batch over all axes but
    the channel axis 1, and returns the updated running statistics as ONNX
    `BatchNormalization` (training_mode) defines them:
    `running = running * momentum + batch * (1 - momentum)`, where the running
    variance takes the biased batch variance, as ONNX's reference and test
    data do. With `unbiased_running_var` the running variance takes the
    unbiased batch variance (N/(N-1) times the biased one), as PyTorch does;
    the normalisation itself always uses the biased variance.

    ```mlir
    %y, %rm, %rv = kiln.batch_norm_train %x, %s, %b, %m, %v
        {epsilon = 1.0e-05 : f32, momentum = 0.9 : f32}
        : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
        -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$scale,
                   Kiln_FloatTensor:$bias, Kiln_FloatTensor:$running_mean,
                   Kiln_FloatTensor:$running_var, F32Attr:$epsilon,
                   F32Attr:$momentum,
                   DefaultValuedAttr<BoolAttr, "false">:$unbiased_running_var);
  let results = (outs Kiln_FloatTensor:$result, Kiln_FloatTensor:$new_running_mean,
                 Kiln_FloatTensor:$new_running_var);
}

def Kiln_LayerNormOp : Kiln_InferOp<"layer_norm", [Kiln_Differentiable]> {
  let summary = "layer normalisation over the trailing dimensions";
  let description = [{
    Normalises over dimensions `axis..rank-1` with the biased variance, then
    applies `scale` and `bias`, whose shape is those trailing dimensions. Also
    returns the mean and the reciprocal standard deviation, of the input's
    shape with the normalised dimensions set to 1.

    ```mlir
    %y, %mean, %rstd = kiln.layer_norm %x, %g, %b {axis = 2 : i64, epsilon = 1.0e-05 : f32}
        : (tensor<2x8x32xf32>, tensor<32xf32>, tensor<32xf32>)
        -> (tensor<2x8x32xf32>, tensor<2x8x1xf32>, tensor<2x8x1xf32>)
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$scale,
                   Kiln_FloatTensor:$bias, I64Attr:$axis, F32Attr:$epsilon);
  let results = (outs Kiln_FloatTensor:$result, Kiln_FloatTensor:$mean,
                 Kiln_FloatTensor:$inv_std_dev);
}

class Kiln_SoftmaxLikeOp<string mnemonic, string what>
    : Kiln_InferOp<mnemonic, [Kiln_Differentiable]> {
  let summary = what # " along one axis";
  let description = "Computes " # what # " along `axis` (non-negative), "
      # "stably (the maximum is subtracted first).\n\n```mlir\n%y = kiln."
      # mnemonic # " %x {axis = 1 : i64} : (tensor<4x10xf32>) -> tensor<4x10xf32>\n```";
  let arguments = (ins Kiln_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Kiln_FloatTensor:$result);
}
def Kiln_SoftmaxOp : Kiln_SoftmaxLikeOp<"softmax", "softmax">;
def Kiln_LogSoftmaxOp : Kiln_SoftmaxLikeOp<"log_softmax", "log-softmax">;

def Kiln_DropoutOp : Kiln_InferOp<"dropout", [Kiln_Differentiable], [],
                                  ["localizeAttributes"]> {
  let summary = "training-mode dropout";
  let description = [{
    Zeroes each element with probability `ratio` and scales the rest by
    `1 / (1 - ratio)`; also returns the keep mask. The mask comes from a
    counter-based generator keyed by the run's seed, the step and `seed`
    (this op's stream), so resumed and multi-rank runs reproduce it.
    Elements are numbered in the whole tensor: after partitioning, `split`
    names per dimension the mesh axes splitting it ("" whole, axes joined
    by '+') and `whole_shape` is the unsplit shape, so a rank's block gets
    the masks of its elements in the 1-rank run (without them, only a
    batch split over dp, the runtime's batch shard).

    ```mlir
    %y, %mask = kiln.dropout %x {ratio = 1.0e-01 : f32, seed = 0 : i64}
        : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xi1>)
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, F32Attr:$ratio,
                   DefaultValuedAttr<I64Attr, "0">:$seed,
                   OptionalAttr<StrArrayAttr>:$split,
                   OptionalAttr<DenseI64ArrayAttr>:$whole_shape);
  let results = (outs Kiln_FloatTensor:$result, Kiln_BoolTensor:$mask);
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class Kiln_ReduceOp<string mnemonic, string what, list<Trait> traits = []>
    : Kiln_InferOp<mnemonic, traits> {
  let summary = what # " over some axes";
  let description = "Reduces with " # what # " over `axes` (non-negative, "
      # "sorted, unique); `keepdims` keeps them as size 1.\n\n```mlir\n%y = kiln."
      # mnemonic # " %x {axes = array<i64: 1>, keepdims = false}\n"
      # "    : (tensor<4x10xf32>) -> tensor<4xf32>\n```";
  let arguments = (ins Kiln_Tensor:$input, DenseI64ArrayAttr:$axes,
                   DefaultValuedAttr<BoolAttr, "true">:$keepdims);
  let results = (outs Kiln_Tensor:$result);
}
def Kiln_ReduceSumOp : Kiln_ReduceOp<"reduce_sum", "a sum", [Kiln_Differentiable]> { let hasFolder = 1; }
def Kiln_ReduceMeanOp : Kiln_ReduceOp<"reduce_mean", "the mean", [Kiln_Differentiable]>;
// ONNX ReduceSumSquare, and the optimizer's gradient norm: one pass, no
// squared temporary.
def Kiln_ReduceSumSquareOp : Kiln_ReduceOp<"reduce_sum_square", "a sum of squares",
                                           [Kiln_Differentiable]>;
def Kiln_ReduceMaxOp : Kiln_ReduceOp<"reduce_max", "the maximum">;
def Kiln_ReduceMinOp : Kiln_ReduceOp<"reduce_min", "the minimum">;
def Kiln_ReduceProdOp : Kiln_ReduceOp<"reduce_prod", "a product"> { let hasFolder = 1; }

class Kiln_ArgReduceOp<string mnemonic, string what> : Kiln_InferOp<mnemonic> {
  let summary = "index of the " # what # " along one axis";
  let description = "The `i64` index of the " # what # " along `axis`; ties "
      # "take the first index, or the last with `select_last_index`.\n\n"
      # "```mlir\n%i = kiln." # mnemonic # " %x {axis = 1 : i64, keepdims = false}\n"
      # "    : (tensor<4x10xf32>) -> tensor<4xi64>\n```";
  let arguments = (ins Kiln_Tensor:$input, I64Attr:$axis,
                   DefaultValuedAttr<BoolAttr, "true">:$keepdims,
                   DefaultValuedAttr<BoolAttr, "false">:$select_last_index);
  let results = (outs StaticShapeTensorOf<[I64]>:$result);
}
def Kiln_ArgMaxOp : Kiln_ArgReduceOp<"argmax", "maximum">;
def Kiln_ArgMinOp : Kiln_ArgReduceOp<"argmin", "minimum">;

//===----------------------------------------------------------------------===//
// Shape and data movement
//===----------------------------------------------------------------------===//

def Kiln_ReshapeOp : Kiln_Op<"reshape", [Pure, Kiln_Differentiable,
    DeclareOpInterfaceMethods<Kiln_CostOpInterface, ["getFlops"]>]> {
  let summary = "same elements, new static shape";
  let description = [{
    Reinterprets the row-major elements of the input with the result's shape;
    the element counts agree.

    ```mlir
    %y = kiln.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_BroadcastOp : Kiln_Op<"broadcast", [Pure, Kiln_Differentiable,
    DeclareOpInterfaceMethods<Kiln_CostOpInterface, ["getFlops"]>]> {
  let summary = "NumPy broadcast to a static shape";
  let description = [{
    Broadcasts the input to the result's shape under NumPy rules (ONNX
    `Expand`); the input's shape must broadcast to it exactly.

    ```mlir
    %y = kiln.broadcast %x : tensor<1x4xf32> -> tensor<3x4xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_TransposeOp : Kiln_InferOp<"transpose", [Kiln_Differentiable], ["getFlops"]> {
  let summary = "permutes dimensions";
  let description = [{
    Result dimension `i` is input dimension `perm[i]`.

    ```mlir
    %y = kiln.transpose %x {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs Kiln_Tensor:$result);
  let hasFolder = 1;
}

def Kiln_SliceOp : Kiln_InferOp<"slice", [Kiln_Differentiable], ["getFlops"],
                                 ["localizeAttributes"]> {
  let summary = "static strided slice";
  let description = [{
    Per dimension, the elements `start, start + stride, ...` before `limit`.
    Starts and limits are already clamped; a negative stride walks backwards
    (then `limit` may be -1, meaning "through index 0").

    ```mlir
    %y = kiln.slice %x {starts = array<i64: 0, 1>, limits = array<i64: 2, 4>,
                        strides = array<i64: 1, 2>} : (tensor<2x4xf32>) -> tensor<2x2xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input, DenseI64ArrayAttr:$starts,
                   DenseI64ArrayAttr:$limits, DenseI64ArrayAttr:$strides);
  let results = (outs Kiln_Tensor:$result);
  let hasFolder = 1;
}

def Kiln_ConcatOp : Kiln_InferOp<"concat", [Kiln_Differentiable], ["getFlops"]> {
  let summary = "joins tensors along an axis";
  let description = [{
    ```mlir
    %y = kiln.concat %a, %b {axis = 0 : i64}
        : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<5x4xf32>
    ```
  }];
  let arguments = (ins Variadic<Kiln_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs Kiln_Tensor:$result);
  let hasFolder = 1;
}

def Kiln_PadOp : Kiln_InferOp<"pad", [Kiln_Differentiable], ["getFlops"]> {
  let summary = "pads each dimension";
  let description = [{
    Adds `low[i]` elements before and `high[i]` after dimension `i` (negative
    values crop). `mode` is `constant` (with `value`), `reflect` or `edge`.

    ```mlir
    %y = kiln.pad %x {low = array<i64: 0, 1>, high = array<i64: 0, 1>, mode = "constant",
                      value = 0.0 : f64} : (tensor<2x4xf32>) -> tensor<2x6xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input, DenseI64ArrayAttr:$low,
                   DenseI64ArrayAttr:$high,
                   DefaultValuedStrAttr<StrAttr, "constant">:$mode,
                   DefaultValuedAttr<F64Attr, "0.0">:$value);
  let results = (outs Kiln_Tensor:$result);
}

def Kiln_GatherOp : Kiln_InferOp<"gather", [Kiln_Differentiable], ["getFlops"],
                                 ["localizeAttributes"]> {
  let summary = "takes slices along an axis by index (embedding lookup)";
  let description = [{
    `result[i..., j..., k...] = input[i..., indices[j...], k...]` with `axis`
    the position of the gathered dimension (ONNX `Gather`, NumPy `take`).
    Negative indices count from the end; an index out of range is an error at
    run time. After partitioning, an input split on `axis` (a vocab-parallel
    embedding) has `split` (the mesh axes, '+'-joined) and `whole_size` (the
    axis's whole size): each rank takes the rows it holds, indices counted
    in the whole, and zeros elsewhere (the sum over the ranks is the whole
    lookup).

    ```mlir
    %e = kiln.gather %table, %ids {axis = 0 : i64}
        : (tensor<100x32xf32>, tensor<2x8xi64>) -> tensor<2x8x32xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input, Kiln_IndexTensor:$indices, I64Attr:$axis,
                   OptionalAttr<StrAttr>:$split, OptionalAttr<I64Attr>:$whole_size);
  let results = (outs Kiln_Tensor:$result);
  let hasFolder = 1;
}

def Kiln_GatherElementsOp : Kiln_InferOp<"gather_elements", [Kiln_Differentiable],
                                         ["getFlops"]> {
  let summary = "picks one element along an axis per index (ONNX GatherElements)";
  let description = [{
    `indices` has the input's rank and, off `axis`, dimensions no larger
    than the input's; the result has the indices' shape and
    `result[i...] = input[i_0, .., indices[i...], .., i_r-1]` with the index
    at position `axis` (NumPy `take_along_axis`). Negative indices count
    from the end; an index out of range is an error at run time.

    ```mlir
    %y = kiln.gather_elements %x, %i {axis = 1 : i64}
        : (tensor<3x5xf32>, tensor<3x1xi64>) -> tensor<3x1xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input, Kiln_IndexTensor:$indices, I64Attr:$axis);
  let results = (outs Kiln_Tensor:$result);
}

def Kiln_ScatterElementsOp : Kiln_InferOp<"scatter_elements", [Kiln_Differentiable],
                                          ["getFlops"]> {
  let summary = "writes one element along an axis per index (ONNX ScatterElements)";
  let description = [{
    `indices` and `updates` have one shape, of the data's rank, no larger
    than the data's off `axis`; the result is `data` with
    `result[i_0, .., indices[i...], .., i_r-1] = updates[i...]` (the index
    at position `axis`), or combined with the element there by `reduction`
    (`add`, `mul`, `max`, `min`), in index order. Negative indices count
    from the end; an index out of range is an error at run time. With
    `reduction = "none"` and a repeated index the last update wins (ONNX
    leaves it undefined). Gradients: `updates` gathers the result's
    gradient; `data` passes it where no index writes (`none`) or everywhere
    (`add`); `mul`, `max` and `min` have none.

    ```mlir
    %y = kiln.scatter_elements %x, %i, %u {axis = 1 : i64, reduction = "add"}
        : (tensor<3x5xf32>, tensor<3x2xi64>, tensor<3x2xf32>) -> tensor<3x5xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$data, Kiln_IndexTensor:$indices,
                   Kiln_Tensor:$updates, I64Attr:$axis,
                   DefaultValuedStrAttr<StrAttr, "none">:$reduction);
  let results = (outs Kiln_Tensor:$result);
}

def Kiln_ScatterNDOp : Kiln_InferOp<"scatter_nd", [], ["getFlops"]> {
  let summary = "writes slices at N-dimensional indices (ONNX ScatterND)";
  let description = [{
    `indices` is `[i..., q]` with `q` at most the data's rank; `updates` is
    `[i..., data dims q...]`. The result is `data` with the slice
    `data[indices[i..., :]]` replaced by `updates[i...]`, or combined with
    it by `reduction` (`add`, `mul`, `max`, `min`) in index order. Negative
    indices count from the end; one out of range is an error at run time.
    It has no gradient.

    ```mlir
    %y = kiln.scatter_nd %x, %i, %u {reduction = "none"}
        : (tensor<4x4xf32>, tensor<2x1xi64>, tensor<2x4xf32>) -> tensor<4x4xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$data, Kiln_IndexTensor:$indices,
                   Kiln_Tensor:$updates,
                   DefaultValuedStrAttr<StrAttr, "none">:$reduction);
  let results = (outs Kiln_Tensor:$result);
}

def Kiln_TopKOp : Kiln_InferOp<"topk", [Kiln_Differentiable], ["getFlops"]> {
  let summary = "the k largest (or smallest) elements along an axis and their indices";
  let description = [{
    Along `axis`, the `k` largest elements (`largest = false`: smallest) in
    order, largest (smallest) first, with their `i64` indices; equal
    elements keep index order and NaN counts as larger than every number
    (ONNX TopK; the order is the same with `sorted = false`). The gradient
    of `values` adds into the input at `indices`.

    ```mlir
    %v, %i = kiln.topk %p {axis = 2 : i64, k = 2 : i64}
        : (tensor<2x16x4xf32>) -> (tensor<2x16x2xf32>, tensor<2x16x2xi64>)
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input, I64Attr:$k, I64Attr:$axis,
                   DefaultValuedAttr<BoolAttr, "true">:$largest,
                   DefaultValuedAttr<BoolAttr, "true">:$sorted);
  let results = (outs Kiln_Tensor:$values, StaticShapeTensorOf<[I64]>:$indices);
}

def Kiln_CumSumOp : Kiln_InferOp<"cumsum", [Kiln_Differentiable]> {
  let summary = "cumulative sum along an axis (ONNX CumSum)";
  let description = [{
    `result[.., j, ..] = sum of input[.., i, ..]` along `axis` over
    `i <= j` (`exclusive`: `i < j`; `reverse`: from the end, `i >= j` or
    `i > j`). The gradient is the cumulative sum of the result's gradient
    in the other direction.

    ```mlir
    %c = kiln.cumsum %m {axis = 1 : i64}
        : (tensor<2x32x4xf32>) -> tensor<2x32x4xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input, I64Attr:$axis,
                   DefaultValuedAttr<BoolAttr, "false">:$exclusive,
                   DefaultValuedAttr<BoolAttr, "false">:$reverse);
  let results = (outs Kiln_Tensor:$result);
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

class Kiln_LossOp<string mnemonic> : Kiln_InferOp<mnemonic, [Kiln_Differentiable]> {
  let results = (outs Kiln_FloatTensor:$result);
}

def Kiln_SoftmaxCrossEntropyOp : Kiln_LossOp<"softmax_cross_entropy"> {
  let summary = "softmax cross-entropy of logits against integer labels";
  let description = [{
    `logits [N, C, D...]` with the class on `class_axis` (1, as in ONNX and
    `torch.nn.functional.cross_entropy`, or the last axis), `labels [N, D...]`
    integers, optional per-class `weight [C]`. `reduction` is `mean`
    (weighted mean over the positions whose label is not `ignore_index`),
    `sum` or `none` (result of the labels' shape).

    ```mlir
    %l = kiln.softmax_cross_entropy %logits, %labels {reduction = "mean", class_axis = 1 : i64}
        : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$logits, Kiln_IndexTensor:$labels,
                   Optional<Kiln_FloatTensor>:$weight,
                   DefaultValuedStrAttr<StrAttr, "mean">:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index,
                   DefaultValuedAttr<I64Attr, "1">:$class_axis);
}

def Kiln_NllLossOp : Kiln_LossOp<"nll_loss"> {
  let summary = "negative log-likelihood of log-probabilities";
  let description = [{
    As `kiln.softmax_cross_entropy` but its input is already log-probabilities
    (ONNX `NegativeLogLikelihoodLoss`, `torch.nn.functional.nll_loss`).

    ```mlir
    %l = kiln.nll_loss %logp, %labels {reduction = "mean", class_axis = 1 : i64}
        : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$logits, Kiln_IndexTensor:$labels,
                   Optional<Kiln_FloatTensor>:$weight,
                   DefaultValuedStrAttr<StrAttr, "mean">:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index,
                   DefaultValuedAttr<I64Attr, "1">:$class_axis);
}

def Kiln_MseLossOp : Kiln_InferOp<"mse_loss", [Kiln_Differentiable]> {
  let summary = "mean squared error";
  let description = [{
    `(x - y)^2` of same-shaped operands, reduced by `reduction` (`mean` over
    all elements, `sum`, or `none`).

    ```mlir
    %l = kiln.mse_loss %pred, %target {reduction = "mean"}
        : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$target,
                   DefaultValuedStrAttr<StrAttr, "mean">:$reduction);
  let results = (outs Kiln_FloatTensor:$result);
}

#endif // KILN_DIALECT_KILN_IR_KILNOPS_TD
