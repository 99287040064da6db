// RUN: kiln-opt %s --kiln-shard-propagation --kiln-partition | FileCheck %s

// A partial sum (the reduction over the split rows of x) is carried through
// the reshape only while the reshape uses it as it is held: here the add
// needs it split the other way, so it is combined first: the sum and the
// slice as one reduce-scatter over the summed axis. (Slicing each rank's
// partial and summing the slices would add different ranks' parts.)
// CHECK-LABEL: func.func @carry
// CHECK: %[[S:.*]] = kiln.reduce_sum %arg0
// CHECK-NEXT: %[[L:.*]] = shard.reduce_scatter %[[S]] on @kiln_mesh grid_axes = [0] scatter_axis = 1 : tensor<1x8xf32> -> tensor<1x4xf32>
// CHECK-NEXT: kiln.reshape %[[L]] : tensor<1x4xf32> -> tensor<4xf32>
// CHECK-NOT: shard.
shard.grid @kiln_mesh(shape = 2) {kiln.axis_names = ["tp"]}
func.func @carry(%x: tensor<4x8xf32> {onnx.name = "x", kiln.sharding = [["tp"], []]},
                 %w: tensor<8xf32> {kiln.param, onnx.name = "w", kiln.sharding = [["tp"]]})
    -> (tensor<8xf32> {onnx.name = "y", kiln.sharding = [["tp"]]}) {
  %s = kiln.reduce_sum %x {axes = array<i64: 0>} : (tensor<4x8xf32>) -> tensor<1x8xf32>
  %r = kiln.reshape %s : tensor<1x8xf32> -> tensor<8xf32>
  %y = kiln.add %r, %w : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}
