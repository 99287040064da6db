// RUN: kiln-opt %s --split-input-file --kiln-data-parallel=dp=4 --verify-diagnostics | FileCheck %s
// RUN: kiln-opt %s --split-input-file --kiln-data-parallel=dp=1 | FileCheck %s --check-prefix=ONE
// RUN: kiln-opt %s --split-input-file --kiln-data-parallel=dp=4 --kiln-attach-optimizer=optimizer=sgd --verify-diagnostics | FileCheck %s --check-prefix=OPT

// The mesh is declared once; the gradient and the loss are averaged over its
// dp axis; the other results (none here) are left.
// CHECK: shard.grid @kiln_mesh(shape = 4) {kiln.axis_names = ["dp"]}
// CHECK-LABEL: func.func @train_step
// CHECK: %[[S:.*]] = kiln.reduce_sum
// CHECK: %[[G:.*]] = kiln.matmul
// CHECK: %[[AS:.*]] = shard.all_reduce %[[S]] on @kiln_mesh grid_axes = [0] reduction = average : tensor<f32> -> tensor<f32>
// CHECK: %[[AG:.*]] = shard.all_reduce %[[G]] on @kiln_mesh grid_axes = [0] reduction = average : tensor<4x2xf32> -> tensor<4x2xf32>
// CHECK: return %[[AS]], %[[AG]]
// dp = 1 changes nothing.
// ONE-NOT: shard.all_reduce
// The optimizer then updates with the averaged gradient.
// OPT: %[[AG:.*]] = shard.all_reduce %{{.*}} on @kiln_mesh grid_axes = [0] reduction = average : tensor<4x2xf32>
// OPT: kiln.sgd_update %{{.*}}, %[[AG]]
func.func @train_step(%w: tensor<4x2xf32> {kiln.param, kiln.role = "weight", onnx.name = "w"},
                      %x: tensor<3x4xf32> {onnx.name = "x"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"}, tensor<4x2xf32> {kiln.grad_of = 0 : i64}) {
  %y = kiln.matmul %x, %w : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
  %s = kiln.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<3x2xf32>) -> tensor<f32>
  %g = kiln.matmul %x, %y {transpose_lhs = true} : (tensor<3x4xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
  return %s, %g : tensor<f32>, tensor<4x2xf32>
}

// -----

// State updates (BatchNorm's running statistics) come from rank 0, as
// PyTorch DDP's buffer broadcast makes them.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[AS:.*]] = shard.all_reduce %{{.*}} on @kiln_mesh grid_axes = [0] reduction = average : tensor<f32>
// CHECK: %[[AG:.*]] = shard.all_reduce %{{.*}} on @kiln_mesh grid_axes = [0] reduction = average : tensor<4xf32>
// CHECK: %[[M:.*]] = shard.broadcast %{{.*}} on @kiln_mesh grid_axes = [0] root = [0] : (tensor<4xf32>) -> tensor<4xf32>
// CHECK: return %[[AS]], %[[AG]], %[[M]]
func.func @train_step(%w: tensor<4xf32> {kiln.param, kiln.role = "weight", onnx.name = "w"},
                      %m: tensor<4xf32> {kiln.param, kiln.role = "state", onnx.name = "m"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"}, tensor<4xf32> {kiln.grad_of = 0 : i64},
        tensor<4xf32> {kiln.update = 1 : i64, onnx.name = "m"}) {
  %s = kiln.reduce_sum %w {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
  return %s, %w, %m : tensor<f32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// After the optimizer: no gradients left to average.
// expected-error @below {{has no gradient results (kiln.grad_of): run --kiln-autodiff first, and --kiln-data-parallel before --kiln-attach-optimizer}}
func.func @train_step(%w: tensor<4xf32> {kiln.param, kiln.role = "weight", onnx.name = "w"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"}, tensor<4xf32> {kiln.update = 0 : i64, onnx.name = "w"}) {
  %s = kiln.reduce_sum %w {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
  return %s, %w : tensor<f32>, tensor<4xf32>
}

// -----

// A mesh that does not match.
// expected-error @below {{does not match --kiln-data-parallel dp=4: a 1-axis mesh of 4 ranks is needed}}
shard.grid @kiln_mesh(shape = 2)
func.func @train_step(%w: tensor<4xf32> {kiln.param, kiln.role = "weight", onnx.name = "w"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"}, tensor<4xf32> {kiln.grad_of = 0 : i64}) {
  %s = kiln.reduce_sum %w {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
  return %s, %w : tensor<f32>, tensor<4xf32>
}

