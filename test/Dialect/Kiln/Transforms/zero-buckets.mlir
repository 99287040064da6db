// RUN: kiln-opt %s --kiln-zero=stage=1 | FileCheck %s
// RUN: kiln-opt %s --kiln-zero=stage=2 | FileCheck %s --check-prefix=TWO

// Stage 1 at dp=2 with two weights, w (3x2: blocks of 3) and v (4: blocks
// of 2): one reduce-scatter for both gradients, of their blocks interleaved
// ([w block r, v block r] is rank r's part), and one all-gather for both
// new weights, whose [2, 5] view gives each weight back by columns.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[WR:.*]] = kiln.reshape %{{.*}} : tensor<6xf32> -> tensor<2x3xf32>
// CHECK: %[[VR:.*]] = kiln.reshape %{{.*}} : tensor<4xf32> -> tensor<2x2xf32>
// CHECK: %[[CAT:.*]] = kiln.concat %[[WR]], %[[VR]] {axis = 1 : i64}
// CHECK: %[[FLAT:.*]] = kiln.reshape %[[CAT]] : tensor<2x5xf32> -> tensor<10xf32>
// CHECK: %[[RS:.*]] = shard.reduce_scatter %[[FLAT]] on @kiln_mesh grid_axes = [0] reduction = average scatter_axis = 0 : tensor<10xf32> -> tensor<5xf32>
// CHECK-DAG: kiln.slice %[[RS]] {limits = array<i64: 3>, starts = array<i64: 0>
// CHECK-DAG: kiln.slice %[[RS]] {limits = array<i64: 5>, starts = array<i64: 3>
// CHECK-NOT: shard.reduce_scatter
// CHECK: %[[NEW:.*]] = kiln.concat %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<3xf32>, tensor<2xf32>) -> tensor<5xf32>
// CHECK: %[[AG:.*]] = shard.all_gather %[[NEW]] on @kiln_mesh grid_axes = [0] gather_axis = 0 : tensor<5xf32> -> tensor<10xf32>
// CHECK: %[[ROWS:.*]] = kiln.reshape %[[AG]] : tensor<10xf32> -> tensor<2x5xf32>
// CHECK: kiln.slice %[[ROWS]] {limits = array<i64: 2, 3>, starts = array<i64: 0, 0>
// CHECK: kiln.slice %[[ROWS]] {limits = array<i64: 2, 5>, starts = array<i64: 0, 3>
// CHECK-NOT: shard.all_gather
// CHECK: return
// Stage 2 keeps one reduce-scatter per gradient (each right after backward
// computes it) and still gathers the new weights in one.
// TWO-LABEL: func.func @train_step
// TWO-COUNT-2: shard.reduce_scatter
// TWO: shard.all_gather
// TWO-NOT: shard.all_gather
shard.grid @kiln_mesh(shape = 2) {kiln.axis_names = ["dp"]}
func.func @train_step(%w: tensor<3x2xf32> {kiln.param, kiln.role = "weight", onnx.name = "w"},
                      %v: tensor<4xf32> {kiln.param, kiln.role = "weight", onnx.name = "v"},
                      %lr: tensor<f32> {onnx.name = "kiln.lr"})
    -> (tensor<f32> {kiln.loss}, tensor<3x2xf32> {kiln.update = 0 : i64}, tensor<4xf32> {kiln.update = 1 : i64}) {
  %l = kiln.reduce_sum %v {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
  %gw = kiln.mul %w, %w : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  %gv = kiln.mul %v, %v : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %aw = shard.all_reduce %gw on @kiln_mesh grid_axes = [0] reduction = average : tensor<3x2xf32> -> tensor<3x2xf32>
  %av = shard.all_reduce %gv on @kiln_mesh grid_axes = [0] reduction = average : tensor<4xf32> -> tensor<4xf32>
  %nw = kiln.sgd_update %w, %aw, %lr : (tensor<3x2xf32>, tensor<3x2xf32>, tensor<f32>) -> tensor<3x2xf32>
  %nv = kiln.sgd_update %v, %av, %lr : (tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return %l, %nw, %nv : tensor<f32>, tensor<3x2xf32>, tensor<4xf32>
}
