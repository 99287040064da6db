//===- KilnGradOps.td - backward and optimizer ops ----------*- tablegen -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The ops --kiln-autodiff and --kiln-attach-optimizer add: the gradients of
// forward ops that no composition of other ops expresses well, and the
// optimizer updates (torch.optim's formulas). docs/Training.md has the table.
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_KILN_IR_KILNGRADOPS_TD
#define KILN_DIALECT_KILN_IR_KILNGRADOPS_TD

include "kiln/Dialect/Kiln/IR/KilnOps.td"

// A gradient op whose result types are given (they are the forward
// operands' types), checked by the op's verifier where it has one.
class Kiln_GradOp<string mnemonic, list<Trait> traits = [],
                  list<string> shardingMethods = []>
    : Kiln_Op<mnemonic, !listconcat([Pure,
        DeclareOpInterfaceMethods<Kiln_CostOpInterface>], traits),
        shardingMethods> {
  let assemblyFormat =
      "operands attr-dict `:` functional-type(operands, results)";
}

// dy, x -> dx, all of one type.
class Kiln_PointwiseGradOp<string mnemonic, string what>
    : Kiln_GradOp<mnemonic, [Elementwise, Kiln_InPlaceElementwise,
                             AllTypesMatch<["dy", "x", "result"]>]> {
  let summary = "gradient of " # what;
  let arguments = (ins Kiln_FloatTensor:$dy, Kiln_FloatTensor:$x);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$dy `,` $x attr-dict `:` type($result)";
}

def Kiln_ReluGradOp : Kiln_PointwiseGradOp<"relu_grad", "relu"> {
  let description = [{
    `dy` where `x > 0`, else 0.

    ```mlir
    %dx = kiln.relu_grad %dy, %x : tensor<4x8xf32>
    ```
  }];
}

