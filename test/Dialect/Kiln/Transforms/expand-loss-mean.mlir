// RUN: kiln-opt %s --split-input-file --kiln-expand-loss-mean | FileCheck %s
// RUN: kiln-opt %s --split-input-file --kiln-expand-loss-mean --kiln-data-parallel=dp=2 --canonicalize --cse | FileCheck %s --check-prefix=DP

// A mean over the labels that are not ignore_index: the sum loss over the
// count of valid labels, and the gradient of the sum loss at dloss / count.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[L:.*]] = kiln.softmax_cross_entropy %arg0, %arg1 {ignore_index = -100 : i64, reduction = "sum"}
// CHECK: %[[IG:.*]] = kiln.constant dense<-100> : tensor<i64>
// CHECK: %[[EQ:.*]] = kiln.equal %arg1, %[[IG]]
// CHECK: %[[OK:.*]] = kiln.not %[[EQ]]
// CHECK: %[[F:.*]] = kiln.cast %[[OK]] : tensor<4xi1> -> tensor<4xf32>
// CHECK: %[[N:.*]] = kiln.reduce_sum %[[F]] {axes = array<i64: 0>, keepdims = false}
// CHECK: %[[M:.*]] = kiln.div %[[L]], %[[N]]
// CHECK: %[[DL:.*]] = kiln.div %{{.*}}, %{{.*}} : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK: kiln.softmax_cross_entropy_grad %[[DL]], %arg0, %arg1 {ignore_index = -100 : i64, reduction = "sum"}
// CHECK: return %[[M]]
// Split over dp: the sum and the count are each summed over the ranks.
// DP-LABEL: func.func @train_step
// DP-SAME: tensor<2x3xf32>
// DP: %[[L:.*]] = kiln.softmax_cross_entropy {{.*}} -> tensor<f32>
// DP-DAG: %[[LA:.*]] = shard.all_reduce %[[L]] on @kiln_mesh grid_axes = [0] : tensor<f32>
// DP-DAG: %[[N:.*]] = kiln.reduce_sum
// DP-DAG: %[[NA:.*]] = shard.all_reduce %[[N]] on @kiln_mesh grid_axes = [0] : tensor<f32>
// DP: kiln.div %[[LA]], %[[NA]]
// DP-NOT: shard.all_gather %arg
func.func @train_step(%z: tensor<4x3xf32> {onnx.name = "z"}, %y: tensor<4xi64> {onnx.name = "labels"},
                      %w: tensor<3xf32> {kiln.param, kiln.role = "weight", onnx.name = "w"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"}, tensor<4x3xf32>, tensor<3xf32> {kiln.grad_of = 2 : i64}) {
  %l = kiln.softmax_cross_entropy %z, %y {ignore_index = -100 : i64} : (tensor<4x3xf32>, tensor<4xi64>) -> tensor<f32>
  %one = kiln.constant dense<1.0> : tensor<f32>
  %g = kiln.softmax_cross_entropy_grad %one, %z, %y {ignore_index = -100 : i64} : (tensor<f32>, tensor<4x3xf32>, tensor<4xi64>) -> tensor<4x3xf32>
  return %l, %g, %w : tensor<f32>, tensor<4x3xf32>, tensor<3xf32>
}

// -----

// Class weights: the count is the sum of the valid labels' weights (an
// ignored label's index is replaced before the gather, then its weight
// zeroed).
// CHECK-LABEL: func.func @train_step
// CHECK: kiln.softmax_cross_entropy %arg0, %arg1, %arg2 {ignore_index = 0 : i64, reduction = "sum"}
// CHECK: kiln.select
// CHECK: %[[PER:.*]] = kiln.gather %arg2, %{{.*}} {axis = 0 : i64}
// CHECK: kiln.select %{{.*}}, %[[PER]]
// CHECK: kiln.reduce_sum
// CHECK: kiln.div
// A sum or an unweighted mean without ignore_index is left alone.
// CHECK: kiln.nll_loss %arg0, %arg1 {reduction = "sum"}
// CHECK-NOT: kiln.div
func.func @train_step(%z: tensor<4x3xf32> {onnx.name = "z"}, %y: tensor<4xi64> {onnx.name = "labels"},
                      %cw: tensor<3xf32> {kiln.param, kiln.role = "weight", onnx.name = "cw"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"}, tensor<f32>, tensor<f32>, tensor<3xf32> {kiln.grad_of = 2 : i64}) {
  %l = kiln.softmax_cross_entropy %z, %y, %cw {ignore_index = 0 : i64} : (tensor<4x3xf32>, tensor<4xi64>, tensor<3xf32>) -> tensor<f32>
  %s = kiln.nll_loss %z, %y {reduction = "sum"} : (tensor<4x3xf32>, tensor<4xi64>) -> tensor<f32>
  %m = kiln.nll_loss %z, %y : (tensor<4x3xf32>, tensor<4xi64>) -> tensor<f32>
  return %l, %s, %m, %cw : tensor<f32>, tensor<f32>, tensor<f32>, tensor<3xf32>
}
