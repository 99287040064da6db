// RUN: kiln-opt %s --split-input-file --kiln-shard=mesh=dp=2 --kiln-shard-propagation | FileCheck %s
// RUN: kiln-opt %s --split-input-file --kiln-shard=mesh=dp=2 --kiln-shard-propagation --kiln-partition | FileCheck %s --check-prefix=PART

// --kiln-shard seeds the data inputs' batch on dp; --kiln-shard-propagation
// writes every op's result shardings from its sharding rule;
// --kiln-partition gives each value its per-rank type and puts the
// collectives where the rules need them.

// The batch split on dp flows through the forward matmul; the weight's
// gradient, a contraction over the batch, comes out whole (its partial
// sums are what --kiln-partition all-reduces); the mean over everything is
// whole.
// CHECK: shard.grid @kiln_mesh(shape = 2) {kiln.axis_names = ["dp"]}
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tensor<8x4xf32> {kiln.sharding = {{\[\[}}"dp"], []], onnx.name = "x"}
// CHECK: kiln.matmul {{.*}}kiln.shardings = {{\[\[\[}}"dp"], []]]
// CHECK: kiln.reduce_mean {{.*}}kiln.shardings = {{\[\[}}]]
// CHECK: kiln.matmul {{.*}}kiln.shardings = {{\[\[\[}}], []]], transpose_lhs = true
// Per rank: half the batch; the loss averaged, the gradient's partial sums
// summed, both where they are computed.
// PART-LABEL: func.func @train_step
// PART-SAME: tensor<4x4xf32>
// PART: %[[Y:.*]] = kiln.matmul {{.*}} -> tensor<4x6xf32>
// PART: %[[S:.*]] = kiln.reduce_mean %[[Y]]
// PART: %[[AS:.*]] = shard.all_reduce %[[S]] on @kiln_mesh grid_axes = [0] reduction = average : tensor<f32>
// PART: %[[G:.*]] = kiln.matmul {{.*}}transpose_lhs = true{{.*}} -> tensor<4x6xf32>
// PART: %[[AG:.*]] = shard.all_reduce %[[G]] on @kiln_mesh grid_axes = [0] : tensor<4x6xf32>
// PART: return %[[AS]], %[[AG]]
func.func @train_step(%x: tensor<8x4xf32> {onnx.name = "x"},
                      %w: tensor<4x6xf32> {kiln.param, kiln.role = "weight", onnx.name = "w"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"}, tensor<4x6xf32> {kiln.grad_of = 1 : i64}) {
  %y = kiln.matmul %x, %w : (tensor<8x4xf32>, tensor<4x6xf32>) -> tensor<8x6xf32>
  %s = kiln.reduce_mean %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<8x6xf32>) -> tensor<f32>
  %g = kiln.matmul %x, %y {transpose_lhs = true} : (tensor<8x4xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
  return %s, %g : tensor<f32>, tensor<4x6xf32>
}

// -----

// Reshapes keep a split outer dimension of each group; a transpose moves it.
// CHECK-LABEL: func.func @train_step
// CHECK: kiln.reshape {{.*}}kiln.shardings = {{\[\[\[}}"dp"], []]]
// CHECK: kiln.transpose {{.*}}kiln.shardings = {{\[\[\[}}], ["dp"]]]
// The result is returned whole: gathered at the end only.
// PART-LABEL: func.func @train_step
// PART: kiln.reshape %{{.*}} : tensor<4x4x3xf32> -> tensor<16x3xf32>
// PART: kiln.transpose {{.*}} -> tensor<3x16xf32>
// PART: shard.all_gather %{{.*}} on @kiln_mesh grid_axes = [0] gather_axis = 1 : tensor<3x16xf32> -> tensor<3x32xf32>
func.func @train_step(%x: tensor<8x4x3xf32> {onnx.name = "x"}) -> tensor<3x32xf32> {
  %r = kiln.reshape %x : tensor<8x4x3xf32> -> tensor<32x3xf32>
  %t = kiln.transpose %r {perm = array<i64: 1, 0>} : (tensor<32x3xf32>) -> tensor<3x32xf32>
  return %t : tensor<3x32xf32>
}

// -----

// A sharding written on an op wins over its operands'.
// CHECK-LABEL: func.func @train_step
// CHECK: kiln.relu {{.*}}kiln.shardings = {{\[\[\[}}], ["dp"]]]
// CHECK: kiln.exp {{.*}}kiln.shardings = {{\[\[\[}}], ["dp"]]]
// Resharding rows to columns over one axis: one all-to-all (each rank sends
// the other its block of columns of its rows), not a gather of the whole.
// PART-LABEL: func.func @train_step
// PART: %[[B:.*]] = shard.all_to_all %arg0 on @kiln_mesh grid_axes = [0] split_axis = 1 concat_axis = 0 : tensor<4x4xf32> -> tensor<8x2xf32>
// PART: kiln.relu %[[B]] : tensor<8x2xf32>
func.func @train_step(%x: tensor<8x4xf32> {onnx.name = "x"}) -> tensor<8x4xf32> {
  %y = kiln.relu %x {kiln.shardings = [[[], ["dp"]]]} : tensor<8x4xf32>
  %z = kiln.exp %y : tensor<8x4xf32>
  return %z : tensor<8x4xf32>
}

// -----

// BatchNorm in training mode: the batch statistics are per shard (PyTorch
// DDP's semantics), so the running statistics come out whole but differ
// between ranks; --kiln-partition returns rank 0's.
// CHECK-LABEL: func.func @train_step
// CHECK: kiln.batch_norm_train {{.*}}kiln.shardings = {{\[\[\[}}"dp"], [], [], []], {{\[\[}}]], {{\[\[}}]]]
// PART-LABEL: func.func @train_step
// PART: %[[Y:.*]], %[[M:.*]], %{{.*}} = kiln.batch_norm_train {{.*}}(tensor<4x3x2x2xf32>
// PART: %[[YG:.*]] = shard.all_gather %[[Y]] on @kiln_mesh grid_axes = [0] gather_axis = 0
// PART: %[[M0:.*]] = shard.broadcast %[[M]] on @kiln_mesh grid_axes = [0] root = [0]
// PART: return %[[YG]], %[[M0]]
func.func @train_step(%x: tensor<8x3x2x2xf32> {onnx.name = "x"},
                      %s: tensor<3xf32> {kiln.param, kiln.role = "weight", onnx.name = "s"},
                      %b: tensor<3xf32> {kiln.param, kiln.role = "weight", onnx.name = "b"},
                      %m: tensor<3xf32> {kiln.param, kiln.role = "state", onnx.name = "m"},
                      %v: tensor<3xf32> {kiln.param, kiln.role = "state", onnx.name = "v"})
    -> (tensor<8x3x2x2xf32>, tensor<3xf32> {kiln.update = 3 : i64, onnx.name = "m"}) {
  %y, %rm, %rv = kiln.batch_norm_train %x, %s, %b, %m, %v {epsilon = 1.0e-5 : f32, momentum = 0.9 : f32} : (tensor<8x3x2x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<8x3x2x2xf32>, tensor<3xf32>, tensor<3xf32>)
  return %y, %rm : tensor<8x3x2x2xf32>, tensor<3xf32>
}

// -----

// Mixed precision: a bf16 gradient's partial sums go through its widening
// cast to f32 and are summed over the ranks in f32 (as PyTorch DDP sums
// autocast's f32 gradients); a narrowing cast would round each rank's part,
// so the reduction happens before it.
// PART-LABEL: func.func @train_step
// PART: %[[G:.*]] = kiln.matmul {{.*}}transpose_lhs = true{{.*}} -> tensor<4x6xbf16>
// PART: %[[GF:.*]] = kiln.cast %[[G]] : tensor<4x6xbf16> -> tensor<4x6xf32>
// PART: %[[AG:.*]] = shard.all_reduce %[[GF]] on @kiln_mesh grid_axes = [0] : tensor<4x6xf32>
// PART: %[[H:.*]] = kiln.matmul {{.*}}transpose_lhs = true{{.*}} -> tensor<4x6xf32>
// PART: %[[AH:.*]] = shard.all_reduce %[[H]] on @kiln_mesh grid_axes = [0] : tensor<4x6xf32>
// PART: %[[HB:.*]] = kiln.cast %[[AH]] : tensor<4x6xf32> -> tensor<4x6xbf16>
// PART: return %{{.*}}, %[[AG]], %[[HB]]
func.func @train_step(%x: tensor<8x4xbf16> {onnx.name = "x"},
                      %xf: tensor<8x4xf32> {onnx.name = "xf"},
                      %w: tensor<4x6xf32> {kiln.param, kiln.role = "weight", onnx.name = "w"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"}, tensor<4x6xf32> {kiln.grad_of = 2 : i64},
        tensor<4x6xbf16>) {
  %wl = kiln.cast %w : tensor<4x6xf32> -> tensor<4x6xbf16>
  %y = kiln.matmul %x, %wl : (tensor<8x4xbf16>, tensor<4x6xbf16>) -> tensor<8x6xbf16>
  %yf = kiln.cast %y : tensor<8x6xbf16> -> tensor<8x6xf32>
  %s = kiln.reduce_mean %yf {axes = array<i64: 0, 1>, keepdims = false} : (tensor<8x6xf32>) -> tensor<f32>
  %g = kiln.matmul %x, %y {transpose_lhs = true} : (tensor<8x4xbf16>, tensor<8x6xbf16>) -> tensor<4x6xbf16>
  %gf = kiln.cast %g : tensor<4x6xbf16> -> tensor<4x6xf32>
  %h = kiln.matmul %xf, %yf {transpose_lhs = true} : (tensor<8x4xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
  %hb = kiln.cast %h : tensor<4x6xf32> -> tensor<4x6xbf16>
  return %s, %gf, %hb : tensor<f32>, tensor<4x6xf32>, tensor<4x6xbf16>
}
