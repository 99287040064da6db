// RUN: kiln-opt %s -split-input-file --kiln-zero=stage=1 -verify-diagnostics | FileCheck %s
// RUN: kiln-opt %s -split-input-file --kiln-zero=stage=3 -verify-diagnostics | FileCheck %s --check-prefix=THREE
// RUN: kiln-opt %s -split-input-file --kiln-zero=stage=2 -verify-diagnostics | FileCheck %s --check-prefix=TWO

// ZeRO-1 at dp=4 on a 3x2 weight (n = 6, padded to N = 8, k = 2 per rank).
// The gradient's all-reduce becomes a reduce-scatter of the flattened,
// padded gradient; clipping's scalar factor and the update run on this
// rank's 2 elements; the state arguments become tensor<2> with the whole
// shape recorded; the new weight is the all-gather, cut and reshaped. The
// norm's sum of squares is the sum over ranks of the shards' sums.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[W:[^:]*]]: tensor<3x2xf32> {kiln.param, kiln.role = "weight", onnx.name = "w"}
// CHECK-SAME: %[[M:[^:]*]]: tensor<2xf32> {kiln.init = "zeros", kiln.param, kiln.role = "optimizer", kiln.sharded_shape = array<i64: 3, 2>, onnx.name = "w/momentum_buffer"}
// CHECK-SAME: -> (tensor<f32> {kiln.loss}, tensor<3x2xf32> {kiln.update = 0 : i64}, tensor<2xf32> {kiln.update = 1 : i64})
// CHECK: %[[GF:.*]] = kiln.reshape %[[G:.*]] : tensor<3x2xf32> -> tensor<6xf32>
// CHECK: %[[GP:.*]] = kiln.pad %[[GF]] {high = array<i64: 2>, low = array<i64: 0>} : (tensor<6xf32>) -> tensor<8xf32>
// CHECK: %[[GS:.*]] = shard.reduce_scatter %[[GP]] on @kiln_mesh grid_axes = [0] reduction = average scatter_axis = 0 : tensor<8xf32> -> tensor<2xf32>
// CHECK: %[[SQ:.*]] = kiln.reduce_sum_square %[[GS]] {axes = array<i64: 0>, keepdims = false} : (tensor<2xf32>) -> tensor<f32>
// CHECK: %[[NORM2:.*]] = shard.all_reduce %[[SQ]] on @kiln_mesh grid_axes = [0] : tensor<f32> -> tensor<f32>
// CHECK: %[[COEF:.*]] = kiln.sqrt %[[NORM2]]
// CHECK: %[[GC:.*]] = kiln.mul %[[GS]], %[[COEF]] : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
// CHECK: %[[WF:.*]] = kiln.reshape %[[W]] : tensor<3x2xf32> -> tensor<6xf32>
// CHECK: %[[WP:.*]] = kiln.pad %[[WF]]
// CHECK: %[[WS:.*]] = shard.all_slice %[[WP]] on @kiln_mesh grid_axes = [0] slice_axis = 0 : tensor<8xf32> -> tensor<2xf32>
// CHECK: %[[NP:[^,]*]], %[[NB:[^ ]*]] = kiln.momentum_update %[[WS]], %[[GC]], %[[M]], %{{.*}} {{.*}} -> (tensor<2xf32>, tensor<2xf32>)
// CHECK: %[[ALL:.*]] = shard.all_gather %[[NP]] on @kiln_mesh grid_axes = [0] gather_axis = 0 : tensor<2xf32> -> tensor<8xf32>
// CHECK: %[[CUT:.*]] = kiln.slice %[[ALL]] {limits = array<i64: 6>, starts = array<i64: 0>, strides = array<i64: 1>} : (tensor<8xf32>) -> tensor<6xf32>
// CHECK: %[[BACK:.*]] = kiln.reshape %[[CUT]] : tensor<6xf32> -> tensor<3x2xf32>
// CHECK: return %{{.*}}, %[[BACK]], %[[NB]]
// Stage 3: the weight itself is this rank's 2 elements; each reader (the
// loss's sum, the gradient's product) gathers its own whole copy right
// before it (kiln.zero_gather keeps them apart), and the update returns the
// block.
// THREE-LABEL: func.func @train_step
// THREE-SAME: %[[W:[^:]*]]: tensor<2xf32> {kiln.param, kiln.role = "weight", kiln.sharded_shape = array<i64: 3, 2>, onnx.name = "w"}
// THREE-SAME: -> (tensor<f32> {kiln.loss}, tensor<2xf32> {kiln.update = 0 : i64}, tensor<2xf32> {kiln.update = 1 : i64})
// THREE: %[[A1:.*]] = shard.all_gather %[[W]] on @kiln_mesh grid_axes = [0] gather_axis = 0 {kiln.zero_gather = {{[0-9]+}} : i64} : tensor<2xf32> -> tensor<8xf32>
// THREE: %[[C1:.*]] = kiln.slice %[[A1]]
// THREE: %[[R1:.*]] = kiln.reshape %[[C1]] : tensor<6xf32> -> tensor<3x2xf32>
// THREE-NEXT: kiln.reduce_sum %[[R1]]
// THREE: %[[A2:.*]] = shard.all_gather %[[W]] on @kiln_mesh grid_axes = [0] gather_axis = 0 {kiln.zero_gather = {{[0-9]+}} : i64}
// THREE: %[[R2:.*]] = kiln.reshape
// THREE-NEXT: kiln.mul %[[R2]], %[[R2]]
// THREE: shard.reduce_scatter
// THREE: %[[NP:[^,]*]], %[[NB:[^ ]*]] = kiln.momentum_update %[[W]], {{.*}} -> (tensor<2xf32>, tensor<2xf32>)
// THREE-NOT: shard.all_gather
// THREE: return %{{.*}}, %[[NP]], %[[NB]]
// Stage 2: the reduce-scatter right after the gradient is computed, before
// the loss's all-reduce that stage 1 leaves it behind.
// TWO-LABEL: func.func @train_step
// TWO: %[[G:.*]] = kiln.mul %arg0, %arg0
// TWO-NEXT: kiln.reshape %[[G]]
// TWO-NEXT: kiln.pad
// TWO-NEXT: shard.reduce_scatter
// TWO-NEXT: shard.all_reduce
shard.grid @kiln_mesh(shape = 4) {kiln.axis_names = ["dp"]}
func.func @train_step(%w: tensor<3x2xf32> {kiln.param, kiln.role = "weight", onnx.name = "w"},
                      %m: tensor<3x2xf32> {kiln.param, kiln.role = "optimizer", kiln.init = "zeros", onnx.name = "w/momentum_buffer"},
                      %lr: tensor<f32> {onnx.name = "kiln.lr"})
    -> (tensor<f32> {kiln.loss}, tensor<3x2xf32> {kiln.update = 0 : i64}, tensor<3x2xf32> {kiln.update = 1 : i64}) {
  %l = kiln.reduce_sum %w {axes = array<i64: 0, 1>, keepdims = false} : (tensor<3x2xf32>) -> tensor<f32>
  %g = kiln.mul %w, %w : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  %al = shard.all_reduce %l on @kiln_mesh grid_axes = [0] reduction = average : tensor<f32> -> tensor<f32>
  %ag = shard.all_reduce %g on @kiln_mesh grid_axes = [0] reduction = average : tensor<3x2xf32> -> tensor<3x2xf32>
  %sq = kiln.reduce_sum_square %ag {axes = array<i64: 0, 1>, keepdims = false} : (tensor<3x2xf32>) -> tensor<f32>
  %c = kiln.sqrt %sq : tensor<f32>
  %gc = kiln.mul %ag, %c : (tensor<3x2xf32>, tensor<f32>) -> tensor<3x2xf32>
  %nw, %nm = kiln.momentum_update %w, %gc, %m, %lr {momentum = 0.9 : f32} : (tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>, tensor<f32>) -> (tensor<3x2xf32>, tensor<3x2xf32>)
  return %al, %nw, %nm : tensor<f32>, tensor<3x2xf32>, tensor<3x2xf32>
}

