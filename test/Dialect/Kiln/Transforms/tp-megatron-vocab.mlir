// RUN: kiln-opt %s --kiln-tp-megatron=tp=2 --kiln-expand-cross-entropy | FileCheck %s
// RUN: kiln-opt %s --kiln-tp-megatron=tp=2 --kiln-expand-cross-entropy --kiln-shard="mesh=tp=2 func=forward" --kiln-shard-propagation --kiln-partition | FileCheck %s --check-prefix=PART

// Vocab-parallel: the token embedding (a gather of a 2-D parameter's rows
// by the data's indices) and the LM head (the projection whose output
// features are the cross-entropy's classes) split their 8 vocabulary rows
// over tp; the cross-entropy becomes reductions over the class axis.
// CHECK: kiln.tp_blocks = [{kind = "lm_head", params = ["head"]}, {kind = "embedding", params = ["emb"]}]
// CHECK-LABEL: func.func @forward
// CHECK-SAME: tensor<8x4xf32> {kiln.param, kiln.role = "weight", kiln.sharding = {{\[\[}}"tp"], []], onnx.name = "emb"}
// CHECK-SAME: tensor<8x4xf32> {kiln.param, kiln.role = "weight", kiln.sharding = {{\[\[}}"tp"], []], onnx.name = "head"}
// CHECK-NOT: kiln.softmax_cross_entropy
// CHECK: kiln.reduce_max %{{.*}} {axes = array<i64: 2>} : (tensor<2x3x8xf32>) -> tensor<2x3x1xf32>
// CHECK: kiln.exp
// CHECK: kiln.reduce_sum %{{.*}} {axes = array<i64: 2>} : (tensor<2x3x8xf32>) -> tensor<2x3x1xf32>
// CHECK: kiln.constant dense<{{\[\[\[}}0, 1, 2, 3, 4, 5, 6, 7]]]> : tensor<1x1x8xi64>
// CHECK: kiln.equal
// CHECK: kiln.log

// Partitioned: each rank looks up its 4 rows (zeros for the other tokens)
// and the lookups are summed; the logits stay [2, 3, 4] per rank: the class
// max, the sum of exponentials and the label's logit are all-reduced, one
// value per position, and the one-hot is this rank's classes of a local
// slice of the iota. No logits are gathered.
// PART-NOT: shard.all_gather
// PART: %[[E:.*]] = kiln.gather %arg2, %arg0 {axis = 0 : i64, split = "tp", whole_size = 8 : i64} : (tensor<4x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
// PART-NEXT: shard.all_reduce %[[E]] on @kiln_mesh grid_axes = [0] : tensor<2x3x4xf32>
// PART: kiln.matmul {{.*}} -> tensor<2x3x4xf32>
// PART: %[[M:.*]] = kiln.reduce_max {{.*}} : (tensor<2x3x4xf32>) -> tensor<2x3x1xf32>
// PART-NEXT: shard.all_reduce %[[M]] on @kiln_mesh grid_axes = [0] reduction = max : tensor<2x3x1xf32>
// PART: shard.all_slice %{{.*}} on @kiln_mesh grid_axes = [0] slice_axis = 2 : tensor<1x1x8xi64> -> tensor<1x1x4xi64>
// PART: kiln.equal {{.*}} -> tensor<2x3x4xi1>
// PART-NOT: shard.all_gather
// PART: return
func.func @forward(%ids: tensor<2x3xi64> {onnx.name = "ids"},
                   %labels: tensor<2x3xi64> {kiln.labels, onnx.name = "labels"},
                   %emb: tensor<8x4xf32> {kiln.param, kiln.role = "weight", onnx.name = "emb"},
                   %head: tensor<8x4xf32> {kiln.param, kiln.role = "weight", onnx.name = "head"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"}) {
  %e = kiln.gather %emb, %ids {axis = 0 : i64} : (tensor<8x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %h = kiln.tanh %e : tensor<2x3x4xf32>
  %z = kiln.matmul %h, %head {transpose_rhs = true} : (tensor<2x3x4xf32>, tensor<8x4xf32>) -> tensor<2x3x8xf32>
  %l = kiln.softmax_cross_entropy %z, %labels {class_axis = 2 : i64} : (tensor<2x3x8xf32>, tensor<2x3xi64>) -> tensor<f32>
  return %l : tensor<f32>
}
