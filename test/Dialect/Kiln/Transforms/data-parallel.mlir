// RUN: kiln-opt %s --split-input-file --kiln-data-parallel=dp=4 --verify-diagnostics | FileCheck %s
// RUN: kiln-opt %s --split-input-file --kiln-data-parallel=dp=1 | FileCheck %s --check-prefix=ONE
// RUN: kiln-opt %s --split-input-file --kiln-data-parallel=dp=4 --kiln-attach-optimizer=optimizer=sgd --verify-diagnostics | FileCheck %s --check-prefix=OPT

// @train_step at the global batch (8) becomes the per-rank program: the
// batch split over the 4 ranks of dp (2 rows each), the mean loss averaged
// over them and its gradient scaled by 1/4 (each rank's mean is over 2
// rows, the 1-rank run's over 8), the weight's gradient (a sum over the
// batch) summed where backward computes it.
// CHECK: shard.grid @kiln_mesh(shape = 4) {kiln.axis_names = ["dp"]}
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tensor<2x4xf32> {kiln.sharding = {{\[\[}}"dp"], []], onnx.name = "x"}
// CHECK-SAME: tensor<2xi64> {kiln.labels, kiln.sharding = {{\[\[}}"dp"]], onnx.name = "labels"}
// CHECK: %[[Y:.*]] = kiln.matmul {{.*}} -> tensor<2x2xf32>
// CHECK: %[[L:.*]] = kiln.softmax_cross_entropy %[[Y]]
// CHECK: %[[AL:.*]] = shard.all_reduce %[[L]] on @kiln_mesh grid_axes = [0] reduction = average : tensor<f32>
// CHECK: %[[D:.*]] = kiln.softmax_cross_entropy_grad {{.*}} -> tensor<2x2xf32>
// CHECK: %[[Q:.*]] = kiln.constant dense<2.500000e-01> : tensor<f32>
// CHECK: %[[DS:.*]] = kiln.mul %[[D]], %[[Q]]
// CHECK: %[[G:.*]] = kiln.matmul %{{.*}}, %[[DS]] {transpose_lhs = true} : (tensor<2x4xf32>, tensor<2x2xf32>) -> tensor<4x2xf32>
// CHECK: %[[AG:.*]] = shard.all_reduce %[[G]] on @kiln_mesh grid_axes = [0] : tensor<4x2xf32>
// CHECK: return %[[AL]], %[[AG]]
// dp = 1 changes nothing.
// ONE-NOT: shard.all_reduce
// ONE-NOT: shard.broadcast
// The optimizer then updates with the summed gradient.
// OPT: %[[AG:.*]] = shard.all_reduce %{{.*}} on @kiln_mesh grid_axes = [0] : tensor<4x2xf32>
// OPT: kiln.sgd_update %{{.*}}, %[[AG]]
func.func @train_step(%w: tensor<4x2xf32> {kiln.param, kiln.role = "weight", onnx.name = "w"},
                      %x: tensor<8x4xf32> {onnx.name = "x"},
                      %labels: tensor<8xi64> {kiln.labels, onnx.name = "labels"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"}, tensor<4x2xf32> {kiln.grad_of = 0 : i64}) {
  %y = kiln.matmul %x, %w : (tensor<8x4xf32>, tensor<4x2xf32>) -> tensor<8x2xf32>
  %l = kiln.softmax_cross_entropy %y, %labels : (tensor<8x2xf32>, tensor<8xi64>) -> tensor<f32>
  %one = kiln.constant dense<1.0> : tensor<f32>
  %d = kiln.softmax_cross_entropy_grad %one, %y, %labels : (tensor<f32>, tensor<8x2xf32>, tensor<8xi64>) -> tensor<8x2xf32>
  %g = kiln.matmul %x, %d {transpose_lhs = true} : (tensor<8x4xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
  return %l, %g : tensor<f32>, tensor<4x2xf32>
}

// -----

// BatchNorm normalizes each rank's rows by their own statistics (PyTorch
// DDP's default); the running statistics then differ between ranks, and
// every rank keeps rank 0's, as DDP's buffer broadcast does.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[Y:.*]], %[[M:.*]], %{{.*}} = kiln.batch_norm_train {{.*}}(tensor<2x3xf32>
// CHECK: %[[M0:.*]] = shard.broadcast %[[M]] on @kiln_mesh grid_axes = [0] root = [0] : (tensor<3xf32>) -> tensor<3xf32>
// CHECK: return %{{.*}}, %{{.*}}, %[[M0]]
func.func @train_step(%x: tensor<8x3xf32> {onnx.name = "x"},
                      %s: tensor<3xf32> {kiln.param, kiln.role = "weight", onnx.name = "s"},
                      %b: tensor<3xf32> {kiln.param, kiln.role = "weight", onnx.name = "b"},
                      %m: tensor<3xf32> {kiln.param, kiln.role = "state", onnx.name = "m"},
                      %v: tensor<3xf32> {kiln.param, kiln.role = "state", onnx.name = "v"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"}, tensor<3xf32> {kiln.grad_of = 1 : i64},
        tensor<3xf32> {kiln.update = 3 : i64, onnx.name = "m"}) {
  %y, %rm, %rv = kiln.batch_norm_train %x, %s, %b, %m, %v {epsilon = 1.0e-5 : f32, momentum = 0.9 : f32} : (tensor<8x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<8x3xf32>, tensor<3xf32>, tensor<3xf32>)
  %l = kiln.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<8x3xf32>) -> tensor<f32>
  return %l, %s, %rm : tensor<f32>, tensor<3xf32>, tensor<3xf32>
}

// -----

// After the optimizer: no gradients left to reduce.
// expected-error @below {{has no gradient results (kiln.grad_of): run --kiln-autodiff first, and --kiln-data-parallel before --kiln-attach-optimizer}}
func.func @train_step(%w: tensor<4xf32> {kiln.param, kiln.role = "weight", onnx.name = "w"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"}, tensor<4xf32> {kiln.update = 0 : i64, onnx.name = "w"}) {
  %s = kiln.reduce_sum %w {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
  return %s, %w : tensor<f32>, tensor<4xf32>
}

// -----

// A global batch that does not divide over the ranks.
// expected-error @+2 {{argument 'x': dimension 0 (6) does not divide over 4 ranks of mesh axes ["dp"]}}
func.func @train_step(%w: tensor<4xf32> {kiln.param, kiln.role = "weight", onnx.name = "w"},
                      %x: tensor<6x4xf32> {onnx.name = "x"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"}, tensor<4xf32> {kiln.grad_of = 0 : i64}) {
  %s = kiln.reduce_sum %x {axes = array<i64: 0, 1>, keepdims = false} : (tensor<6x4xf32>) -> tensor<f32>
  return %s, %w : tensor<f32>, tensor<4xf32>
}

// -----

// A mesh that does not match.
// expected-error @below {{'shard.grid' op is the mesh dp=2, which does not match --kiln-shard mesh=dp=4}}
shard.grid @kiln_mesh(shape = 2) {kiln.axis_names = ["dp"]}
func.func @train_step(%w: tensor<4xf32> {kiln.param, kiln.role = "weight", onnx.name = "w"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"}, tensor<4xf32> {kiln.grad_of = 0 : i64}) {
  %s = kiln.reduce_sum %w {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
  return %s, %w : tensor<f32>, tensor<4xf32>
}
