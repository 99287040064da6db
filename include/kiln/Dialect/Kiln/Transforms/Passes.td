//===- Passes.td - kiln training passes ---------------------*- tablegen -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Loss, autodiff and optimizer: @forward -> @train_step (docs/Training.md).
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_KILN_TRANSFORMS_PASSES_TD
#define KILN_DIALECT_KILN_TRANSFORMS_PASSES_TD

include "kiln/Dialect/Kiln/IR/KilnEnums.td"
include "mlir/Pass/PassBase.td"

def KilnAttachLossPass : Pass<"kiln-attach-loss", "mlir::ModuleOp"> {
  let summary = "Makes @forward return a scalar loss first";
  let description = [{
    `loss=cross-entropy`: appends `kiln.softmax_cross_entropy` (class on the
    last axis, mean) of the output named `logits` against a new i64 argument
    named `labels` (the logits' shape without the last axis), placed after
    the data inputs. With `soft-labels`, the labels argument has the logits'
    type and holds a probability row per position (mixup, cutmix, label
    smoothing), and the loss is the mean over the positions of
    `-sum_c y_c * log_softmax(z)_c`, built from `kiln.log_softmax`,
    `kiln.mul`, `kiln.reduce_sum`, `kiln.reduce_mean` and `kiln.neg` (as
    PyTorch's `F.cross_entropy` with probability targets). `loss=mse`: `kiln.mse_loss` (mean) against a new argument
    of the output's type. `loss=output`: the model already computes the loss;
    `loss-output` names the scalar output. In every case the loss becomes
    result 0, tagged `kiln.loss` and named `loss`; the other results stay.

    ```mlir
    func.func @forward(%x: tensor<8x784xf32>, %labels: tensor<8xi64> {onnx.name = "labels"}, ...)
        -> (tensor<f32> {kiln.loss, onnx.name = "loss"}, tensor<8x10xf32> {onnx.name = "logits"})
    ```
  }];
  let options = [
    Kiln_EnumOption<"loss", "loss", Kiln_LossKind, "CrossEntropy",
                    "The loss to minimise">,
    Option<"logits", "logits", "std::string", "\"\"",
           "The output the appended loss reads (default: the only output)">,
    Option<"labels", "labels", "std::string", "\"labels\"",
           "Name of the labels argument an appended loss adds">,
    Option<"lossOutput", "loss-output", "std::string", "\"\"",
           "With loss=output: the scalar output to minimise">,
    Option<"softLabels", "soft-labels", "bool", "false",
           "With loss=cross-entropy: float labels of the logits' shape "
           "(a probability row per position) instead of class indices">,
  ];
}

def KilnAutodiffPass : Pass<"kiln-autodiff", "mlir::ModuleOp"> {
  let summary = "Reverse-mode differentiation of @forward into @train_step";
  let description = [{
    Builds `@train_step` from `@forward` (whose result 0 is the loss, see
    `--kiln-attach-loss`): the forward ops, then the vector-Jacobian product
    of every op on a path from a trainable parameter to the loss, in reverse
    order, each from the op's `DifferentiableOpInterface`; gradients of a
    value used several times are added. Trainable parameters are the
    floating-point `kiln.param` arguments with a differentiable path to the
    loss whose `onnx.name` does not match `freeze`. An op on such a path
    without the interface is an error naming it.

    Results: the loss, one gradient per trainable parameter
    (`kiln.grad_of = <argument>`), then the new value of every state the
    forward ops update (`kiln.update = <argument>`, from
    `StatefulOpInterface`: BatchNorm running statistics). Arguments get
    `kiln.role`: `weight`, `state` or `frozen`. With
    `bn-running-var=unbiased` (the default, PyTorch's rule) BatchNorm's running
    variance takes the unbiased batch variance.
  }];
  let options = [
    Option<"freeze", "freeze", "std::string", "\"\"",
           "Parameters whose name matches this regex are not trained">,
    Kiln_EnumOption<"bnRunningVar", "bn-running-var", Kiln_BNRunningVar,
                    "Unbiased",
                    "BatchNorm's running variance: unbiased (PyTorch) or " #
                    "biased (ONNX's reference)">,
    Option<"lossScale", "loss-scale", "bool", "false",
           "backward starts from a new f32 scalar argument `kiln.loss_scale` "
           "instead of 1, so every gradient comes out scaled by it (loss "
           "scaling: fp16 gradients stay above the underflow)">,
    Option<"breakVJP", "break-vjp", "std::string", "\"\"",
           "Testing aid, never for training: every gradient the VJP of an "
           "op with this name (as kiln.relu) produces is scaled by 1.5, so "
           "that a gradient check (kiln-gradcheck) can be shown to find and "
           "name a wrong VJP">,
  ];
}

def KilnPruneChannelsPass : Pass<"kiln-prune-channels", "mlir::ModuleOp"> {
  let summary = "Structured L1 channel pruning that shrinks the graph's shapes";
  let description = [{
    On `@forward` (after `--kiln-attach-loss`, before autodiff): removes the
    `ratio` of the output channels of each convolution and the output
    features of each Linear with the smallest L1 norm, and shrinks every
    tensor those channels run through: the weight and bias, a following
    BatchNorm's parameters and running statistics, the next convolution's
    input channels, a Linear after a flatten (a block of rows per channel).
    Channels are tied through the ops' sharding rules: a residual add ties
    its branches, which are pruned together (their L1 norms summed). A
    class of channels that reaches a model input or output, or a dimension
    an op keeps whole (a concat's axis, a softmax's), is left alone.
    `importance=index` keeps the first channels (for tests without values).
  }];
  let options = [
    Option<"ratio", "ratio", "double", "0.3",
           "the fraction of each layer's channels removed, in [0, 1)">,
    Option<"importance", "importance", "std::string", "\"l1\"",
           "l1 (the weights' L1 norms; needs their values) or index">,
    Option<"at", "at", "int64_t", "0",
           "0: prune the weights as they are; S > 0: only find the classes "
           "and record them on the module (kiln.channel_classes) for "
           "--kiln-mask-channels, which prunes at step S of the run">,
    Option<"maskable", "maskable", "bool", "false",
           "with at=0: prune only the classes at=S would record (the "
           "smaller plan a run switches to after step S)">,
  ];
}

def KilnMaskChannelsPass : Pass<"kiln-mask-channels", "mlir::ModuleOp"> {
  let summary = "Structured channel pruning at a step of the run, as masks";
  let description = [{
    After `--kiln-attach-optimizer`, for each class of channels
    `--kiln-prune-channels at=S` recorded (`kiln.channel_classes`): a state
    argument `channels/<k>/pruned` ([C], zeros), a `kiln.channel_prune` of
    the class's updated producer weights at step S, and every updated
    parameter of the class (and its optimizer state) multiplied by `1 -
    pruned` along its channel axis after each update. From step S on the
    plan computes what the smaller model computes; `--export-onnx` writes
    the smaller model (the config lists the classes). With `select-only`
    the masks are chosen and returned but nothing is multiplied: the
    training executable switches to the smaller plan after step S
    (kiln-compile's choice), so masking would only cost time.
  }];
  let options = [
    Option<"selectOnly", "select-only", "bool", "false",
           "only choose the channels at step S (the run switches to the "
           "smaller plan then); no masking multiplications">,
  ];
}

def KilnPruneMagnitudePass : Pass<"kiln-prune-magnitude", "mlir::ModuleOp"> {
  let summary = "Unstructured magnitude pruning kept through training";
  let description = [{
    After `--kiln-attach-optimizer`: each update of a weight of rank 2 or
    more (`kiln.role = "weight"`: a Linear's or a convolution's kernel, an
    embedding table; not biases or norms' scales) is followed by a
    `kiln.magnitude_prune` of its new value with a new optimizer-state
    argument `<param>/pruned` (`kiln.init = "zeros"`: nothing pruned yet),
    returned as that argument's update. The update's optimizer state
    (momentum buffer, Adam's moments) is multiplied by `1 - pruned`, so a
    pruned element's state stays zero. `start`, `end` and `every` are step
    indices (0-based) of the cubic schedule; `start == end` prunes to
    `sparsity` at once at that step.
  }];
  let options = [
    Option<"sparsity", "sparsity", "double", "0.5",
           "the final fraction of each weight's elements pruned, in [0, 1)">,
    Option<"start", "start", "int64_t", "0", "the first pruning step">,
    Option<"end", "end", "int64_t", "0",
           "the step the final sparsity is reached (start: at once)">,
    Option<"every", "every", "int64_t", "1",
           "steps between pruning points on the schedule">,
  ];
}

def KilnAttachOptimizerPass : Pass<"kiln-attach-optimizer", "mlir::ModuleOp"> {
  let summary = "Turns @train_step's gradients into optimizer updates";
  let description = [{
    Adds the arguments `kiln.lr` (tensor<f32>) and `kiln.step` (tensor<i64>,
    1-based) and the optimizer state (`<param>/momentum_buffer`,
    `<param>/exp_avg`, `<param>/exp_avg_sq`: `kiln.param`, `kiln.role =
    "optimizer"`, `kiln.init = "zeros"`); computes the global L2 norm of the
    gradients (result 1, `grad_norm`), scales them by
    `min(1, clip-norm / (norm + 1e-6))` when `clip-norm` > 0 (as
    torch.nn.utils.clip_grad_norm_), and replaces each gradient result by
    the update op's new parameter (and state) values, tagged `kiln.update`.

    With `loss-scale` (the gradients came from a loss scaled by the
    argument `kiln.loss_scale`, see `--kiln-autodiff`), each gradient is
    first multiplied by `1 / kiln.loss_scale` in its own type, as
    torch.cuda.amp.GradScaler.unscale_ does, so the norm and clipping see
    the true gradients; and every update op gets `skip` = `!(sum of
    squares < inf)`: a step with an Inf or NaN gradient (on any rank: the
    sums are all-reduced) leaves the parameters and the optimizer state
    unchanged. The trainer reads the skip from `grad_norm` (non-finite) and
    adjusts the scale.
  }];
  let options = [
    Kiln_EnumOption<"optimizer", "optimizer", Kiln_OptimizerKind, "SGD",
                    "The update rule">,
    Option<"momentum", "momentum", "double", "0.9", "momentum factor">,
    Option<"nesterov", "nesterov", "bool", "false", "Nesterov momentum">,
    Option<"weightDecay", "weight-decay", "double", "-1.0",
           "weight decay (default 0, adamw 0.01 as torch)">,
    Option<"beta1", "beta1", "double", "0.9", "Adam beta1">,
    Option<"beta2", "beta2", "double", "0.999", "Adam beta2">,
    Option<"eps", "eps", "double", "1e-8", "Adam epsilon">,
    Option<"clipNorm", "clip-norm", "double", "0.0",
           "global gradient-norm clipping (0: off)">,
    Option<"lossScale", "loss-scale", "bool", "false",
           "the gradients are scaled by the `kiln.loss_scale` argument "
           "(--kiln-autodiff loss-scale): unscale them first, and skip the "
           "update of a step whose gradients are not all finite">,
  ];
}

def KilnZeroPass : Pass<"kiln-zero", "mlir::ModuleOp"> {
  let summary = "ZeRO: the optimizer state sharded over the dp axis";
  let description = [{
    Runs after `--kiln-data-parallel` and `--kiln-attach-optimizer`. With
    `stage` = 1, each optimizer update of a weight `p` (n elements; N = n
    rounded up to a multiple of dp; k = N / dp) becomes:
    - the gradient's `shard.all_reduce` average: a `shard.reduce_scatter`
      average of the flattened, zero-padded gradient (this rank's k
      elements of the mean gradient); a scalar factor (clipping) follows it;
    - the update on this rank's k elements of `p` (`shard.all_slice`) and of
      its optimizer state, whose arguments (and returned updates) become
      `tensor<k>`: each rank keeps 1/dp of the state;
    - the new `p`: `shard.all_gather` of the ranks' k elements, cut back to
      n and reshaped.

    The gradient norm's sums of squares become the `shard.all_reduce` sum of
    the shards' sums. The updates are elementwise, so each element is
    updated exactly as on one rank.

    With `stage` = 2 each reduce-scatter also moves to right after backward
    computes its gradient: the full gradient's buffer dies there (buffer
    assignment reuses it), so full gradients no longer pile up until the
    optimizer; each rank keeps its k-element block.

    With `stage` = 3 the parameter itself is split too: its argument
    becomes this rank's `tensor<k>` (with `kiln.sharded_shape`), every
    other reader of it (forward and backward ops) gets its own
    `shard.all_gather` of the blocks, cut and reshaped, right before it
    (marked `kiln.zero_gather` so CSE keeps them apart: each whole copy dies
    after its reader), and the update's result is returned as the block. A
    parameter of fewer than dp elements stays whole (stage 2 for it).
  }];
  let options = [
    Option<"stage", "stage", "int64_t", "0", "ZeRO stage: 0 (none), 1, 2 or 3">,
  ];
  let dependentDialects = ["mlir::shard::ShardDialect"];
}

def KilnQuantizeAwarePass : Pass<"kiln-qat", "mlir::ModuleOp"> {
  let summary = "Quantization-aware training: fake-quantized matmuls and convolutions";
  let description = [{
    On `@forward` (after `--kiln-attach-loss`, before `--kiln-mixed-precision`
    and `--kiln-autodiff`): each `kiln.matmul` and `kiln.conv` that reads a
    trained weight of rank 2 or more computes on fake-quantized operands.
    The weight: `kiln.fake_quant` per output channel (symmetric int8,
    [-127, 127], zero point 0, scale `kiln.absmax_scale`), once per
    parameter. The other operand, the activation: `kiln.fake_quant` per
    tensor (asymmetric uint8, [0, 255]) with the scale and zero point of a
    `kiln.minmax_observe` whose state is a new parameter `<node>/observer`
    (`kiln.role = "state"`, zeros), once per value. Autodiff threads the
    observer's update back and differentiates straight through. The module
    gets `kiln.qat_sites`: per quantized op, its ONNX node (index and name),
    the weight, its axis and the observer, from which `--export-onnx` writes
    QuantizeLinear/DequantizeLinear.
  }];
  let options = [
    Option<"freeze", "freeze", "int64_t", "9223372036854775807",
           "batches each observer sees before its range is fixed">,
    Option<"averaging", "averaging", "double", "0.01",
           "the observers' moving-average constant">,
  ];
}

def KilnDistillPass : Pass<"kiln-distill", "mlir::ModuleOp"> {
  let summary = "Knowledge distillation: a frozen teacher's forward in the step";
  let description = [{
    After `--kiln-attach-loss`, with the teacher's forward as `@teacher`
    (kiln ops; kiln-compile --teacher imports it, its parameters named
    `teacher/...`): inlines `@teacher` into `@forward` on the student's data
    inputs of the same names, its parameters frozen (`kiln.role =
    "frozen"`: autodiff computes no gradient for them), erases `@teacher`,
    and makes the loss `alpha * T^2 * KL(softmax(teacher / T) ||
    softmax(student / T)) + (1 - alpha) * loss` (Hinton's recipe), the KL
    divergence summed over the class axis and averaged over the rest. The
    teacher's single output and the student's logits (`logits`, or the one
    output besides the loss) must have the same type.
  }];
  let options = [
    Option<"alpha", "alpha", "double", "0.5",
           "the weight of the distillation term, in [0, 1]">,
    Option<"temperature", "temperature", "double", "2.0",
           "the softmax temperature T, positive">,
    Option<"logits", "logits", "std::string", "\"\"",
           "the student's logits output (default: its one output)">,
  ];
}

def KilnMixedPrecisionPass : Pass<"kiln-mixed-precision", "mlir::ModuleOp"> {
  let summary = "Computes in bf16 or fp16 where it is safe, float32 where not";
  let description = [{
    On `func` (after `--kiln-attach-loss`, before `--kiln-autodiff`), each
    kiln op computes where its `PrecisionOpInterface` class says:

    - `low` (matmul, conv): its f32 operands are cast to `dtype`;
    - `float32` (softmax, norms, reductions, losses, exp/log): its
      low-precision operands are cast to f32;
    - `follow` (elementwise, shape, pooling, gather): in the widest type of
      its activation operands (values computed from the data inputs), with
      weights and constants cast to it: a bias added to a bf16 product is
      added in bf16, a residual f32 stream plus a bf16 branch is added in
      f32 (as torch's type promotion does);
    - `keep`: untouched.

    Every value is cast to a type at most once (a parameter used by several
    matmuls has one bf16 copy), and a round trip through a wider type folds
    away. Parameters stay f32 (the master weights): autodiff differentiates
    through the casts, so each gradient reaches the optimizer in f32.
    Results keep the function's types (a bf16 output is cast back).

    `fp32-ops` names ONNX op types (`Softmax,Gelu`) whose kiln ops compute
    in float32 whatever their class; the op type comes from the location the
    importer gave the op (`NameLoc(node, FusedLoc<"onnx.Op">[...])`).

    ```mlir
    // dtype=bf16
    %wl = kiln.cast %w : tensor<8x4xf32> -> tensor<8x4xbf16>
    %xl = kiln.cast %x : tensor<2x8xf32> -> tensor<2x8xbf16>
    %y = kiln.matmul %xl, %wl : (tensor<2x8xbf16>, tensor<8x4xbf16>) -> tensor<2x4xbf16>
    ```
  }];
  let options = [
    Kiln_EnumOption<"dtype", "dtype", Kiln_LowPrecision, "BF16",
                    "The low-precision type: bf16 or fp16">,
    ListOption<"fp32Ops", "fp32-ops", "std::string",
               "ONNX op types that compute in float32">,
    Option<"func", "func", "std::string", "\"forward\"",
           "The function to retype">,
  ];
}

def KilnDataParallelPass : Pass<"kiln-data-parallel", "mlir::ModuleOp"> {
  let summary = "Data parallelism: @train_step's batch split over dp ranks";
  let description = [{
    The data-parallel strategy, on @train_step at the global batch after
    `--kiln-autodiff` (the gradients are results, tagged `kiln.grad_of`)
    and before `--kiln-attach-optimizer` (so the gradient norm and clipping
    see whole gradients). It is the general passes with a fixed seed:
    `--kiln-shard{mesh=dp=N func=train_step}` (the data inputs' batch split
    over dp, parameters replicated), `--kiln-shard-propagation` and
    `--kiln-partition`. The sharding rules then put the collectives where
    the arithmetic needs them: each rank computes on its batch / dp rows;
    a parameter's gradient, a sum over the batch, is `shard.all_reduce
    ... reduction = sum` (inside backward, as soon as it is computed); a
    mean loss is all-reduced with `average` and its gradient scaled by
    1 / dp. The 1-rank run with the same global batch computes the same
    loss and update, up to the summation order.

    BatchNorm normalizes each rank's batch by its own statistics (PyTorch
    DDP's default: its batch factor is per-shard), and each state update
    (the running statistics, `kiln.update`) becomes `shard.broadcast ...
    root = [0]`: every rank keeps rank 0's, as DDP's buffer broadcast does.

    With `compression` other than none, each f32 gradient's all-reduce
    carries `kiln.compression` (bf16, fp16, int8): the runtime sends it in
    that format with error feedback (runtime/comm/Compression.h). The
    loss's all-reduce is never compressed.

    Tensor parallelism (`tp` > 1) adds a `tp` axis inside `dp` (the mesh is
    dp=N,tp=M, consecutive ranks in one tp group, as Megatron-LM places
    them) and `shard` seeds the user's annotations (`--kiln-shard`'s
    REGEX=SPEC;...): a parameter split over tp is held split, its gradient
    and update too, and the rules put the all-reduces of partial sums,
    the all-gathers and the local slices where the split computation needs
    them. A `shard` annotation that matches no argument is a warning
    naming it.

    With `dp` = `tp` = 1 and no `shard` it does nothing.
  }];
  let options = [
    Option<"dp", "dp", "int64_t", "1", "ranks on the dp axis">,
    Option<"tp", "tp", "int64_t", "1", "ranks on the tp axis (inside dp)">,
    Option<"ep", "ep", "int64_t", "1",
           "ranks on the ep axis (inside dp): the batch is split over dp and "
           "ep together, parameters --kiln-expert-parallel split by expert "
           "over ep">,
    Option<"shard", "shard", "std::string", "\"\"",
           "user shardings of parameters and inputs: REGEX=SPEC;... "
           "(SPEC: one entry per dimension, tp or -)">,
    Option<"compression", "compression", "std::string", "\"none\"",
           "wire format of the gradient all-reduces: none, bf16, fp16 or "
           "int8 (error feedback; kiln.compression on each)">,
  ];
  let dependentDialects = ["mlir::shard::ShardDialect"];
}

def KilnMicrobatchPass : Pass<"kiln-microbatch", "mlir::ModuleOp"> {
  let summary = "Gradient accumulation: @train_step over M microbatches";
  let description = [{
    On @train_step after `--kiln-autodiff` (the loss, the gradients
    `kiln.grad_of` and the state updates `kiln.update` are its results) and
    before `--kiln-data-parallel`: the step computes forward and backward
    once per microbatch and returns the microbatches' mean loss and mean
    gradients, what the whole batch's mean loss gives up to the summation
    order. The step comes built for one microbatch (kiln-compile imports
    the model at batch-size / M); its data inputs become M times as long.
    Microbatch m is the rows `m, m + M, m + 2M, ...` of every data
    input (a reshape `[B, ...] -> [B/M, M, ...]` and a slice of dimension
    1), so that the batch split over dp stays a split of dimension 0 and
    each rank's microbatch m is its share of the global microbatch m.
    Each copy of an op is tagged `kiln.microbatch = m`; ops that read no
    data and no state (weights' transposes, constants) are computed once
    and shared. State (BatchNorm's running statistics) threads through
    the copies in order: microbatch m + 1 reads what m wrote, as PyTorch's
    gradient accumulation does, and the step returns the last; BatchNorm's
    batch statistics are each microbatch's own. A loss averaged over valid
    labels (`ignore_index`) is averaged per microbatch, then over them.
    With `microbatches` = 1 it does nothing.
  }];
  let options = [
    Option<"microbatches", "microbatches", "int64_t", "1",
           "microbatches per step (M)">,
  ];
}

def KilnRecomputePass : Pass<"kiln-recompute", "mlir::ModuleOp"> {
  let summary = "Activation recompute: forward values rebuilt in backward to meet a memory budget";
  let description = [{
    On the training step as it will run (@train_step, or each pipeline
    rank's @train_step_pp<r> after `--kiln-pipeline`, in its schedule's
    order), just before lowering (no CSE may run after it: it would merge
    the copies back). A *saved activation* is a forward value that backward
    reads: a result of an op the loss depends on (with pipeline tags: an op
    of a stage without `kiln.backward`) that an op of backward (not in the
    loss's slice; with tags: `kiln.backward`) reads. Recomputing one means
    cloning its op, and the ops of the intermediates it needs that are not
    kept anyway, just before its first backward reader, so the forward
    value dies after its last forward reader. Ops with side effects (a
    `dist.recv`) are never cloned: what they produce is kept. The clones
    carry the original's attributes (dropout's stream, the stage and
    microbatch tags, plus `kiln.backward`), so they compute the same bits.

    `mode`: `selective` recomputes the activations whose recomputation
    costs at most 32 FLOPs (the op cost interface) per byte freed (the
    elementwise, normalisation and data-movement ops; attention scores of a
    short head dimension), `full` every saved activation; `none` (the
    default) none unless a budget is given. `budget-mb` > 0: the estimated
    peak of live intermediates (what `--kiln-assign-buffers` places in the
    arena: parameters and inputs excluded, views share their source's
    bytes) must fit in it; the activations of the mode's pool (all, with
    `none`) are recomputed cheapest FLOPs per byte first until it does. A
    budget below the smallest peak recompute can reach is an error naming
    that minimum. Each step function it works on gets `kiln.recompute =
    {activations, flops, peak_before, peak_after}`: the recomputed saved
    activations, the FLOPs of their copies per step and the estimated
    peaks in bytes.
  }];
  let options = [
    Option<"mode", "mode", "std::string", "\"none\"",
           "which activations to recompute: none, selective or full">,
    Option<"budgetMb", "budget-mb", "double", "0.0",
           "the peak of live intermediates to meet, in MiB (0: none)">,
  ];
}

def KilnPipelineStagesPass : Pass<"kiln-pipeline-stages", "mlir::ModuleOp"> {
  let summary = "Pipeline stages: @forward's ops cut into S cost-balanced stages";
  let description = [{
    On @forward (before `--kiln-autodiff`, whose gradient sweep gives each
    op's VJP the op's stage): tags every op `kiln.stage = s`, the stages
    contiguous runs of the ops in order. Without `boundaries` the cut
    balances the estimated time per stage, each op's `CostOpInterface`
    FLOPs and bytes at a nominal rate (`flops-per-byte` FLOPs take as long
    as one byte moved): it first finds the smallest possible time of the
    slowest stage, then, among the cuts within 5% of it, the one whose
    activations crossing stage boundaries have the fewest bytes.
    `costs` calibrates the estimate by measured kernel times: a Chrome
    trace from `kiln-train --profile` (any mesh), whose kernel events carry
    their ONNX node. A node's measured time per step (its forward and
    backward kernels; the rank that ran it, the slowest if several did)
    is shared among the ops of that node by their estimates; the ops the
    trace does not name keep their estimates, scaled by what the measured
    ops' estimates under- or overstate overall. `boundaries` (the ONNX
    value names where stages 1..S-1 start, kept by the import's value
    names) pins the cuts instead; each must be the only batch-dependent
    value crossing its cut. A parameter read in several stages (tied
    weights) stays in each (--kiln-pipeline sums its gradient); a model
    with fewer costed ops than stages is an error. `kiln-compile --mesh
    pp=S` runs it.
  }];
  let options = [
    Option<"stages", "stages", "int64_t", "2", "pipeline stages (S)">,
    ListOption<"boundaries", "boundaries", "std::string",
               "ONNX values where stages 1..S-1 start (default: balanced)">,
    Option<"flopsPerByte", "flops-per-byte", "double", "2.5",
           "the machine balance the cost model assumes">,
    Option<"costs", "costs", "std::string", "\"\"",
           "a kiln-train --profile trace whose kernel times calibrate the costs">,
  ];
}

def KilnExpandBatchNormPass : Pass<"kiln-expand-batch-norm", "mlir::ModuleOp"> {
  let summary = "Expands training BatchNorm into reductions and elementwise ops";
  let description = [{
    Rewrites `kiln.batch_norm_train` and `kiln.batch_norm_train_grad` into
    `kiln.reduce_mean` / `kiln.reduce_sum` over the batch and spatial axes
    and elementwise ops, computing the same values (the biased variance
    normalises; the running variance is unbiased with
    `unbiased_running_var`):

        mean = mean(x), xc = x - mean, var = mean(xc^2), istd = rsqrt(var + eps)
        y = xc * istd * scale + bias
        dbias = sum(dy), dscale = sum(dy * xc * istd)
        dx = scale * istd * (dy - dbias / n - xc * istd * dscale / n)

    Its use is SyncBatchNorm (`kiln-compile --sync-batchnorm`): under
    data parallelism the reductions' sharding rules all-reduce the
    statistics and the backward sums over every rank, so each rank
    normalises by the global batch's statistics, as the 1-rank run does.
    Runs after `--kiln-autodiff` and before `--kiln-data-parallel`.
  }];
}

def KilnExpandLossMeanPass : Pass<"kiln-expand-loss-mean", "mlir::ModuleOp"> {
  let summary = "A class loss's mean over valid labels as its sum over their count";
  let description = [{
    `kiln.softmax_cross_entropy` and `kiln.nll_loss` with `reduction =
    "mean"` and an `ignore_index` or class weights average over the valid
    labels' weights, not over the batch, so ranks' means cannot be averaged
    and their sharding rule keeps the batch whole. This pass rewrites each
    (and its gradient op) as the `"sum"` loss divided by the valid count,
    `sum(label != ignore_index ? weight[label] : 0)`: both sums split over
    a sharded batch (all-reduced by the partitioner), and the gradient is
    the sum loss's gradient of `dloss / count`. Same values as the mean.
    Runs after `--kiln-autodiff` and before `--kiln-data-parallel`.
  }];
}

def KilnExpandCrossEntropyPass : Pass<"kiln-expand-cross-entropy", "mlir::ModuleOp"> {
  let summary = "Softmax cross-entropy as reductions over the class axis";
  let description = [{
    Rewrites `kiln.softmax_cross_entropy` and its gradient (reduction `mean`
    without `ignore_index`, or `sum`, no class weights; run
    `--kiln-expand-loss-mean` first for a mean over valid labels) into the
    class max, `exp(x - max)`, its sum, and the label's logit picked by a
    one-hot of the labels against a class iota:
    `loss = log(sum) + max - x[label]`, `dx = (exp / sum - onehot) * dloss`
    (over the positions for a mean; 0 where the label is `ignore_index`).
    Every piece has a sharding rule that splits the class axis, so logits
    split over tp (a vocab-parallel LM head) are never gathered: the
    partitioner all-reduces the max, the sum and the picked logit, each one
    value per position, and the one-hot is computed for this rank's classes
    only. Runs after `--kiln-autodiff` and before partitioning.
  }];
}

def KilnEvalModePass : Pass<"kiln-eval-mode", "mlir::ModuleOp"> {
  let summary = "Rewrites @forward's training-mode ops for evaluation";
  let description = [{
    Dropout becomes the identity (its mask all true) and
    `kiln.batch_norm_train` becomes `kiln.batch_norm` with the running
    statistics (which are returned unchanged).
  }];
}

//===----------------------------------------------------------------------===//
// Sharding: seed, propagate, partition (docs/Distributed.md)
//===----------------------------------------------------------------------===//

def KilnShardPass : Pass<"kiln-shard", "mlir::ModuleOp"> {
  let summary = "Declares the mesh and seeds the shardings of function arguments";
  let description = [{
    Declares `shard.grid @kiln_mesh` with `kiln.axis_names` from `mesh`
    ("dp=2,tp=2": axes outermost first; an existing @kiln_mesh must be the
    same mesh) and writes `kiln.sharding` on arguments of every function:
    - the data inputs (arguments that are not `kiln.param`, of rank >= 1,
      other than the learning rate and step) get their dimension 0 (the
      batch) split over `batch-axis` when the mesh has that axis;
    - `shard` ("REGEX=SPEC;REGEX=SPEC"): arguments whose `onnx.name` matches
      REGEX get SPEC, one entry per dimension separated by commas, each
      an axis name, axes joined by `+`, or `-` for whole: `fc1.weight=tp,-`.
      A user annotation overrides the batch seed, and an argument that
      already has `kiln.sharding` keeps it (checked against the mesh).
    A result that is a parameter's gradient (`kiln.grad_of`) or update
    (`kiln.update`) gets that parameter's sharding, so a split parameter
    stays split through the step.
    Arguments that get nothing stay whole. `--kiln-shard-propagation` then
    completes the shardings over each function.
  }];
  let options = [
    Option<"mesh", "mesh", "std::string", "\"\"",
           "the mesh, NAME=SIZE[,NAME=SIZE...] (dp=2,tp=2)">,
    Option<"batchAxis", "batch-axis", "std::string", "\"dp\"",
           "the mesh axis (or axes, '+'-joined, outermost first) the data "
           "inputs' batch dimension is split over">,
    Option<"shard", "shard", "std::string", "\"\"",
           "user shardings of arguments: REGEX=SPEC;... (SPEC: tp,- ...)">,
    Option<"func", "func", "std::string", "\"\"",
           "the one function to seed (default: every function)">,
    Option<"warnUnmatched", "warn-unmatched", "bool", "false",
           "an annotation that matches no argument is a warning, not an "
           "error">,
  ];
  let dependentDialects = ["mlir::shard::ShardDialect"];
}

def KilnTpMegatronPass : Pass<"kiln-tp-megatron", "mlir::ModuleOp"> {
  let summary = "Megatron-LM tensor parallelism: attention and MLP blocks "
                "found by structure";
  let description = [{
    On @forward (before `--kiln-autodiff`, which copies the shardings to
    @train_step), finds by graph structure, not by names:
    - attention blocks: a projection (matmul by a 2-D parameter, with an
      optional bias parameter) cut into equal slices of its last dimension
      (fused Q, K, V) that are each reshaped into the same number of heads,
      or several projections of one input each reshaped into heads; the
      output projection is the first matmul by a 2-D parameter the heads
      reach;
    - MLP blocks: a projection, a chain of elementwise ops (its bias and
      activation), and the matmul by a 2-D parameter the chain feeds.
    It writes `kiln.sharding` on their parameters: the projections into
    heads and the MLP's up projection column-parallel (output features and
    bias over `tp`), the output and down projections row-parallel (input
    features), so partitioning gives one all-reduce per block in forward.
    A fused projection's weight [k C, Cin] is retyped [k, C, Cin] (its bias
    [k, C]) with `kiln.model_shape` the model's, split along C, and its
    slices become one projection per part, so each rank holds its heads'
    rows of every part. A weight used elsewhere (tied) stays whole; a block
    whose heads or hidden features `tp` does not divide stays whole, with a
    warning. The blocks found are recorded as `kiln.tp_blocks` on the
    module. User annotations (`--kiln-shard`'s) win over these.
  }];
  let options = [
    Option<"tp", "tp", "int64_t", "2", "ranks on the tp axis">,
    Option<"sequenceParallel", "sequence-parallel", "bool", "false",
           "Megatron's sequence parallelism: the LayerNorm, dropout and "
           "residual regions split on the sequence (dim 1 of [B, T, C]) over "
           "tp; the projections' inputs all-gathered, their partial sums "
           "reduce-scattered">,
    Option<"batchAxis", "batch-axis", "std::string", "\"\"",
           "with sequence-parallel: the mesh axis of the batch (dp), written "
           "into the pinned shardings">,
  ];
}

def KilnExpertParallelPass : Pass<"kiln-expert-parallel", "mlir::ModuleOp"> {
  let summary = "Expert parallelism: stacked expert weights split by expert";
  let description = [{
    On @forward (before `--kiln-autodiff`, which copies the shardings to
    @train_step), finds by graph structure, not by names, the expert layers
    of a mixture of experts: a batched matmul by a rank-3 parameter
    `[E, in, out]` (the experts' weights stacked, as rhs) whose lhs has the
    same leading dimension E (each expert's tokens), and the rank-3
    parameters `[E, ...]` added to its result (the experts' biases). It
    writes `kiln.sharding` on them: dimension 0 (the expert) over `ep`, so
    each rank holds E / ep experts; the sharding rules and the partition
    then move the tokens to their experts' ranks and back with one
    all-to-all each way (the dispatch and the combine), in forward and in
    backward. The layers found are recorded as `kiln.ep_layers` on the
    module; a weight E does not divide by ep, or used elsewhere, stays
    whole with a warning. User annotations (`--kiln-shard`'s) win.
  }];
  let options = [
    Option<"ep", "ep", "int64_t", "2", "ranks on the ep axis">,
  ];
}

def KilnShardPropagationPass : Pass<"kiln-shard-propagation", "mlir::ModuleOp"> {
  let summary = "Completes the shardings of every op from its sharding rule";
  let description = [{
    For each function, from its arguments' `kiln.sharding` (none: whole),
    visits the ops in order and chooses each op's factor shardings
    (ShardingRuleOpInterface) from its results' shardings when already
    given (`kiln.shardings` written by hand or by a strategy: they win),
    then its operands' in order; it writes the results' shardings as
    `kiln.shardings`. An operand whose sharding conflicts with the choice
    (an axis used twice, an axis that does not divide a factor, a
    dimension the rule keeps whole) is resharded by `--kiln-partition`.
    Then a backward sweep: a sharding a function result asks for
    (`kiln.sharding`) is given to the op computing it, and flows on into
    that op's operands that have no other use, so the value is computed
    split instead of whole and sliced; ops with written shardings keep
    them.
    Fails, naming the op, on an op without a sharding rule; and on a
    sharding that names an axis the mesh lacks or that does not divide
    its dimension.
  }];
}

def KilnPartitionPass : Pass<"kiln-partition", "mlir::ModuleOp"> {
  let summary = "Rewrites sharded functions to per-rank shapes with collectives";
  let description = [{
    SPMD partitioning after `--kiln-shard-propagation`: every tensor takes
    the shape one rank holds (each split dimension divided by its axes'
    rank count), and collectives (upstream `shard` ops over @kiln_mesh)
    appear where the rules need them:
    - an operand sharded other than its op needs: `shard.all_gather` of the
      dimensions it must have whole, then `shard.all_slice` (local, no
      communication) of the dimensions it must have split;
    - a result that lacks a sharded factor (a contraction over a split
      dimension): `shard.all_reduce` with the factor's reduction (sum,
      average, max, min) over its axes;
    - a result of an op that divides by a sharded factor's size (a mean
      loss's gradient): multiplied by 1 / (the axes' rank count);
    - a per-shard result (BatchNorm's running statistics under a split
      batch) returned whole: `shard.broadcast` of rank 0's value, as
      PyTorch DDP broadcasts its buffers.
    Function results are returned as their `kiln.sharding` says (none:
    whole). Argument and result attributes keep `kiln.sharding`, which
    tells the caller which block each rank holds.
  }];
  let dependentDialects = ["mlir::shard::ShardDialect"];
}

#endif // KILN_DIALECT_KILN_TRANSFORMS_PASSES_TD
