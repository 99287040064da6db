// RUN: kiln-opt %s -split-input-file --kiln-lower-to-runtime -verify-diagnostics | FileCheck %s

// shard.all_reduce becomes a launch of the runtime's all_reduce kernel that
// names its reduction and its mesh axis by name (never in place).
// CHECK: shard.grid @kiln_mesh(shape = 2) {kiln.axis_names = ["dp"]}
// CHECK-LABEL: func.func @grads
// CHECK: %[[G:.*]] = krt.alloc : memref<4x2xf32>
// CHECK: krt.launch "mul" ins(%{{.*}}, %{{.*}} : memref<4x2xf32>, memref<4x2xf32>) outs(%[[G]] : memref<4x2xf32>)
// CHECK: %[[A:.*]] = krt.alloc : memref<4x2xf32>
// CHECK: krt.launch "all_reduce" ins(%[[G]] : memref<4x2xf32>) outs(%[[A]] : memref<4x2xf32>) {params = {axis = "dp", compression = "none", reduction = "average"}}
// CHECK: %[[M:.*]] = krt.alloc : memref<4x2xf32>
// CHECK: krt.launch "all_reduce" ins(%[[G]] : memref<4x2xf32>) outs(%[[M]] : memref<4x2xf32>) {params = {axis = "dp", compression = "none", reduction = "max"}}
// CHECK: %[[B:.*]] = krt.alloc : memref<4x2xf32>
// CHECK: krt.launch "mesh_broadcast" ins(%[[G]] : memref<4x2xf32>) outs(%[[B]] : memref<4x2xf32>) {params = {axis = "dp", root = 1 : i64}}
// CHECK: return %[[A]], %[[M]], %[[B]]
shard.grid @kiln_mesh(shape = 2) {kiln.axis_names = ["dp"]}
func.func @grads(%w: tensor<4x2xf32> {kiln.param, onnx.name = "w"})
    -> (tensor<4x2xf32> {onnx.name = "g"}, tensor<4x2xf32> {onnx.name = "m"}, tensor<4x2xf32> {onnx.name = "b"}) {
  %g = kiln.mul %w, %w : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
  %a = shard.all_reduce %g on @kiln_mesh grid_axes = [0] reduction = average : tensor<4x2xf32> -> tensor<4x2xf32>
  %m = shard.all_reduce %g on @kiln_mesh grid_axes = [0] reduction = max : tensor<4x2xf32> -> tensor<4x2xf32>
  %b = shard.broadcast %g on @kiln_mesh grid_axes = [0] root = [1] : (tensor<4x2xf32>) -> tensor<4x2xf32>
  return %a, %m, %b : tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>
}

// -----

