//===- Passes.td - dist passes ------------------------------*- tablegen -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_DIST_TRANSFORMS_PASSES_TD
#define KILN_DIALECT_DIST_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def KilnBucketAllReducePass : Pass<"kiln-bucket-all-reduce", "mlir::func::FuncOp"> {
  let summary = "groups all-reduces into buckets that start early and are "
                "waited for late";
  let description = [{
    Groups the function's `shard.all_reduce` ops into buckets of at most
    `bucket-mb` MiB and replaces each bucket by a `dist.all_reduce_start`,
    placed right after the last of its tensors is computed, and a
    `dist.all_reduce_wait`, placed right before the first op that reads one
    of its results. Everything between the two runs while the bucket is in
    flight: after `--kiln-data-parallel` and `--kiln-attach-optimizer`, the
    gradients of the last layers travel while backward computes the first
    layers' ones, and the optimizer waits for each bucket only where it
    updates with it.

    Buckets fill in the order the tensors are computed (backward order for
    gradients), as PyTorch DDP's do. All-reduces join a bucket only with
    those of the same grid, axes, reduction, element type and
    `kiln.compression`; an all-reduce larger than `bucket-mb` is a bucket of
    its own. A bucket closes before a tensor whose computation reads one of
    its results (waiting for the bucket first), so the start always comes
    before the wait.

    `bucket-mb` = 0 leaves every `shard.all_reduce` as it is: each one is
    then a synchronous collective where it stands.
  }];
  let options = [
    Option<"bucketMB", "bucket-mb", "double", "25.0",
           "the largest bucket, in MiB (0: no buckets)">,
  ];
  let statistics = [
    Statistic<"numBuckets", "buckets", "buckets formed">,
  ];
  let dependentDialects = ["kiln::dist::DistDialect"];
}

def KilnPipelinePass : Pass<"kiln-pipeline", "mlir::ModuleOp"> {
  let summary = "Pipeline parallelism: @train_step split into one program per stage rank";
  let description = [{
    The last kiln-level pass: splits @train_step, whose ops carry
    `kiln.stage` (--kiln-pipeline-stages, inherited by their VJPs) and
    `kiln.microbatch` (--kiln-microbatch), into `@train_step_pp<r>`, the
    program of pipeline rank r (model stage c * S + r is chunk c of rank r
    under the interleaved schedule, rank c otherwise). An op without a
    stage (the optimizer's, the partition's collectives, a folded op) runs
    on the stage of the values it reads; ops that read only constants and
    per-step scalars are copied where they are used. An op reading values
    of several stages (the global gradient norm's sums, a gradient scaled
    by the clipping coefficient) runs on the stage that gives it the most
    elements (a tie: the later stage), so that a parameter's update stays
    with it and the norm's sum runs down the stages in the 1-rank order.
    An optimizer state argument goes where its reader does. A parameter
    read by several stages (tied embeddings) is held by each of them: its
    stage is the last, where the partial gradients are summed and the
    update runs, and the new value is sent to the other stages, whose
    programs return it as their update too. A value one
    rank computes and another reads becomes a `dist.send` after its
    producer and a `dist.recv` in the reader (the activations forward,
    their gradients backward), each pair with its own tag; the step's
    scalar results other than updates (the loss, grad_norm) go to every
    rank, so that every rank returns them. Each program's
    ops are then ordered by the schedule's instruction list for its rank
    (kiln/runtime/PipelineSchedule.h): the ops that read no microbatch
    first, then the forward and backward of each microbatch and chunk in
    the schedule's order (zb: a microbatch's backward split into the part
    that computes the gradients sent to the previous stage and the weight
    gradients after it), then the accumulated gradients' reduction and
    the optimizer; work of that last part that reads only values the
    microbatches computed (the gradients' sums over the microbatches,
    their mean, a bucket's `dist.all_reduce_start`) moves up to right after
    its last input, so a stage's dp all-reduces start during its last
    backward and are waited for only before the optimizer. Results and arguments a program does not use are
    dropped (the updates' `kiln.update` renumbered). Last, the programs are
    run symbolically (sends never wait, a receive waits for its send): an
    order in which every rank would wait on a receive is an error that
    names each rank's receive.
  }];
  let options = [
    Option<"stages", "stages", "int64_t", "2", "pipeline ranks (S)">,
    Option<"microbatches", "microbatches", "int64_t", "1",
           "microbatches per step (M), as --kiln-microbatch split them">,
    Option<"schedule", "schedule", "std::string", "\"1f1b\"",
           "gpipe, 1f1b, interleaved or zb">,
    Option<"virtualStages", "virtual-stages", "int64_t", "1",
           "model chunks per rank (interleaved)">,
  ];
  let dependentDialects = ["kiln::dist::DistDialect"];
}

#endif // KILN_DIALECT_DIST_TRANSFORMS_PASSES_TD