def Kiln_GeluGradOp : Kiln_PointwiseGradOp<"gelu_grad", "gelu"> {
  let description = [{
    `dy * gelu'(x)`, exact (`approximate = "none"`) or of the tanh form.

    ```mlir
    %dx = kiln.gelu_grad %dy, %x {approximate = "none"} : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$dy, Kiln_FloatTensor:$x,
                   DefaultValuedStrAttr<StrAttr, "none">:$approximate);
}

def Kiln_DropoutGradOp : Kiln_GradOp<"dropout_grad", [Elementwise,
    AllTypesMatch<["dy", "result"]>, AllShapesMatch<["dy", "mask"]>]> {
  let summary = "gradient of dropout";
  let description = [{
    `dy * mask / (1 - ratio)`.

    ```mlir
    %dx = kiln.dropout_grad %dy, %mask {ratio = 1.0e-01 : f32}
        : (tensor<4x8xf32>, tensor<4x8xi1>) -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$dy, Kiln_BoolTensor:$mask, F32Attr:$ratio);
  let results = (outs Kiln_FloatTensor:$result);
}

class Kiln_SoftmaxGradLikeOp<string mnemonic, string what, string rule>
    : Kiln_GradOp<mnemonic, [AllTypesMatch<["dy", "y", "result"]>]> {
  let summary = "gradient of " # what # " from its result";
  let description = "`" # rule # "` along `axis`.\n\n```mlir\n%dx = kiln."
      # mnemonic # " %dy, %y {axis = 1 : i64} : tensor<4x10xf32>\n```";
  let arguments = (ins Kiln_FloatTensor:$dy, Kiln_FloatTensor:$y, I64Attr:$axis);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$dy `,` $y attr-dict `:` type($result)";
}
def Kiln_SoftmaxGradOp
    : Kiln_SoftmaxGradLikeOp<"softmax_grad", "softmax", "y * (dy - sum(dy * y))">;
def Kiln_LogSoftmaxGradOp
    : Kiln_SoftmaxGradLikeOp<"log_softmax_grad", "log-softmax", "dy - exp(y) * sum(dy)">;

def Kiln_LayerNormGradOp : Kiln_GradOp<"layer_norm_grad", [
    AllTypesMatch<["dy", "x", "dx"]>, AllTypesMatch<["scale", "dscale", "dbias"]>,
    AllTypesMatch<["mean", "inv_std_dev"]>]> {
  let summary = "gradient of layer_norm";
  let description = [{
    The gradients of `kiln.layer_norm` with respect to its input, scale and
    bias, from the mean and reciprocal standard deviation the forward op
    returned.

    ```mlir
    %dx, %dg, %db = kiln.layer_norm_grad %dy, %x, %g, %mean, %rstd {axis = 2 : i64}
        : (tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<32xf32>, tensor<2x8x1xf32>,
           tensor<2x8x1xf32>) -> (tensor<2x8x32xf32>, tensor<32xf32>, tensor<32xf32>)
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$dy, Kiln_FloatTensor:$x,
                   Kiln_FloatTensor:$scale, Kiln_FloatTensor:$mean,
                   Kiln_FloatTensor:$inv_std_dev, I64Attr:$axis);
  let results = (outs Kiln_FloatTensor:$dx, Kiln_FloatTensor:$dscale,
                 Kiln_FloatTensor:$dbias);
}

def Kiln_BatchNormTrainGradOp : Kiln_GradOp<"batch_norm_train_grad", [
    AllTypesMatch<["dy", "x", "dx"]>, AllTypesMatch<["scale", "dscale", "dbias"]>]> {
  let summary = "gradient of batch_norm_train";
  let description = [{
    The gradients of `kiln.batch_norm_train`'s normalised result with respect
    to its input, scale and bias; the batch statistics are recomputed from
    `x` (biased variance, as the forward op normalises).

    ```mlir
    %dx, %ds, %db = kiln.batch_norm_train_grad %dy, %x, %s {epsilon = 1.0e-05 : f32}
        : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>, tensor<3xf32>)
        -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$dy, Kiln_FloatTensor:$x,
                   Kiln_FloatTensor:$scale, F32Attr:$epsilon);
  let results = (outs Kiln_FloatTensor:$dx, Kiln_FloatTensor:$dscale,
                 Kiln_FloatTensor:$dbias);
}

def Kiln_ConvInputGradOp : Kiln_GradOp<"conv_input_grad"> {
  let summary = "gradient of conv with respect to its input";
  let description = [{
    The attributes are the forward `kiln.conv`'s; the result has the forward
    input's type.

    ```mlir
    %dx = kiln.conv_input_grad %dy, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>,
                                        padding = array<i64: 1, 1, 1, 1>, groups = 1 : i64}
        : (tensor<2x16x8x8xf32>, tensor<16x3x3x3xf32>) -> tensor<2x3x8x8xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$dy, Kiln_FloatTensor:$weight,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$dilations,
                   DenseI64ArrayAttr:$padding, I64Attr:$groups);
  let results = (outs Kiln_FloatTensor:$result);
  let hasVerifier = 1;
}

def Kiln_ConvWeightGradOp : Kiln_GradOp<"conv_weight_grad"> {
  let summary = "gradient of conv with respect to its weight";
  let description = [{
    The attributes are the forward `kiln.conv`'s; the result has the weight's
    type.

    ```mlir
    %dw = kiln.conv_weight_grad %x, %dy {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>,
                                         padding = array<i64: 1, 1, 1, 1>, groups = 1 : i64}
        : (tensor<2x3x8x8xf32>, tensor<2x16x8x8xf32>) -> tensor<16x3x3x3xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$dy,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$dilations,
                   DenseI64ArrayAttr:$padding, I64Attr:$groups);
  let results = (outs Kiln_FloatTensor:$result);
  let hasVerifier = 1;
}

def Kiln_MaxPoolGradOp : Kiln_GradOp<"max_pool_grad", [
    AllTypesMatch<["x", "result"]>]> {
  let summary = "gradient of max_pool";
  let description = [{
    Each window's first maximum (row-major window order; padding never wins)
    receives that window's `dy`, summed over overlapping windows.

    ```mlir
    %dx = kiln.max_pool_grad %dy, %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>,
            dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>}
        : (tensor<1x3x4x4xf32>, tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$dy, Kiln_FloatTensor:$x,
                   DenseI64ArrayAttr:$kernel, DenseI64ArrayAttr:$strides,
                   DenseI64ArrayAttr:$dilations, DenseI64ArrayAttr:$padding);
  let results = (outs Kiln_FloatTensor:$result);
}

def Kiln_AvgPoolGradOp : Kiln_GradOp<"avg_pool_grad"> {
  let summary = "gradient of avg_pool";
  let description = [{
    Spreads each window's `dy` over the window with `avg_pool`'s divisor; the
    result has the forward input's type.

    ```mlir
    %dx = kiln.avg_pool_grad %dy {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>,
            dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>}
        : (tensor<1x3x4x4xf32>) -> tensor<1x3x8x8xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$dy, DenseI64ArrayAttr:$kernel,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$dilations,
                   DenseI64ArrayAttr:$padding,
                   DefaultValuedAttr<BoolAttr, "false">:$count_include_pad,
                   DefaultValuedAttr<DenseI64ArrayAttr, "{}">:$ceil_pad);
  let results = (outs Kiln_FloatTensor:$result);
}

def Kiln_GatherGradOp : Kiln_GradOp<"gather_grad", [], ["localizeAttributes"]> {
  let summary = "gradient of gather (scatter-add)";
  let description = [{
    Zeros of the result's type (the gathered tensor's), then
    `result[i..., indices[j...], k...] += dy[i..., j..., k...]`. A result
    split on `axis` has `split` and `whole_size` as gather's: each rank adds
    the rows it holds.

    ```mlir
    %dt = kiln.gather_grad %dy, %ids {axis = 0 : i64}
        : (tensor<2x8x32xf32>, tensor<2x8xi64>) -> tensor<100x32xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$dy, Kiln_IndexTensor:$indices, I64Attr:$axis,
                   OptionalAttr<StrAttr>:$split, OptionalAttr<I64Attr>:$whole_size);
  let results = (outs Kiln_FloatTensor:$result);
  let hasVerifier = 1;
}

def Kiln_GatherElementsGradOp : Kiln_GradOp<"gather_elements_grad"> {
  let summary = "gradient of gather_elements and of topk's values (scatter-add)";
  let description = [{
    Zeros of the result's type (the input's), then
    `result[i_0, .., indices[i...], .., i_r-1] += dy[i...]` with the index at
    position `axis`; `dy` has the indices' shape.

    ```mlir
    %dx = kiln.gather_elements_grad %dy, %i {axis = 2 : i64}
        : (tensor<2x16x2xf32>, tensor<2x16x2xi64>) -> tensor<2x16x4xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$dy, Kiln_IndexTensor:$indices, I64Attr:$axis);
  let results = (outs Kiln_FloatTensor:$result);
  let hasVerifier = 1;
}

def Kiln_SliceGradOp : Kiln_GradOp<"slice_grad", [], ["localizeAttributes"]> {
  let summary = "gradient of slice";
  let description = [{
    Zeros of the result's type (the sliced tensor's) with `dy` written at the
    positions the forward `kiln.slice` with these attributes read.

    ```mlir
    %dx = kiln.slice_grad %dy {starts = array<i64: 0, 1>, limits = array<i64: 2, 4>,
                               strides = array<i64: 1, 2>} : (tensor<2x2xf32>) -> tensor<2x4xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$dy, DenseI64ArrayAttr:$starts,
                   DenseI64ArrayAttr:$limits, DenseI64ArrayAttr:$strides);
  let results = (outs Kiln_FloatTensor:$result);
  let hasVerifier = 1;
}

def Kiln_SoftmaxCrossEntropyGradOp : Kiln_GradOp<"softmax_cross_entropy_grad", [
    AllTypesMatch<["logits", "result"]>]> {
  let summary = "gradient of softmax_cross_entropy with respect to the logits";
  let description = [{
    `dloss` is a scalar for `mean`/`sum`, of the labels' shape for `none`;
    the attributes are the forward op's.

    ```mlir
    %dz = kiln.softmax_cross_entropy_grad %dl, %logits, %labels {reduction = "mean", class_axis = 1 : i64}
        : (tensor<f32>, tensor<4x10xf32>, tensor<4xi64>) -> tensor<4x10xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$dloss, Kiln_FloatTensor:$logits,
                   Kiln_IndexTensor:$labels, Optional<Kiln_FloatTensor>:$weight,
                   DefaultValuedStrAttr<StrAttr, "mean">:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index,
                   DefaultValuedAttr<I64Attr, "1">:$class_axis);
  let results = (outs Kiln_FloatTensor:$result);
}

def Kiln_NllLossGradOp : Kiln_GradOp<"nll_loss_grad"> {
  let summary = "gradient of nll_loss with respect to the log-probabilities";
  let description = [{
    `-weight[label] * dloss / denominator` at each position's label, 0
    elsewhere; the result has the forward input's type.

    ```mlir
    %dz = kiln.nll_loss_grad %dl, %labels {reduction = "mean", class_axis = 1 : i64}
        : (tensor<f32>, tensor<4xi64>) -> tensor<4x10xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$dloss, Kiln_IndexTensor:$labels,
                   Optional<Kiln_FloatTensor>:$weight,
                   DefaultValuedStrAttr<StrAttr, "mean">:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index,
                   DefaultValuedAttr<I64Attr, "1">:$class_axis);
  let results = (outs Kiln_FloatTensor:$result);
}

//===----------------------------------------------------------------------===//
// Optimizer updates
//===----------------------------------------------------------------------===//

// Elementwise over the parameter; `lr` (and `step`) are scalars. Each result
// may take the bytes of the operand it replaces. `skip` (an i1 scalar, from
// loss scaling's finite check) true: the results are the operands
// unchanged, the step is skipped (torch.cuda.amp.GradScaler's skipped
// optimizer.step()).
class Kiln_UpdateOp<string mnemonic, list<Trait> traits = []>
    : Kiln_GradOp<mnemonic, !listconcat([Kiln_InPlaceElementwise], traits)>;

def Kiln_SgdUpdateOp : Kiln_UpdateOp<"sgd_update", [
    AllTypesMatch<["param", "grad", "result"]>]> {
  let summary = "stochastic gradient descent step";
  let description = [{
    `g += weight_decay * p; p' = p - lr * g` (torch.optim.SGD).

    ```mlir
    %p1 = kiln.sgd_update %p, %g, %lr {weight_decay = 0.0 : f32}
        : (tensor<16xf32>, tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$param, Kiln_FloatTensor:$grad,
                   0DTensorOf<[F32]>:$lr, Optional<0DTensorOf<[I1]>>:$skip,
                   DefaultValuedAttr<F32Attr, "0.0">:$weight_decay);
  let results = (outs Kiln_FloatTensor:$result);
}

def Kiln_MomentumUpdateOp : Kiln_UpdateOp<"momentum_update", [
    AllTypesMatch<["param", "grad", "buf", "new_param", "new_buf"]>]> {
  let summary = "SGD with momentum (optionally Nesterov)";
  let description = [{
    `g += wd * p; buf' = momentum * buf + g; d = nesterov ? g + momentum *
    buf' : buf'; p' = p - lr * d` (torch.optim.SGD, dampening 0; a zero
    `buf` reproduces torch's first step).

    ```mlir
    %p1, %b1 = kiln.momentum_update %p, %g, %b, %lr {momentum = 0.9 : f32}
        : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<f32>) -> (tensor<16xf32>, tensor<16xf32>)
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$param, Kiln_FloatTensor:$grad,
                   Kiln_FloatTensor:$buf, 0DTensorOf<[F32]>:$lr,
                   Optional<0DTensorOf<[I1]>>:$skip,
                   F32Attr:$momentum,
                   DefaultValuedAttr<F32Attr, "0.0">:$weight_decay,
                   DefaultValuedAttr<BoolAttr, "false">:$nesterov);
  let results = (outs Kiln_FloatTensor:$new_param, Kiln_FloatTensor:$new_buf);
}

def Kiln_AdamUpdateOp : Kiln_UpdateOp<"adam_update", [
    AllTypesMatch<["param", "grad", "m", "v", "new_param", "new_m", "new_v"]>]> {
  let summary = "Adam or AdamW step with bias correction";
  let description = [{
    torch.optim.Adam (`decoupled = false`: weight decay added to the
    gradient) or AdamW (`decoupled = true`: `p *= 1 - lr * wd` first). `step`
    is the 1-based step count `t` of the bias corrections `1 - beta^t`.

    ```mlir
    %p1, %m1, %v1 = kiln.adam_update %p, %g, %m, %v, %lr, %t
        {beta1 = 0.9 : f32, beta2 = 0.999 : f32, eps = 1.0e-08 : f32}
        : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<f32>, tensor<i64>)
        -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$param, Kiln_FloatTensor:$grad,
                   Kiln_FloatTensor:$m, Kiln_FloatTensor:$v,
                   0DTensorOf<[F32]>:$lr, 0DTensorOf<[I64]>:$step,
                   Optional<0DTensorOf<[I1]>>:$skip,
                   F32Attr:$beta1, F32Attr:$beta2, F32Attr:$eps,
                   DefaultValuedAttr<F32Attr, "0.0">:$weight_decay,
                   DefaultValuedAttr<BoolAttr, "false">:$decoupled);
  let results = (outs Kiln_FloatTensor:$new_param, Kiln_FloatTensor:$new_m,
                 Kiln_FloatTensor:$new_v);
}

//===----------------------------------------------------------------------===//
// Compression
//===----------------------------------------------------------------------===//

def Kiln_MagnitudePruneOp : Kiln_GradOp<"magnitude_prune", [
    AllTypesMatch<["param", "pruned", "new_param", "new_pruned"]>]> {
  let summary = "unstructured magnitude pruning on a cubic schedule";
  let description = [{
    Keeps a parameter sparse (`--prune magnitude=S`, docs/Compression.md).
    `pruned` holds 1 where an element is pruned, 0 elsewhere (zeros at
    the start: nothing pruned). `step` is the optimizer's 1-based step `t`;
    the step index is `s = t - 1`. At a schedule point (`start <= s <= end`
    and `(s - start) % every == 0`, or `s == end`) the target sparsity is
    Zhu and Gupta's cubic schedule

        sparsity * (1 - (1 - (s - start) / (end - start))^3)

    (`sparsity` when `end == start`), and `new_pruned` marks the
    round(target * n) elements of smallest |param| (ties by position;
    elements pruned before have |param| = 0 and stay pruned, since the
    schedule never falls). Elsewhere `new_pruned = pruned`. Then
    `new_param = param` where not pruned, 0 where pruned.

    ```mlir
    %p1, %q1 = kiln.magnitude_prune %p, %q, %t
        {sparsity = 0.5 : f32, start = 0 : i64, end = 100 : i64, every = 10 : i64}
        : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<i64>) -> (tensor<16x8xf32>, tensor<16x8xf32>)
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$param, Kiln_FloatTensor:$pruned,
                   0DTensorOf<[I64]>:$step,
                   F32Attr:$sparsity, I64Attr:$start, I64Attr:$end,
                   DefaultValuedAttr<I64Attr, "1">:$every);
  let results = (outs Kiln_FloatTensor:$new_param, Kiln_FloatTensor:$new_pruned);
  let hasVerifier = 1;
}

// The verifier checks that new_pruned is pruned's type (ODS's AllTypesMatch
// would infer it from the operand at pruned's index without the variadic
// producers before it).
def Kiln_ChannelPruneOp : Kiln_GradOp<"channel_prune"> {
  let summary = "structured L1 channel pruning at a step of the run";
  let description = [{
    One class of tied channels (`--prune l1-channel=R --prune-at S`,
    docs/Compression.md). `pruned` is `[C]`, 1 where a channel is pruned
    (zeros at the start). `step` is the optimizer's 1-based step `t`; at
    `t - 1 == at` the `C - keep` channels of smallest summed L1 norm over
    the `producers` (the class's weights after this step's update; channel
    `c` of producer `i` is the block `[c * blocks[i], (c + 1) * blocks[i])`
    along `axes[i]`; ties by position) are marked pruned. Elsewhere
    `new_pruned = pruned`.

    ```mlir
    %q1 = kiln.channel_prune %w1, %w2, %q, %t {axes = array<i64: 0, 0>, blocks = array<i64: 1, 1>, keep = 6 : i64, at = 5 : i64}
        : (tensor<8x1x3x3xf32>, tensor<8x4xf32>, tensor<8xf32>, tensor<i64>) -> tensor<8xf32>
    ```
  }];
  let arguments = (ins Variadic<Kiln_FloatTensor>:$producers, Kiln_FloatTensor:$pruned,
                   0DTensorOf<[I64]>:$step, DenseI64ArrayAttr:$axes,
                   DenseI64ArrayAttr:$blocks, I64Attr:$keep, I64Attr:$at);
  let results = (outs Kiln_FloatTensor:$new_pruned);
  let hasVerifier = 1;
}

// Quantization-aware training (--qat int8, docs/Compression.md).

def Kiln_FakeQuantOp : Kiln_GradOp<"fake_quant", [Kiln_Differentiable,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "quantize and dequantize (fake quantization)";
  let description = [{
    `q = clamp(zero_point + nearbyint(input * (1 / scale)), quant_min,
    quant_max)`, `result = (q - zero_point) * scale`, exactly as PyTorch's
    `torch.fake_quantize_per_tensor_affine` (no `axis`: `scale` and
    `zero_point` are scalars) and `torch.fake_quantize_per_channel_affine`
    (`axis`: they are `[C]` with `C` the input's size along it) compute it,
    in float32 (`1 / scale` in float32, rounding half to even). The
    gradient is the straight-through estimator: `dy` where the unclamped
    `q` lies in `[quant_min, quant_max]`, 0 outside; none reaches `scale`
    or `zero_point`.

    ```mlir
    %y = kiln.fake_quant %w, %s, %z {axis = 0 : i64, quant_min = -127 : i64, quant_max = 127 : i64}
        : (tensor<16x8xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<16x8xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$scale,
                   Kiln_FloatTensor:$zero_point, OptionalAttr<I64Attr>:$axis,
                   I64Attr:$quant_min, I64Attr:$quant_max);
  let results = (outs Kiln_FloatTensor:$result);
  let hasVerifier = 1;
}

def Kiln_FakeQuantGradOp : Kiln_GradOp<"fake_quant_grad", [
    AllTypesMatch<["dy", "input", "result"]>]> {
  let summary = "gradient of fake_quant (straight-through, clipped)";
  let description = [{
    `dy` where `zero_point + nearbyint(input * (1 / scale))` lies in
    `[quant_min, quant_max]` (the forward's unclamped `q`), 0 elsewhere.
  }];
  let arguments = (ins Kiln_FloatTensor:$dy, Kiln_FloatTensor:$input,
                   Kiln_FloatTensor:$scale, Kiln_FloatTensor:$zero_point,
                   OptionalAttr<I64Attr>:$axis, I64Attr:$quant_min,
                   I64Attr:$quant_max);
  let results = (outs Kiln_FloatTensor:$result);
}

def Kiln_MinMaxObserveOp : Kiln_GradOp<"minmax_observe", [
    DeclareOpInterfaceMethods<Kiln_StatefulOpInterface>]> {
  let summary = "moving-average min/max observer and its affine parameters";
  let description = [{
    An activation's quantization range (PyTorch's
    `MovingAverageMinMaxObserver`) from the batch's `batch_min` and
    `batch_max` (a `kiln.reduce_min` and `kiln.reduce_max` of the input: with
    the batch split over ranks, the partitioner all-reduces them, so every
    rank observes the whole batch's range). `observer` is `[min, max, n]`,
    `n` the batches observed (zeros at the start). While `n < freeze`: the
    first batch sets `min` and `max` to the batch's; later ones move them by
    `averaging * (batch - running)`; `n` counts the batch. From `freeze`
    batches on the observer keeps its range. Then, as PyTorch's
    `_calculate_qparams` in float32, with `lo = min(min, 0)` and `hi = max(max,
    0)`: `scale = max((hi - lo) / (quant_max - quant_min), eps)` (float32's
    epsilon) and `zero_point = clamp(quant_min - round(lo / scale),
    quant_min, quant_max)` (half to even). No gradient flows through it.

    ```mlir
    %s, %z, %o1 = kiln.minmax_observe %lo, %hi, %o
        {averaging = 0.01 : f32, freeze = 1000 : i64, quant_min = 0 : i64, quant_max = 255 : i64}
        : (tensor<f32>, tensor<f32>, tensor<3xf32>) -> (tensor<f32>, tensor<f32>, tensor<3xf32>)
    ```
  }];
  let arguments = (ins 0DTensorOf<[F32]>:$batch_min, 0DTensorOf<[F32]>:$batch_max,
                   Kiln_FloatTensor:$observer, F32Attr:$averaging, I64Attr:$freeze,
                   I64Attr:$quant_min, I64Attr:$quant_max);
  let results = (outs 0DTensorOf<[F32]>:$scale, 0DTensorOf<[F32]>:$zero_point,
                 Kiln_FloatTensor:$new_observer);
  let hasVerifier = 1;
}

def Kiln_AbsMaxScaleOp : Kiln_GradOp<"absmax_scale"> {
  let summary = "symmetric per-channel scale from the largest magnitude";
  let description = [{
    `scale[c] = max(max |input[..., c, ...]| / quant_max, eps)` over every
    axis but `axis` (float32's epsilon): a weight's symmetric per-channel
    quantization scale (zero point 0). No gradient flows through it.

    ```mlir
    %s = kiln.absmax_scale %w {axis = 1 : i64, quant_max = 127 : i64}
        : (tensor<8x16xf32>) -> tensor<16xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, I64Attr:$axis, I64Attr:$quant_max);
  let results = (outs Kiln_FloatTensor:$result);
  let hasVerifier = 1;
}

#endif // KILN_DIALECT_KILN_IR_KILNGRADOPS_TD