shard.grid @mesh(shape = 2) {kiln.axis_names = ["dp"]}
func.func @bad_root(%w: tensor<4xf32> {kiln.param, onnx.name = "w"}) -> (tensor<4xf32> {onnx.name = "g"}) {
  // The shard verifier already refuses it.
  // expected-error @+1 {{Out of bounds coordinate 0 for in-group device "root". Got 2, but expected value in the range [0, 1].}}
  %b = shard.broadcast %w on @mesh grid_axes = [0] root = [2] : (tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}

// -----

// The runtime finds a collective's group by the axis name.
// expected-error @+1 {{has no kiln.axis_names: the runtime finds a collective's group by its axis name}}
shard.grid @mesh(shape = 2)
func.func @unnamed(%w: tensor<4xf32> {kiln.param, onnx.name = "w"}) -> (tensor<4xf32> {onnx.name = "g"}) {
  %a = shard.all_reduce %w on @mesh grid_axes = [0] reduction = sum : tensor<4xf32> -> tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

// Over several grid axes: the group of all of them, by their names joined
// with '+' (the runtime's communicator of both).
// CHECK-LABEL: func.func @two_axes
// CHECK: krt.launch "all_reduce" ins(%{{.*}} : memref<4xf32>) outs(%{{.*}} : memref<4xf32>) {params = {axis = "dp+tp", compression = "none", reduction = "sum"}}
shard.grid @mesh(shape = 2x2) {kiln.axis_names = ["dp", "tp"]}
func.func @two_axes(%w: tensor<4xf32> {kiln.param, onnx.name = "w"}) -> (tensor<4xf32> {onnx.name = "g"}) {
  %a = shard.all_reduce %w on @mesh grid_axes = [0, 1] reduction = sum : tensor<4xf32> -> tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

shard.grid @mesh(shape = 2) {kiln.axis_names = ["dp"]}
func.func @product(%w: tensor<4xf32> {kiln.param, onnx.name = "w"}) -> (tensor<4xf32> {onnx.name = "g"}) {
  // expected-error @+1 {{cannot be lowered to the runtime: reduction product has no kernel (sum, max, min, average)}}
  %a = shard.all_reduce %w on @mesh grid_axes = [0] reduction = product : tensor<4xf32> -> tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

shard.grid @mesh(shape = 2) {kiln.axis_names = ["dp"]}
func.func @int_average(%w: tensor<4xi64> {kiln.param, onnx.name = "w"}) -> (tensor<4xi64> {onnx.name = "g"}) {
  // expected-error @+1 {{cannot be lowered to the runtime: an average needs floating-point values}}
  %a = shard.all_reduce %w on @mesh grid_axes = [0] reduction = average : tensor<4xi64> -> tensor<4xi64>
  return %a : tensor<4xi64>
}

// -----

// A compressed gradient all-reduce passes its wire format to the kernel.
// CHECK-LABEL: func.func @wire
// CHECK: krt.launch "all_reduce" ins(%{{.*}} : memref<4xf32>) outs(%{{.*}} : memref<4xf32>) {params = {axis = "dp", compression = "int8", reduction = "average"}}
shard.grid @mesh(shape = 2) {kiln.axis_names = ["dp"]}
func.func @wire(%w: tensor<4xf32> {kiln.param, onnx.name = "w"}) -> (tensor<4xf32> {onnx.name = "g"}) {
  %a = shard.all_reduce %w on @mesh grid_axes = [0] reduction = average {kiln.compression = "int8"} : tensor<4xf32> -> tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

// A bucket: the start packs its inputs into one buffer and starts the
// reduction (params as all_reduce's); the wait unpacks it into a buffer per
// result, averaging over the axis its start named.
// CHECK-LABEL: func.func @bucket
// CHECK: %[[B:.*]] = krt.alloc : memref<16xf32>
// CHECK: krt.launch "all_reduce_start" ins(%{{.*}}, %{{.*}} : memref<4x2xf32>, memref<8xf32>) outs(%[[B]] : memref<16xf32>) {params = {axis = "dp", compression = "none", reduction = "average"}}
// CHECK: krt.launch "all_reduce_wait" ins(%[[B]] : memref<16xf32>) outs(%{{.*}}, %{{.*}} : memref<4x2xf32>, memref<8xf32>) {params = {axis = "dp", reduction = "average"}}
shard.grid @mesh(shape = 2) {kiln.axis_names = ["dp"]}
func.func @bucket(%a: tensor<4x2xf32> {kiln.param, onnx.name = "a"}, %b: tensor<8xf32> {kiln.param, onnx.name = "b"})
    -> (tensor<4x2xf32> {onnx.name = "ra"}, tensor<8xf32> {onnx.name = "rb"}) {
  %t = dist.all_reduce_start %a, %b on @mesh grid_axes = [0] reduction = average : tensor<4x2xf32>, tensor<8xf32> -> !dist.bucket<16 x f32>
  %r:2 = dist.all_reduce_wait %t : !dist.bucket<16 x f32> -> tensor<4x2xf32>, tensor<8xf32>
  return %r#0, %r#1 : tensor<4x2xf32>, tensor<8xf32>
}

// -----

shard.grid @mesh(shape = 2x2) {kiln.axis_names = ["dp", "tp"]}
func.func @gather_axes(%a: tensor<4xf32> {kiln.param, onnx.name = "a"}) -> (tensor<16xf32> {onnx.name = "r"}) {
  // expected-error @+1 {{cannot be lowered to the runtime: only an all-reduce works over several grid axes}}
  %g = shard.all_gather %a on @mesh grid_axes = [0, 1] gather_axis = 0 : tensor<4xf32> -> tensor<16xf32>
  return %g : tensor<16xf32>
}

// -----

// ZeRO's collectives: blocks along axis 0.
// CHECK-LABEL: func.func @zero
// CHECK: krt.launch "reduce_scatter" ins(%{{.*}} : memref<8xf32>) outs(%{{.*}} : memref<4xf32>) {params = {axis = "dp", dim = 0 : i64, reduction = "average"}}
// CHECK: krt.launch "all_slice" ins(%{{.*}} : memref<8xf32>) outs(%{{.*}} : memref<4xf32>) {params = {axis = "dp", dim = 0 : i64}}
// CHECK: krt.launch "all_gather" ins(%{{.*}} : memref<4xf32>) outs(%{{.*}} : memref<8xf32>) {params = {axis = "dp", dim = 0 : i64}}
shard.grid @mesh(shape = 2) {kiln.axis_names = ["dp"]}
func.func @zero(%w: tensor<8xf32> {kiln.param, onnx.name = "w"}) -> (tensor<8xf32> {onnx.name = "r"}, tensor<4xf32> {onnx.name = "s"}) {
  %g = kiln.mul %w, %w : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %rs = shard.reduce_scatter %g on @mesh grid_axes = [0] reduction = average scatter_axis = 0 : tensor<8xf32> -> tensor<4xf32>
  %sl = shard.all_slice %w on @mesh grid_axes = [0] slice_axis = 0 : tensor<8xf32> -> tensor<4xf32>
  %u = kiln.add %rs, %sl : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %ag = shard.all_gather %u on @mesh grid_axes = [0] gather_axis = 0 : tensor<4xf32> -> tensor<8xf32>
  return %ag, %rs : tensor<8xf32>, tensor<4xf32>
}

// -----

// Tensor parallelism's collectives split and join along any dimension.
// CHECK-LABEL: func.func @inner_dims
// CHECK: krt.launch "all_slice" ins(%{{.*}} : memref<2x8xf32>) outs(%{{.*}} : memref<2x4xf32>) {params = {axis = "tp", dim = 1 : i64}}
// CHECK: krt.launch "all_gather" ins(%{{.*}} : memref<2x4xf32>) outs(%{{.*}} : memref<2x8xf32>) {params = {axis = "tp", dim = 1 : i64}}
// CHECK: krt.launch "reduce_scatter" ins(%{{.*}} : memref<2x8xf32>) outs(%{{.*}} : memref<2x4xf32>) {params = {axis = "tp", dim = 1 : i64, reduction = "sum"}}
shard.grid @mesh(shape = 2) {kiln.axis_names = ["tp"]}
func.func @inner_dims(%w: tensor<2x8xf32> {kiln.param, onnx.name = "w"}) -> (tensor<2x8xf32> {onnx.name = "r"}, tensor<2x4xf32> {onnx.name = "s"}) {
  %sl = shard.all_slice %w on @mesh grid_axes = [0] slice_axis = 1 : tensor<2x8xf32> -> tensor<2x4xf32>
  %ag = shard.all_gather %sl on @mesh grid_axes = [0] gather_axis = 1 : tensor<2x4xf32> -> tensor<2x8xf32>
  %rs = shard.reduce_scatter %ag on @mesh grid_axes = [0] reduction = sum scatter_axis = 1 : tensor<2x8xf32> -> tensor<2x4xf32>
  return %ag, %rs : tensor<2x8xf32>, tensor<2x4xf32>
}
