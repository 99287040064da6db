// RUN: kiln-opt %s --kiln-expand-batch-norm | FileCheck %s
// RUN: kiln-opt %s --kiln-expand-batch-norm --kiln-data-parallel=dp=2 --canonicalize --cse | FileCheck %s --check-prefix=SYNC

// Training BatchNorm and its gradient become reductions over the batch and
// spatial axes and elementwise ops.
// CHECK-LABEL: func.func @train_step
// CHECK-NOT: kiln.batch_norm_train
// CHECK: %[[MEAN:.*]] = kiln.reduce_mean %arg0 {axes = array<i64: 0, 2, 3>} : (tensor<4x3x2x2xf32>) -> tensor<1x3x1x1xf32>
// CHECK: %[[XC:.*]] = kiln.sub %arg0, %[[MEAN]]
// CHECK: %[[SQ:.*]] = kiln.mul %[[XC]], %[[XC]]
// CHECK: %[[VAR:.*]] = kiln.reduce_mean %[[SQ]] {axes = array<i64: 0, 2, 3>}
// CHECK: kiln.rsqrt
// The running variance is unbiased: 16 / 15 times the batch's.
// CHECK: kiln.constant dense<1.06666672> : tensor<f32>
// CHECK: kiln.reduce_sum %{{.*}} {axes = array<i64: 0, 2, 3>}
// CHECK-NOT: kiln.batch_norm_train_grad
// Under dp=2 (SyncBatchNorm), each statistic is averaged over the ranks and
// each backward sum summed: every rank normalises by the global batch's.
// SYNC-LABEL: func.func @train_step
// SYNC-SAME: tensor<2x3x2x2xf32>
// SYNC: %[[M:.*]] = kiln.reduce_mean %arg0 {{.*}} : (tensor<2x3x2x2xf32>) -> tensor<1x3x1x1xf32>
// SYNC: %[[MA:.*]] = shard.all_reduce %[[M]] on @kiln_mesh grid_axes = [0] reduction = average : tensor<1x3x1x1xf32>
// SYNC: kiln.sub %arg0, %[[MA]]
// SYNC: %[[V:.*]] = kiln.reduce_mean
// SYNC: shard.all_reduce %[[V]] on @kiln_mesh grid_axes = [0] reduction = average : tensor<1x3x1x1xf32>
// SYNC: %[[S:.*]] = kiln.reduce_sum
// SYNC: shard.all_reduce %[[S]] on @kiln_mesh grid_axes = [0] : tensor<1x3x1x1xf32>
// SYNC-NOT: shard.broadcast
func.func @train_step(%x: tensor<4x3x2x2xf32> {onnx.name = "x"},
                      %s: tensor<3xf32> {kiln.param, kiln.role = "weight", onnx.name = "s"},
                      %b: tensor<3xf32> {kiln.param, kiln.role = "weight", onnx.name = "b"},
                      %m: tensor<3xf32> {kiln.param, kiln.role = "state", onnx.name = "m"},
                      %v: tensor<3xf32> {kiln.param, kiln.role = "state", onnx.name = "v"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"}, tensor<3xf32> {kiln.grad_of = 1 : i64},
        tensor<3xf32> {kiln.grad_of = 2 : i64}, tensor<4x3x2x2xf32>,
        tensor<3xf32> {kiln.update = 3 : i64, onnx.name = "m"},
        tensor<3xf32> {kiln.update = 4 : i64, onnx.name = "v"}) {
  %y, %rm, %rv = kiln.batch_norm_train %x, %s, %b, %m, %v {epsilon = 1.0e-5 : f32, momentum = 0.9 : f32, unbiased_running_var = true} : (tensor<4x3x2x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<4x3x2x2xf32>, tensor<3xf32>, tensor<3xf32>)
  %l = kiln.reduce_mean %y {axes = array<i64: 0, 1, 2, 3>, keepdims = false} : (tensor<4x3x2x2xf32>) -> tensor<f32>
  %dx, %ds, %db = kiln.batch_norm_train_grad %y, %x, %s {epsilon = 1.0e-5 : f32} : (tensor<4x3x2x2xf32>, tensor<4x3x2x2xf32>, tensor<3xf32>) -> (tensor<4x3x2x2xf32>, tensor<3xf32>, tensor<3xf32>)
  return %l, %ds, %db, %dx, %rm, %rv : tensor<f32>, tensor<3xf32>, tensor<3xf32>, tensor<4x3x2x2xf32>, tensor<3xf32>, tensor<3xf32>
}