// -----

// A gradient read by something ZeRO cannot shard.
shard.grid @kiln_mesh(shape = 2) {kiln.axis_names = ["dp"]}
func.func @train_step(%w: tensor<4xf32> {kiln.param, kiln.role = "weight", onnx.name = "w"},
                      %lr: tensor<f32> {onnx.name = "kiln.lr"})
    -> (tensor<f32> {kiln.loss}, tensor<4xf32> {kiln.update = 0 : i64}, tensor<4xf32>) {
  %l = kiln.reduce_sum %w {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
  %ag = shard.all_reduce %w on @kiln_mesh grid_axes = [0] reduction = average : tensor<4xf32> -> tensor<4xf32>
  // expected-error @+1 {{--kiln-zero: reads a full reduced gradient, which ZeRO shards}}
  %e = kiln.exp %ag : tensor<4xf32>
  %nw = kiln.sgd_update %w, %ag, %lr : (tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return %l, %nw, %e : tensor<f32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Stage 3 with a weight of fewer elements than ranks: it stays whole
// (its blocks would be mostly padding); its state is still split.
// THREE-LABEL: func.func @train_step
// THREE-SAME: tensor<2xf32> {kiln.param, kiln.role = "weight", onnx.name = "b"}
// THREE-SAME: tensor<1xf32> {kiln.init = "zeros", kiln.param, kiln.role = "optimizer", kiln.sharded_shape = array<i64: 2>
// THREE-NOT: kiln.zero_gather
// THREE: return
shard.grid @kiln_mesh(shape = 4) {kiln.axis_names = ["dp"]}
func.func @train_step(%b: tensor<2xf32> {kiln.param, kiln.role = "weight", onnx.name = "b"},
                      %m: tensor<2xf32> {kiln.param, kiln.role = "optimizer", kiln.init = "zeros", onnx.name = "b/momentum_buffer"},
                      %lr: tensor<f32> {onnx.name = "kiln.lr"})
    -> (tensor<f32> {kiln.loss}, tensor<2xf32> {kiln.update = 0 : i64}, tensor<2xf32> {kiln.update = 1 : i64}) {
  %l = kiln.reduce_sum %b {axes = array<i64: 0>, keepdims = false} : (tensor<2xf32>) -> tensor<f32>
  %g = shard.all_reduce %b on @kiln_mesh grid_axes = [0] reduction = sum : tensor<2xf32> -> tensor<2xf32>
  %nb, %nm = kiln.momentum_update %b, %g, %m, %lr {momentum = 0.9 : f32} : (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<f32>) -> (tensor<2xf32>, tensor<2xf32>)
  return %l, %nb, %nm : tensor<f32>, tensor<2xf32>, tensor<2xf32>
}
