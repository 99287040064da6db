// RUN: kiln-opt %s --kiln-shard="mesh=tp=2 shard=w=-,tp" --kiln-shard-propagation --kiln-partition | FileCheck %s --check-prefix=COL
// RUN: kiln-opt %s --kiln-shard="mesh=tp=2 shard=w=tp,-" --kiln-shard-propagation --kiln-partition | FileCheck %s --check-prefix=ROW
// RUN: kiln-opt %s --kiln-shard="mesh=dp=2,tp=2 shard=w=-,tp" --kiln-shard-propagation --kiln-partition | FileCheck %s --check-prefix=TWO

// One function, three meshes: the same sharding rules give tensor
// parallelism, and data with tensor parallelism, from a user annotation of
// the weight (REGEX=SPEC on its onnx.name).

// Column-parallel (w split on n): each rank computes its columns, with no
// communication until the mean; the gradient stays split as w is (a
// parameter's gradient leaves as the parameter is held).
// COL: shard.grid @kiln_mesh(shape = 2) {kiln.axis_names = ["tp"]}
// COL-LABEL: func.func @train_step
// COL-SAME: %[[X:[^:]*]]: tensor<8x4xf32> {onnx.name = "x"}
// COL-SAME: %[[W:[^:]*]]: tensor<4x3xf32> {kiln.param, kiln.role = "weight", kiln.sharding = {{\[\[}}], ["tp"]], onnx.name = "w"}
// COL-SAME: tensor<4x3xf32> {kiln.grad_of = 1 : i64, kiln.sharding = {{\[\[}}], ["tp"]]}
// COL-NOT: shard.all_gather
// COL: %[[Y:.*]] = kiln.matmul %[[X]], %[[W]] : (tensor<8x4xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>
// COL: %[[S:.*]] = kiln.reduce_mean %[[Y]]
// COL: %[[AS:.*]] = shard.all_reduce %[[S]] on @kiln_mesh grid_axes = [0] reduction = average
// COL: %[[G:.*]] = kiln.matmul %[[X]], %[[Y]] {transpose_lhs = true} : (tensor<8x4xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
// COL: return %[[AS]], %[[G]]

// Row-parallel (w split on k): x is sliced locally to match, and the
// product's partial sums are all-reduced. The gradient, asked for split as
// w is, is computed split (backward propagation from the result): this
// rank's rows of x^T y, not the whole product sliced afterwards.
// ROW-LABEL: func.func @train_step
// ROW: %[[XS:.*]] = shard.all_slice %arg0 on @kiln_mesh grid_axes = [0] slice_axis = 1 : tensor<8x4xf32> -> tensor<8x2xf32>
// ROW: %[[P:.*]] = kiln.matmul %[[XS]], %arg1 : (tensor<8x2xf32>, tensor<2x6xf32>) -> tensor<8x6xf32>
// ROW: %[[Y:.*]] = shard.all_reduce %[[P]] on @kiln_mesh grid_axes = [0] : tensor<8x6xf32>
// ROW: kiln.reduce_mean %[[Y]]
// ROW: %[[XS2:.*]] = shard.all_slice %arg0 on @kiln_mesh grid_axes = [0] slice_axis = 1
// ROW: %[[G:.*]] = kiln.matmul %[[XS2]], %[[Y]] {transpose_lhs = true} : (tensor<8x2xf32>, tensor<8x6xf32>) -> tensor<2x6xf32>
// ROW-NOT: shard.
// ROW: return %{{.*}}, %[[G]]

// dp x tp: the batch on dp, the columns on tp. The mean averages over
// both axes; the gradient sums the batch over dp only.
// TWO: shard.grid @kiln_mesh(shape = 2x2) {kiln.axis_names = ["dp", "tp"]}
// TWO-LABEL: func.func @train_step
// TWO-SAME: tensor<4x4xf32> {kiln.sharding = {{\[\[}}"dp"], []], onnx.name = "x"}
// TWO: kiln.matmul %arg0, %arg1 : (tensor<4x4xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
// TWO: shard.all_reduce %{{.*}} on @kiln_mesh grid_axes = [0, 1] reduction = average : tensor<f32>
// TWO: %[[G:.*]] = kiln.matmul {{.*}}transpose_lhs = true{{.*}} -> tensor<4x3xf32>
// TWO: shard.all_reduce %[[G]] on @kiln_mesh grid_axes = [0] : tensor<4x3xf32>
func.func @train_step(%x: tensor<8x4xf32> {onnx.name = "x"},
                      %w: tensor<4x6xf32> {kiln.param, kiln.role = "weight", onnx.name = "w"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"}, tensor<4x6xf32> {kiln.grad_of = 1 : i64}) {
  %y = kiln.matmul %x, %w : (tensor<8x4xf32>, tensor<4x6xf32>) -> tensor<8x6xf32>
  %s = kiln.reduce_mean %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<8x6xf32>) -> tensor<f32>
  %g = kiln.matmul %x, %y {transpose_lhs = true} : (tensor<8x4xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
  return %s, %g : tensor<f32>, tensor<4x6xf32>
}
