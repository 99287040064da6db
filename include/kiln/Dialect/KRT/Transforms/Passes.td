//===- Passes.td - krt passes -------------------------------*- tablegen -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_KRT_TRANSFORMS_PASSES_TD
#define KILN_DIALECT_KRT_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def KilnAssignBuffersPass : Pass<"kiln-assign-buffers", "mlir::ModuleOp"> {
  let summary = "Places every krt.alloc in its device's arena";
  let description = [{
    Buffer assignment over the scheduled program (the order of the ops in the
    function). Views join their source's buffer; a `krt.launch` marked
    `in_place` writes its output over an input of the same type whose buffer
    dies at that launch (and that no other input of the launch reads). Each
    resulting buffer lives from the first op that writes it to the last op
    that reads it (to the end for function results). Offsets come from the
    greedy-by-size best-fit planner: buffers in decreasing size, each in the
    smallest gap between the buffers already placed whose lifetimes overlap
    its own, else above them. Offsets and sizes are multiples of 64 bytes.

    Sets `offset` on every `krt.alloc` and `krt.arena_bytes` (the arena's
    size, the plan's peak) on the function. With `statistics`, prints one
    line per function to stderr:
    `kiln-assign-buffers: @forward peak-bytes P naive-bytes N buffers B in-place I`
    (`naive-bytes`: the same buffers without any reuse). The pass statistics
    below carry the same figures under `--mlir-pass-statistics` when LLVM is
    built with statistics enabled (Debian's release build is not).

    ```mlir
    // %0 dies at the second launch, which runs in place: %1 takes its bytes.
    %0 = krt.alloc {offset = 0 : i64} : memref<4xf32>
    %1 = krt.alloc {offset = 0 : i64} : memref<4xf32>
    ```
  }];
  let options = [
    Option<"printStatistics", "statistics", "bool", /*default=*/"false",
           "Print each function's peak and naive bytes to stderr">,
  ];
  let dependentDialects = ["::kiln::krt::KRTDialect"];
  let statistics = [
    Statistic<"peakBytes", "peak-bytes", "Arena bytes of the plan (its peak)">,
    Statistic<"naiveBytes", "naive-bytes", "Bytes of the buffers without reuse">,
    Statistic<"numInPlace", "in-place", "Outputs written over a dying input">,
    Statistic<"numBuffers", "buffers", "Buffers placed (after views and in-place)">,
  ];
}

#endif // KILN_DIALECT_KRT_TRANSFORMS_PASSES_TD
