// RUN: kiln-opt %s --split-input-file --kiln-shard=mesh=tp=2 --kiln-shard-propagation | FileCheck %s
// RUN: kiln-opt %s --split-input-file --kiln-shard=mesh=tp=2 --kiln-shard-propagation --kiln-partition | FileCheck %s --check-prefix=PART

// Propagation through each op family from one split input (kiln.sharding
// given by hand, as --shard would): what the rules keep split and what
// they must hold whole, and the collective the partition then inserts.

// Softmax: the batch split flows through; split on the softmax axis, the
// input is gathered first (the row's maximum and sum need every class).
// CHECK-LABEL: func.func @softmax
// CHECK: kiln.softmax {{.*}}kiln.shardings = {{\[\[\[}}"tp"], []]]
// CHECK: kiln.softmax {{.*}}kiln.shardings = {{\[\[\[}}], []]]
// PART-LABEL: func.func @softmax
// PART: kiln.softmax %arg0 {{.*}}: (tensor<2x8xf32>) -> tensor<2x8xf32>
// PART: %[[G:.*]] = shard.all_gather %arg1 on @kiln_mesh grid_axes = [0] gather_axis = 1 : tensor<4x4xf32> -> tensor<4x8xf32>
// PART: kiln.softmax %[[G]]
func.func @softmax(%x: tensor<4x8xf32> {onnx.name = "x", kiln.sharding = [["tp"], []]},
                   %y: tensor<4x8xf32> {onnx.name = "y", kiln.sharding = [[], ["tp"]]})
    -> (tensor<4x8xf32> {onnx.name = "a"}, tensor<4x8xf32> {onnx.name = "b"}) {
  %a = kiln.softmax %x {axis = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %b = kiln.softmax %y {axis = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %a, %b : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// LayerNorm over the last dim: rows split (the sequence, as in sequence
// parallelism) stay split with their mean and deviation.
// CHECK-LABEL: func.func @layer_norm
// CHECK: kiln.layer_norm {{.*}}kiln.shardings = {{\[\[\[}}], ["tp"], []], {{\[\[}}], ["tp"], []], {{\[\[}}], ["tp"], []]]
// PART-LABEL: func.func @layer_norm
// PART: kiln.layer_norm %arg0, %arg1, %arg2 {{.*}}: (tensor<2x4x16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x4x16xf32>, tensor<2x4x1xf32>, tensor<2x4x1xf32>)
// PART-NOT: shard.{{all|reduce}}
// PART: return
func.func @layer_norm(%x: tensor<2x8x16xf32> {onnx.name = "x", kiln.sharding = [[], ["tp"], []]},
                      %g: tensor<16xf32> {kiln.param, onnx.name = "g"},
                      %b: tensor<16xf32> {kiln.param, onnx.name = "b"})
    -> (tensor<2x8x16xf32> {onnx.name = "y", kiln.sharding = [[], ["tp"], []]}) {
  %y:3 = kiln.layer_norm %x, %g, %b {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x1xf32>, tensor<2x8x1xf32>)
  return %y#0 : tensor<2x8x16xf32>
}

// -----

// Gather (an embedding): the table split on its features gives the
// looked-up rows split on features; the indices are whole.
// CHECK-LABEL: func.func @gather
// CHECK: kiln.gather {{.*}}kiln.shardings = {{\[\[\[}}], [], ["tp"]]]
// PART-LABEL: func.func @gather
// PART: kiln.gather %arg0, %arg1 {axis = 0 : i64} : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
func.func @gather(%t: tensor<10x8xf32> {kiln.param, onnx.name = "emb", kiln.sharding = [[], ["tp"]]},
                  %i: tensor<2x3xi64> {onnx.name = "ids"})
    -> (tensor<2x3x8xf32> {onnx.name = "e", kiln.sharding = [[], [], ["tp"]]}) {
  %e = kiln.gather %t, %i {axis = 0 : i64} : (tensor<10x8xf32>, tensor<2x3xi64>) -> tensor<2x3x8xf32>
  return %e : tensor<2x3x8xf32>
}

// -----

// Reductions: over the split dim, a partial sum (all-reduced); over the
// other, the split stays.
// CHECK-LABEL: func.func @reduce
// CHECK: kiln.reduce_sum {{.*}}kiln.shardings = {{\[\[\[}}]]]
// CHECK: kiln.reduce_sum {{.*}}kiln.shardings = {{\[\[\[}}"tp"]]]
// PART-LABEL: func.func @reduce
// PART: %[[S:.*]] = kiln.reduce_sum %arg0 {{.*}}: (tensor<2x6xf32>) -> tensor<6xf32>
// PART: shard.all_reduce %[[S]] on @kiln_mesh grid_axes = [0] : tensor<6xf32>
// PART: kiln.reduce_sum %arg0 {{.*}}: (tensor<2x6xf32>) -> tensor<2xf32>
func.func @reduce(%x: tensor<4x6xf32> {onnx.name = "x", kiln.sharding = [["tp"], []]})
    -> (tensor<6xf32> {onnx.name = "cols"}, tensor<4xf32> {onnx.name = "rows", kiln.sharding = [["tp"]]}) {
  %c = kiln.reduce_sum %x {axes = array<i64: 0>, keepdims = false} : (tensor<4x6xf32>) -> tensor<6xf32>
  %r = kiln.reduce_sum %x {axes = array<i64: 1>, keepdims = false} : (tensor<4x6xf32>) -> tensor<4xf32>
  return %c, %r : tensor<6xf32>, tensor<4xf32>
}

// -----

// A reshape that splits a sharded dimension: [4, 12] with the 12 on tp
// becomes [4, 2, 6] with the outer 2 on tp (each rank's 6 contiguous
// columns are one [1, 6] block); then a transpose moves the split.
// CHECK-LABEL: func.func @reshape_split
// CHECK: kiln.reshape {{.*}}kiln.shardings = {{\[\[\[}}], ["tp"], []]]
// CHECK: kiln.transpose {{.*}}kiln.shardings = {{\[\[\[}}"tp"], [], []]]
// PART-LABEL: func.func @reshape_split
// PART: kiln.reshape %arg0 {{.*}}: tensor<4x6xf32> -> tensor<4x1x6xf32>
// PART: kiln.transpose {{.*}}: (tensor<4x1x6xf32>) -> tensor<1x4x6xf32>
// PART-NOT: shard.{{all|reduce}}
// PART: return
func.func @reshape_split(%x: tensor<4x12xf32> {onnx.name = "x", kiln.sharding = [[], ["tp"]]})
    -> (tensor<2x4x6xf32> {onnx.name = "y", kiln.sharding = [["tp"], [], []]}) {
  %r = kiln.reshape %x : tensor<4x12xf32> -> tensor<4x2x6xf32>
  %t = kiln.transpose %r {perm = array<i64: 1, 0, 2>} : (tensor<4x2x6xf32>) -> tensor<2x4x6xf32>
  return %t : tensor<2x4x6xf32>
}

// -----

// The MoE ops: topk and cumsum keep the batch split and need their axis
// whole; split on it, topk's input is gathered.
// CHECK-LABEL: func.func @moe_ops
// CHECK: kiln.topk {{.*}}kiln.shardings = {{\[\[\[}}"tp"], []], {{\[\[}}"tp"], []]]
// CHECK: kiln.cumsum {{.*}}kiln.shardings = {{\[\[\[}}"tp"], []]]
// CHECK: kiln.topk {{.*}}kiln.shardings = {{\[\[\[}}], []], {{\[\[}}], []]]
// PART-LABEL: func.func @moe_ops
// PART: kiln.topk %arg0 {{.*}}: (tensor<2x8xf32>) -> (tensor<2x2xf32>, tensor<2x2xi64>)
// PART: kiln.cumsum %arg0 {{.*}}: (tensor<2x8xf32>) -> tensor<2x8xf32>
// PART: %[[G:.*]] = shard.all_gather %arg1 on @kiln_mesh grid_axes = [0] gather_axis = 1
// PART: kiln.topk %[[G]]
func.func @moe_ops(%x: tensor<4x8xf32> {onnx.name = "x", kiln.sharding = [["tp"], []]},
                   %y: tensor<4x8xf32> {onnx.name = "y", kiln.sharding = [[], ["tp"]]})
    -> (tensor<4x2xf32> {onnx.name = "v", kiln.sharding = [["tp"], []]}, tensor<4x8xf32> {onnx.name = "c", kiln.sharding = [["tp"], []]}, tensor<4x2xi64> {onnx.name = "j"}) {
  %v, %i = kiln.topk %x {axis = 1 : i64, k = 2 : i64} : (tensor<4x8xf32>) -> (tensor<4x2xf32>, tensor<4x2xi64>)
  %c = kiln.cumsum %x {axis = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %w, %j = kiln.topk %y {axis = 1 : i64, k = 2 : i64} : (tensor<4x8xf32>) -> (tensor<4x2xf32>, tensor<4x2xi64>)
  return %v, %c, %j : tensor<4x2xf32>, tensor<4x8xf32>, tensor<4x2xi64>
}
