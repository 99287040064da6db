// RUN: kiln-opt %s -split-input-file --kiln-expert-parallel=ep=2 | FileCheck %s --check-prefix=EP
// RUN: kiln-opt %s -split-input-file --kiln-expert-parallel=ep=2 --kiln-shard="mesh=dp=2,ep=2 batch-axis=dp+ep func=forward" --kiln-shard-propagation --kiln-partition | FileCheck %s --check-prefix=PART
// RUN: kiln-opt %s -split-input-file --kiln-expert-parallel=ep=3 -o /dev/null 2>&1 | FileCheck %s --check-prefix=WARN

// An expert layer: tokens [B, E*cap, D] reordered to [E, B*cap, D], a
// batched matmul by the stacked weights [E, D, H] plus the biases [E, 1, H],
// and back. --kiln-expert-parallel splits the weights and the biases by
// expert; the router's 2-D weight stays whole.
// EP: module attributes {kiln.ep_layers = [{experts = 4 : i64, params = ["moe.w1", "moe.b1"]}]}
// EP-LABEL: func.func @forward
// EP-SAME: %arg1: tensor<4x8x16xf32> {kiln.param, kiln.sharding = {{\[}}["ep"], [], []], onnx.name = "moe.w1"}
// EP-SAME: %arg2: tensor<4x1x16xf32> {kiln.param, kiln.sharding = {{\[}}["ep"], [], []], onnx.name = "moe.b1"}
// EP-SAME: %arg3: tensor<8x4xf32> {kiln.param, onnx.name = "router"}

// The tokens arrive split over dp and ep; the expert matmul wants the
// experts over ep: the partition trades one for the other with one
// all-to-all over ep (the dispatch), the tokens keeping their dp split, and
// back (the combine). Nothing is gathered.
// PART-LABEL: func.func @forward
// PART-SAME: %arg1: tensor<2x8x16xf32>
// PART: kiln.transpose
// PART: %[[D:.*]] = shard.all_to_all %{{.*}} on @kiln_mesh grid_axes = [1] split_axis = 0 concat_axis = 1 : tensor<4x4x8xf32> -> tensor<2x8x8xf32>
// PART: kiln.matmul %[[D]], %arg1 : (tensor<2x8x8xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
// PART: shard.all_to_all %{{.*}} on @kiln_mesh grid_axes = [1] split_axis = {{[01]}} concat_axis = {{[01]}}
// PART-NOT: shard.all_gather
// PART-NOT: shard.all_slice
// PART: return

// WARN: warning: --kiln-expert-parallel: the 4 experts of 'moe.w1' do not divide over ep=3
module {
func.func @forward(%x: tensor<8x8x8xf32> {onnx.name = "x"},
                   %w1: tensor<4x8x16xf32> {kiln.param, onnx.name = "moe.w1"},
                   %b1: tensor<4x1x16xf32> {kiln.param, onnx.name = "moe.b1"},
                   %r: tensor<8x4xf32> {kiln.param, onnx.name = "router"})
    -> (tensor<8x4x2x16xf32> {onnx.name = "y", kiln.sharding = [["dp", "ep"], [], [], []]},
        tensor<8x8x4xf32> {onnx.name = "logits", kiln.sharding = [["dp", "ep"], [], []]}) {
  %logits = kiln.matmul %x, %r : (tensor<8x8x8xf32>, tensor<8x4xf32>) -> tensor<8x8x4xf32>
  %t = kiln.reshape %x : tensor<8x8x8xf32> -> tensor<8x4x2x8xf32>
  %e = kiln.transpose %t {perm = array<i64: 1, 0, 2, 3>} : (tensor<8x4x2x8xf32>) -> tensor<4x8x2x8xf32>
  %f = kiln.reshape %e : tensor<4x8x2x8xf32> -> tensor<4x16x8xf32>
  %h = kiln.matmul %f, %w1 : (tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<4x16x16xf32>
  %hb = kiln.add %h, %b1 : (tensor<4x16x16xf32>, tensor<4x1x16xf32>) -> tensor<4x16x16xf32>
  %g = kiln.reshape %hb : tensor<4x16x16xf32> -> tensor<4x8x2x16xf32>
  %y = kiln.transpose %g {perm = array<i64: 1, 0, 2, 3>} : (tensor<4x8x2x16xf32>) -> tensor<8x4x2x16xf32>
  return %y, %logits : tensor<8x4x2x16xf32>, tensor<8x8x4xf32>
}
}
