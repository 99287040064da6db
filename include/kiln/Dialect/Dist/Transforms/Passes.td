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

#endif // KILN_DIALECT_DIST_TRANSFORMS_PASSES_TD
