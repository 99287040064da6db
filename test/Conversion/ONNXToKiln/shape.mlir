// RUN: kiln-opt %s --convert-onnx-to-kiln -split-input-file | FileCheck %s

// Flatten to [prod(d < axis), prod(d >= axis)]; axis defaults to 1, may be
// negative, and may equal the rank.
// CHECK-LABEL: func.func @flatten
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4x5xf32>)
// CHECK: %[[F0:.*]] = kiln.reshape %[[X]] : tensor<2x3x4x5xf32> -> tensor<2x60xf32>
// CHECK: %[[F1:.*]] = kiln.reshape %[[X]] : tensor<2x3x4x5xf32> -> tensor<1x120xf32>
// CHECK: %[[F2:.*]] = kiln.reshape %[[X]] : tensor<2x3x4x5xf32> -> tensor<24x5xf32>
// CHECK: %[[F3:.*]] = kiln.reshape %[[X]] : tensor<2x3x4x5xf32> -> tensor<120x1xf32>
// CHECK: return %[[F0]], %[[F1]], %[[F2]], %[[F3]]
// CHECK-NOT: onnx.
func.func @flatten(%x: tensor<2x3x4x5xf32>) -> (tensor<2x60xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %0 = onnx.node "Flatten"(%x) opset 13 {} : (tensor<2x3x4x5xf32>) -> tensor<2x60xf32>
  %1 = onnx.node "Flatten"(%x) opset 13 {axis = 0 : i64} : (tensor<2x3x4x5xf32>) -> tensor<*xf32>
  %2 = onnx.node "Flatten"(%x) opset 11 {axis = -1 : i64} : (tensor<2x3x4x5xf32>) -> tensor<*xf32>
  %3 = onnx.node "Flatten"(%x) opset 9 {axis = 4 : i64} : (tensor<2x3x4x5xf32>) -> tensor<*xf32>
  return %0, %1, %2, %3 : tensor<2x60xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// -----

// Reshape: 0 copies the input dim (unless allowzero), -1 is inferred; a
// reshape to the input's own shape is no op. The shape constants are gone.
// CHECK-LABEL: func.func @reshape
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-NOT: kiln.constant
// CHECK: %[[R0:.*]] = kiln.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<2x12xf32>
// CHECK: %[[R1:.*]] = kiln.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<24xf32>
// CHECK: %[[R2:.*]] = kiln.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<4x3x2xf32>
// CHECK: %[[R3:.*]] = kiln.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<2x3x4x1xf32>
// CHECK-NOT: kiln.constant
// CHECK: return %[[R0]], %[[R1]], %[[R2]], %[[R3]], %[[X]]
func.func @reshape(%x: tensor<2x3x4xf32>) -> (tensor<2x12xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %c0 = onnx.constant dense<[0, -1]> : tensor<2xi64>
  %0 = onnx.node "Reshape"(%x, %c0) opset 14 {} : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<2x12xf32>
  %c1 = onnx.constant dense<[-1]> : tensor<1xi64>
  %1 = onnx.node "Reshape"(%x, %c1) opset 13 {} : (tensor<2x3x4xf32>, tensor<1xi64>) -> tensor<*xf32>
  %c2 = onnx.constant dense<[4, 0, 2]> : tensor<3xi64>
  %2 = onnx.node "Reshape"(%x, %c2) opset 5 {} : (tensor<2x3x4xf32>, tensor<3xi64>) -> tensor<*xf32>
  %c3 = onnx.constant dense<[0, 0, -1, 1]> : tensor<4xi64>
  %3 = onnx.node "Reshape"(%x, %c3) opset 13 {} : (tensor<2x3x4xf32>, tensor<4xi64>) -> tensor<*xf32>
  %c4 = onnx.constant dense<[2, 3, 4]> : tensor<3xi64>
  %4 = onnx.node "Reshape"(%x, %c4) opset 14 {allowzero = 1 : i64} : (tensor<2x3x4xf32>, tensor<3xi64>) -> tensor<*xf32>
  return %0, %1, %2, %3, %4 : tensor<2x12xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// -----

// Transpose: perm defaults to reversing the dimensions.
// CHECK-LABEL: func.func @transpose
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK: %[[T0:.*]] = kiln.transpose %[[X]] {perm = array<i64: 2, 1, 0>} : (tensor<2x3x4xf32>) -> tensor<4x3x2xf32>
// CHECK: %[[T1:.*]] = kiln.transpose %[[X]] {perm = array<i64: 1, 2, 0>} : (tensor<2x3x4xf32>) -> tensor<3x4x2xf32>
// CHECK: return %[[T0]], %[[T1]]
func.func @transpose(%x: tensor<2x3x4xf32>) -> (tensor<4x3x2xf32>, tensor<*xf32>) {
  %0 = onnx.node "Transpose"(%x) opset 13 {} : (tensor<2x3x4xf32>) -> tensor<4x3x2xf32>
  %1 = onnx.node "Transpose"(%x) opset 1 {perm = [1, 2, 0]} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  return %0, %1 : tensor<4x3x2xf32>, tensor<*xf32>
}

// -----

// Squeeze/Unsqueeze take axes as an attribute before opset 13 and as an
// input from 13; Squeeze without axes drops every 1; Unsqueeze's negative
// axes count in the output's rank.
// CHECK-LABEL: func.func @squeeze_unsqueeze
// CHECK-SAME: (%[[X:.*]]: tensor<1x3x1x4xf32>, %[[Y:.*]]: tensor<2x3xf32>)
// CHECK: %[[S0:.*]] = kiln.reshape %[[X]] : tensor<1x3x1x4xf32> -> tensor<1x3x4xf32>
// CHECK: %[[S1:.*]] = kiln.reshape %[[X]] : tensor<1x3x1x4xf32> -> tensor<3x4xf32>
// CHECK: %[[S2:.*]] = kiln.reshape %[[X]] : tensor<1x3x1x4xf32> -> tensor<3x4xf32>
// CHECK: %[[U0:.*]] = kiln.reshape %[[Y]] : tensor<2x3xf32> -> tensor<1x2x3x1xf32>
// CHECK: %[[U1:.*]] = kiln.reshape %[[Y]] : tensor<2x3xf32> -> tensor<2x1x3x1xf32>
// CHECK: return %[[S0]], %[[S1]], %[[S2]], %[[U0]], %[[U1]]
// CHECK-NOT: onnx.
func.func @squeeze_unsqueeze(%x: tensor<1x3x1x4xf32>, %y: tensor<2x3xf32>) -> (tensor<1x3x4xf32>, tensor<*xf32>, tensor<*xf32>, tensor<1x2x3x1xf32>, tensor<*xf32>) {
  %0 = onnx.node "Squeeze"(%x) opset 11 {axes = [2]} : (tensor<1x3x1x4xf32>) -> tensor<1x3x4xf32>
  %a = onnx.constant dense<[0, -2]> : tensor<2xi64>
  %1 = onnx.node "Squeeze"(%x, %a) opset 13 {} : (tensor<1x3x1x4xf32>, tensor<2xi64>) -> tensor<*xf32>
  %2 = onnx.node "Squeeze"(%x) opset 13 {} : (tensor<1x3x1x4xf32>) -> tensor<*xf32>
  %3 = onnx.node "Unsqueeze"(%y) opset 11 {axes = [0, 3]} : (tensor<2x3xf32>) -> tensor<1x2x3x1xf32>
  %b = onnx.constant dense<[-1, 1]> : tensor<2xi64>
  %4 = onnx.node "Unsqueeze"(%y, %b) opset 13 {} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<*xf32>
  return %0, %1, %2, %3, %4 : tensor<1x3x4xf32>, tensor<*xf32>, tensor<*xf32>, tensor<1x2x3x1xf32>, tensor<*xf32>
}

// -----

// CHECK-LABEL: func.func @concat
// CHECK-SAME: (%[[A:.*]]: tensor<2x3xf32>, %[[B:.*]]: tensor<2x5xf32>, %[[C:.*]]: tensor<4x3xf32>)
// CHECK: %[[C0:.*]] = kiln.concat %[[A]], %[[B]], %[[A]] {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>, tensor<2x3xf32>) -> tensor<2x11xf32>
// CHECK: %[[C1:.*]] = kiln.concat %[[A]], %[[C]] {axis = 0 : i64} : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<6x3xf32>
// CHECK: return %[[C0]], %[[C1]]
func.func @concat(%a: tensor<2x3xf32>, %b: tensor<2x5xf32>, %c: tensor<4x3xf32>) -> (tensor<2x11xf32>, tensor<*xf32>) {
  %0 = onnx.node "Concat"(%a, %b, %a) opset 13 {axis = -1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>, tensor<2x3xf32>) -> tensor<2x11xf32>
  %1 = onnx.node "Concat"(%a, %c) opset 4 {axis = 0 : i64} : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<*xf32>
  return %0, %1 : tensor<2x11xf32>, tensor<*xf32>
}

// -----

// Split sizes: an attribute before opset 13, an input from 13, else equal
// parts; from opset 18 the last part may be smaller (7 in 3: 3, 3, 1).
// CHECK-LABEL: func.func @split
// CHECK-SAME: (%[[X:.*]]: tensor<2x6xf32>, %[[Y:.*]]: tensor<7xf32>)
// CHECK: %[[A0:.*]] = kiln.slice %[[X]] {limits = array<i64: 2, 2>, starts = array<i64: 0, 0>, strides = array<i64: 1, 1>} : (tensor<2x6xf32>) -> tensor<2x2xf32>
// CHECK: %[[A1:.*]] = kiln.slice %[[X]] {limits = array<i64: 2, 6>, starts = array<i64: 0, 2>, strides = array<i64: 1, 1>} : (tensor<2x6xf32>) -> tensor<2x4xf32>
// CHECK: %[[B0:.*]] = kiln.slice %[[X]] {limits = array<i64: 2, 1>, starts = array<i64: 0, 0>, strides = array<i64: 1, 1>} : (tensor<2x6xf32>) -> tensor<2x1xf32>
// CHECK: %[[B1:.*]] = kiln.slice %[[X]] {limits = array<i64: 2, 6>, starts = array<i64: 0, 1>, strides = array<i64: 1, 1>} : (tensor<2x6xf32>) -> tensor<2x5xf32>
// CHECK: %[[C0:.*]] = kiln.slice %[[X]] {limits = array<i64: 2, 2>, starts = array<i64: 0, 0>, strides = array<i64: 1, 1>} : (tensor<2x6xf32>) -> tensor<2x2xf32>
// CHECK: %[[C1:.*]] = kiln.slice %[[X]] {limits = array<i64: 2, 4>, starts = array<i64: 0, 2>, strides = array<i64: 1, 1>} : (tensor<2x6xf32>) -> tensor<2x2xf32>
// CHECK: %[[C2:.*]] = kiln.slice %[[X]] {limits = array<i64: 2, 6>, starts = array<i64: 0, 4>, strides = array<i64: 1, 1>} : (tensor<2x6xf32>) -> tensor<2x2xf32>
// CHECK: %[[D0:.*]] = kiln.slice %[[Y]] {limits = array<i64: 3>, starts = array<i64: 0>, strides = array<i64: 1>} : (tensor<7xf32>) -> tensor<3xf32>
// CHECK: %[[D1:.*]] = kiln.slice %[[Y]] {limits = array<i64: 6>, starts = array<i64: 3>, strides = array<i64: 1>} : (tensor<7xf32>) -> tensor<3xf32>
// CHECK: %[[D2:.*]] = kiln.slice %[[Y]] {limits = array<i64: 7>, starts = array<i64: 6>, strides = array<i64: 1>} : (tensor<7xf32>) -> tensor<1xf32>
// CHECK: return %[[A0]], %[[A1]], %[[B0]], %[[B1]], %[[C0]], %[[C1]], %[[C2]], %[[D0]], %[[D1]], %[[D2]]
func.func @split(%x: tensor<2x6xf32>, %y: tensor<7xf32>) -> (tensor<2x2xf32>, tensor<2x4xf32>, tensor<*xf32>, tensor<*xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<1xf32>) {
  %0:2 = onnx.node "Split"(%x) opset 11 {axis = 1 : i64, split = [2, 4]} : (tensor<2x6xf32>) -> (tensor<2x2xf32>, tensor<2x4xf32>)
  %s = onnx.constant dense<[1, 5]> : tensor<2xi64>
  %1:2 = onnx.node "Split"(%x, %s) opset 13 {axis = -1 : i64} : (tensor<2x6xf32>, tensor<2xi64>) -> (tensor<*xf32>, tensor<*xf32>)
  %2:3 = onnx.node "Split"(%x) opset 13 {axis = 1 : i64} : (tensor<2x6xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>)
  %3:3 = onnx.node "Split"(%y) opset 18 {num_outputs = 3 : i64} : (tensor<7xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<1xf32>)
  return %0#0, %0#1, %1#0, %1#1, %2#0, %2#1, %2#2, %3#0, %3#1, %3#2 : tensor<2x2xf32>, tensor<2x4xf32>, tensor<*xf32>, tensor<*xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<1xf32>
}

// -----

// Slice: starts/ends clamp (INT64_MAX ends, INT64_MIN with a negative step
// reverses the whole dim: limit -1 is "through index 0"); axes may be
// negative and in any order; opset < 10 reads attributes.
// CHECK-LABEL: func.func @slice
// CHECK-SAME: (%[[X:.*]]: tensor<4x6xf32>)
// CHECK: %[[S0:.*]] = kiln.slice %[[X]] {limits = array<i64: 4, 6>, starts = array<i64: 0, 1>, strides = array<i64: 1, 1>} : (tensor<4x6xf32>) -> tensor<4x5xf32>
// CHECK: %[[S1:.*]] = kiln.slice %[[X]] {limits = array<i64: 4, -1>, starts = array<i64: 0, 5>, strides = array<i64: 1, -1>} : (tensor<4x6xf32>) -> tensor<4x6xf32>
// CHECK: %[[S2:.*]] = kiln.slice %[[X]] {limits = array<i64: 4, 1>, starts = array<i64: 0, 4>, strides = array<i64: 3, -2>} : (tensor<4x6xf32>) -> tensor<2x2xf32>
// CHECK: %[[S3:.*]] = kiln.slice %[[X]] {limits = array<i64: 2, 5>, starts = array<i64: 0, 1>, strides = array<i64: 1, 1>} : (tensor<4x6xf32>) -> tensor<2x4xf32>
// CHECK: %[[S4:.*]] = kiln.slice %[[X]] {limits = array<i64: 4, 6>, starts = array<i64: 1, 0>, strides = array<i64: 1, 1>} : (tensor<4x6xf32>) -> tensor<3x6xf32>
// CHECK: return %[[S0]], %[[S1]], %[[S2]], %[[S3]], %[[S4]]
// CHECK-NOT: onnx.
func.func @slice(%x: tensor<4x6xf32>) -> (tensor<4x5xf32>, tensor<4x6xf32>, tensor<2x2xf32>, tensor<2x4xf32>, tensor<3x6xf32>) {
  %st = onnx.constant dense<[1]> : tensor<1xi64>
  %en = onnx.constant dense<[9223372036854775807]> : tensor<1xi64>
  %ax = onnx.constant dense<[1]> : tensor<1xi64>
  %0 = onnx.node "Slice"(%x, %st, %en, %ax) opset 13 {} : (tensor<4x6xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4x5xf32>
  %st1 = onnx.constant dense<[-1]> : tensor<1xi64>
  %en1 = onnx.constant dense<[-9223372036854775808]> : tensor<1xi64>
  %ax1 = onnx.constant dense<[-1]> : tensor<1xi64>
  %sp1 = onnx.constant dense<[-1]> : tensor<1xi64>
  %1 = onnx.node "Slice"(%x, %st1, %en1, %ax1, %sp1) opset 13 {} : (tensor<4x6xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4x6xf32>
  // Dim 1: 4, 2 (step -2 stops before 1); dim 0: 0, 3.
  %st2 = onnx.constant dense<[4, 0]> : tensor<2xi64>
  %en2 = onnx.constant dense<[1, 4]> : tensor<2xi64>
  %ax2 = onnx.constant dense<[1, 0]> : tensor<2xi64>
  %sp2 = onnx.constant dense<[-2, 3]> : tensor<2xi64>
  %2 = onnx.node "Slice"(%x, %st2, %en2, %ax2, %sp2) opset 11 {} : (tensor<4x6xf32>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> tensor<2x2xf32>
  %3 = onnx.node "Slice"(%x) opset 9 {starts = [0, 1], ends = [2, -1], axes = [0, 1]} : (tensor<4x6xf32>) -> tensor<2x4xf32>
  %4 = onnx.node "Slice"(%x) opset 1 {starts = [-3], ends = [100]} : (tensor<4x6xf32>) -> tensor<3x6xf32>
  return %0, %1, %2, %3, %4 : tensor<4x5xf32>, tensor<4x6xf32>, tensor<2x2xf32>, tensor<2x4xf32>, tensor<3x6xf32>
}

// -----

// Walking backwards, starts clamp to [0, dim - 1] (not NumPy's -1): a start
// before the beginning still takes element 0; ends clamp to [-1, dim - 1].
// A start before the end with a negative step takes nothing.
// CHECK-LABEL: func.func @slice_negative_step_clamp
// CHECK-SAME: (%[[X:.*]]: tensor<6xf32>)
// CHECK: %[[S0:.*]] = kiln.slice %[[X]] {limits = array<i64: -1>, starts = array<i64: 0>, strides = array<i64: -1>} : (tensor<6xf32>) -> tensor<1xf32>
// CHECK: %[[S1:.*]] = kiln.slice %[[X]] {limits = array<i64: 4>, starts = array<i64: 2>, strides = array<i64: -1>} : (tensor<6xf32>) -> tensor<0xf32>
// CHECK: %[[S2:.*]] = kiln.slice %[[X]] {limits = array<i64: -1>, starts = array<i64: 5>, strides = array<i64: -2>} : (tensor<6xf32>) -> tensor<3xf32>
// CHECK: return %[[S0]], %[[S1]], %[[S2]]
func.func @slice_negative_step_clamp(%x: tensor<6xf32>) -> (tensor<1xf32>, tensor<*xf32>, tensor<3xf32>) {
  %ax = onnx.constant dense<[0]> : tensor<1xi64>
  %sp = onnx.constant dense<[-1]> : tensor<1xi64>
  %st = onnx.constant dense<[-10]> : tensor<1xi64>
  %en = onnx.constant dense<[-20]> : tensor<1xi64>
  %0 = onnx.node "Slice"(%x, %st, %en, %ax, %sp) opset 13 {} : (tensor<6xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1xf32>
  %st1 = onnx.constant dense<[2]> : tensor<1xi64>
  %en1 = onnx.constant dense<[4]> : tensor<1xi64>
  %1 = onnx.node "Slice"(%x, %st1, %en1, %ax, %sp) opset 13 {} : (tensor<6xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<*xf32>
  %st2 = onnx.constant dense<[-1]> : tensor<1xi64>
  %en2 = onnx.constant dense<[-100]> : tensor<1xi64>
  %sp2 = onnx.constant dense<[-2]> : tensor<1xi64>
  %2 = onnx.node "Slice"(%x, %st2, %en2, %ax, %sp2) opset 13 {} : (tensor<6xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xf32>
  return %0, %1, %2 : tensor<1xf32>, tensor<*xf32>, tensor<3xf32>
}

// -----

// Gather: the indices' shape replaces the gathered dim; a scalar index drops it.
// CHECK-LABEL: func.func @gather
// CHECK-SAME: (%[[T:.*]]: tensor<10x4xf32>, %[[I:.*]]: tensor<2x3xi64>)
// CHECK: %[[G0:.*]] = kiln.gather %[[T]], %[[I]] {axis = 0 : i64} : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
// CHECK: %[[K:.*]] = kiln.constant dense<-1> : tensor<i64>
// CHECK: %[[G1:.*]] = kiln.gather %[[T]], %[[K]] {axis = 1 : i64} : (tensor<10x4xf32>, tensor<i64>) -> tensor<10xf32>
// CHECK: return %[[G0]], %[[G1]]
func.func @gather(%t: tensor<10x4xf32>, %i: tensor<2x3xi64>) -> (tensor<2x3x4xf32>, tensor<10xf32>) {
  %0 = onnx.node "Gather"(%t, %i) opset 13 {} : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %k = onnx.constant dense<-1> : tensor<i64>
  %1 = onnx.node "Gather"(%t, %k) opset 11 {axis = 1 : i64} : (tensor<10x4xf32>, tensor<i64>) -> tensor<10xf32>
  return %0, %1 : tensor<2x3x4xf32>, tensor<10xf32>
}

// -----

// Expand broadcasts both ways ([3,1] with [2,1,4] is [2,3,4]; with [1] it
// stays [3,1]); Tile is reshape, broadcast, reshape.
// CHECK-LABEL: func.func @expand_tile
// CHECK-SAME: (%[[X:.*]]: tensor<3x1xf32>)
// CHECK: %[[E:.*]] = kiln.broadcast %[[X]] : tensor<3x1xf32> -> tensor<2x3x4xf32>
// CHECK: %[[T0:.*]] = kiln.reshape %[[X]] : tensor<3x1xf32> -> tensor<1x3x1x1xf32>
// CHECK: %[[T1:.*]] = kiln.broadcast %[[T0]] : tensor<1x3x1x1xf32> -> tensor<2x3x3x1xf32>
// CHECK: %[[T2:.*]] = kiln.reshape %[[T1]] : tensor<2x3x3x1xf32> -> tensor<6x3xf32>
// CHECK: return %[[E]], %[[X]], %[[T2]]
func.func @expand_tile(%x: tensor<3x1xf32>) -> (tensor<2x3x4xf32>, tensor<*xf32>, tensor<6x3xf32>) {
  %s = onnx.constant dense<[2, 1, 4]> : tensor<3xi64>
  %0 = onnx.node "Expand"(%x, %s) opset 13 {} : (tensor<3x1xf32>, tensor<3xi64>) -> tensor<2x3x4xf32>
  %s1 = onnx.constant dense<[1]> : tensor<1xi64>
  %1 = onnx.node "Expand"(%x, %s1) opset 8 {} : (tensor<3x1xf32>, tensor<1xi64>) -> tensor<*xf32>
  %r = onnx.constant dense<[2, 3]> : tensor<2xi64>
  %2 = onnx.node "Tile"(%x, %r) opset 13 {} : (tensor<3x1xf32>, tensor<2xi64>) -> tensor<6x3xf32>
  return %0, %1, %2 : tensor<2x3x4xf32>, tensor<*xf32>, tensor<6x3xf32>
}

// -----

// Pad: pads are [begin..., end...]; attributes at opset 2, inputs from 11
// (constant_value optional), axes from 18.
// CHECK-LABEL: func.func @pad
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
// CHECK: %[[P0:.*]] = kiln.pad %[[X]] {high = array<i64: 0, 2>, low = array<i64: 0, 1>, value = 1.500000e+00 : f64} : (tensor<2x3xf32>) -> tensor<2x6xf32>
// CHECK: %[[P1:.*]] = kiln.pad %[[X]] {high = array<i64: 1, 2>, low = array<i64: 1, 0>, value = -1.000000e+00 : f64} : (tensor<2x3xf32>) -> tensor<4x5xf32>
// CHECK: %[[P2:.*]] = kiln.pad %[[X]] {high = array<i64: 0, 1>, low = array<i64: 0, 1>, mode = "reflect"} : (tensor<2x3xf32>) -> tensor<2x5xf32>
// CHECK: %[[P3:.*]] = kiln.pad %[[X]] {high = array<i64: 0, 1>, low = array<i64: 0, 1>, mode = "edge"} : (tensor<2x3xf32>) -> tensor<2x5xf32>
// CHECK: %[[P4:.*]] = kiln.pad %[[X]] {high = array<i64: 0, 1>, low = array<i64: 0, 2>} : (tensor<2x3xf32>) -> tensor<2x6xf32>
// CHECK: return %[[P0]], %[[P1]], %[[P2]], %[[P3]], %[[P4]]
// CHECK-NOT: onnx.
func.func @pad(%x: tensor<2x3xf32>) -> (tensor<2x6xf32>, tensor<4x5xf32>, tensor<*xf32>, tensor<*xf32>, tensor<2x6xf32>) {
  %0 = onnx.node "Pad"(%x) opset 2 {pads = [0, 1, 0, 2], value = 1.5 : f32} : (tensor<2x3xf32>) -> tensor<2x6xf32>
  %p = onnx.constant dense<[1, 0, 1, 2]> : tensor<4xi64>
  %v = onnx.node "Constant"() opset 13 {value = dense<-1.0> : tensor<f32>} : () -> tensor<f32>
  %1 = onnx.node "Pad"(%x, %p, %v) opset 13 {} : (tensor<2x3xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x5xf32>
  %p2 = onnx.constant dense<[0, 1, 0, 1]> : tensor<4xi64>
  %2 = onnx.node "Pad"(%x, %p2) opset 11 {mode = "reflect"} : (tensor<2x3xf32>, tensor<4xi64>) -> tensor<*xf32>
  %3 = onnx.node "Pad"(%x, %p2) opset 13 {mode = "edge"} : (tensor<2x3xf32>, tensor<4xi64>) -> tensor<*xf32>
  %p3 = onnx.constant dense<[2, 1]> : tensor<2xi64>
  %ax = onnx.constant dense<[-1]> : tensor<1xi64>
  %none = onnx.none
  %4 = onnx.node "Pad"(%x, %p3, %none, %ax) opset 18 {} : (tensor<2x3xf32>, tensor<2xi64>, none, tensor<1xi64>) -> tensor<2x6xf32>
  return %0, %1, %2, %3, %4 : tensor<2x6xf32>, tensor<4x5xf32>, tensor<*xf32>, tensor<*xf32>, tensor<2x6xf32>
}

// -----

// Constant's value forms, and ConstantOfShape (fill defaults to f32 0).
// CHECK-LABEL: func.func @constants
// CHECK-DAG: %[[C0:.*]] = kiln.constant dense<{{\[\[}}1.000000e+00, 2.000000e+00]]> : tensor<1x2xf32>
// CHECK-DAG: %[[C1:.*]] = kiln.constant dense<5.000000e-01> : tensor<f32>
// CHECK-DAG: %[[C2:.*]] = kiln.constant dense<3> : tensor<i64>
// CHECK-DAG: %[[C3:.*]] = kiln.constant dense<[1, 2, 3]> : tensor<3xi64>
// CHECK-DAG: %[[C4:.*]] = kiln.constant dense<[1.000000e+00, 2.500000e+00]> : tensor<2xf32>
// CHECK-DAG: %[[C5:.*]] = kiln.constant dense<7> : tensor<2x3xi64>
// CHECK-DAG: %[[C6:.*]] = kiln.constant dense<0.000000e+00> : tensor<2x3xf32>
// CHECK: return %[[C0]], %[[C1]], %[[C2]], %[[C3]], %[[C4]], %[[C5]], %[[C6]]
// CHECK-NOT: onnx.
func.func @constants() -> (tensor<1x2xf32>, tensor<f32>, tensor<i64>, tensor<3xi64>, tensor<2xf32>, tensor<2x3xi64>, tensor<*xf32>) {
  %0 = onnx.node "Constant"() opset 13 {value = dense<[[1.0, 2.0]]> : tensor<1x2xf32>} : () -> tensor<1x2xf32>
  %1 = onnx.node "Constant"() opset 13 {value_float = 0.5 : f32} : () -> tensor<f32>
  %2 = onnx.node "Constant"() opset 13 {value_int = 3 : i64} : () -> tensor<i64>
  %3 = onnx.node "Constant"() opset 13 {value_ints = [1, 2, 3]} : () -> tensor<3xi64>
  %4 = onnx.node "Constant"() opset 13 {value_floats = [1.0 : f32, 2.5 : f32]} : () -> tensor<2xf32>
  %s = onnx.constant dense<[2, 3]> : tensor<2xi64>
  %5 = onnx.node "ConstantOfShape"(%s) opset 9 {value = dense<7> : tensor<1xi64>} : (tensor<2xi64>) -> tensor<2x3xi64>
  %6 = onnx.node "ConstantOfShape"(%s) opset 9 {} : (tensor<2xi64>) -> tensor<*xf32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<1x2xf32>, tensor<f32>, tensor<i64>, tensor<3xi64>, tensor<2xf32>, tensor<2x3xi64>, tensor<*xf32>
}

// -----

// Shape is a constant; opset 15's start/end slice it (clamped).
// CHECK-LABEL: func.func @shape
// CHECK-DAG: %[[S0:.*]] = kiln.constant dense<[2, 3, 4]> : tensor<3xi64>
// CHECK-DAG: %[[S1:.*]] = kiln.constant dense<[3, 4]> : tensor<2xi64>
// CHECK-DAG: %[[S2:.*]] = kiln.constant dense<[2, 3]> : tensor<2xi64>
// CHECK: return %[[S0]], %[[S1]], %[[S2]]
func.func @shape(%x: tensor<2x3x4xf32>) -> (tensor<3xi64>, tensor<2xi64>, tensor<2xi64>) {
  %0 = onnx.node "Shape"(%x) opset 13 {} : (tensor<2x3x4xf32>) -> tensor<3xi64>
  %1 = onnx.node "Shape"(%x) opset 15 {start = 1 : i64} : (tensor<2x3x4xf32>) -> tensor<2xi64>
  %2 = onnx.node "Shape"(%x) opset 15 {start = -5 : i64, end = -1 : i64} : (tensor<2x3x4xf32>) -> tensor<2xi64>
  return %0, %1, %2 : tensor<3xi64>, tensor<2xi64>, tensor<2xi64>
}

// -----

// Identity and Cast of shape values fold to constants.
// CHECK-LABEL: func.func @identity_cast
// CHECK-NEXT: %[[C:.*]] = kiln.constant dense<[2.000000e+00, 3.000000e+00]> : tensor<2xf32>
// CHECK-NEXT: return %[[C]] : tensor<2xf32>
func.func @identity_cast(%x: tensor<2x3xf32>) -> tensor<*xf32> {
  %0 = onnx.node "Shape"(%x) opset 13 {} : (tensor<2x3xf32>) -> tensor<2xi64>
  %1 = onnx.node "Identity"(%0) opset 13 {} : (tensor<2xi64>) -> tensor<2xi64>
  %2 = onnx.node "Cast"(%1) opset 13 {to = 1 : i64} : (tensor<2xi64>) -> tensor<*xf32>
  return %2 : tensor<*xf32>
}

// -----

// Range of constants is a constant: ceil((limit - start) / delta) elements.
// CHECK-LABEL: func.func @range
// CHECK-DAG: %[[R0:.*]] = kiln.constant dense<[0, 3, 6, 9]> : tensor<4xi64>
// CHECK-DAG: %[[R1:.*]] = kiln.constant dense<[1.000000e+00, 1.250000e+00, 1.500000e+00, 1.750000e+00]> : tensor<4xf32>
// CHECK-DAG: %[[R2:.*]] = kiln.constant dense<[5, 3, 1]> : tensor<3xi32>
// CHECK: return %[[R0]], %[[R1]], %[[R2]]
// CHECK-NOT: onnx.
func.func @range() -> (tensor<4xi64>, tensor<*xf32>, tensor<3xi32>) {
  %a = onnx.constant dense<0> : tensor<i64>
  %b = onnx.constant dense<10> : tensor<i64>
  %c = onnx.constant dense<3> : tensor<i64>
  %0 = onnx.node "Range"(%a, %b, %c) opset 11 {} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<4xi64>
  %fa = onnx.node "Constant"() opset 13 {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %fb = onnx.node "Constant"() opset 13 {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %fc = onnx.node "Constant"() opset 13 {value = dense<0.25> : tensor<f32>} : () -> tensor<f32>
  %1 = onnx.node "Range"(%fa, %fb, %fc) opset 11 {} : (tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<*xf32>
  %ia = onnx.constant dense<5> : tensor<i32>
  %ib = onnx.constant dense<0> : tensor<i32>
  %ic = onnx.constant dense<-2> : tensor<i32>
  %2 = onnx.node "Range"(%ia, %ib, %ic) opset 11 {} : (tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<3xi32>
  return %0, %1, %2 : tensor<4xi64>, tensor<*xf32>, tensor<3xi32>
}

// -----

// GatherElements: the result has the indices' shape; negative axis counts
// from the end.
// CHECK-LABEL: func.func @gather_elements
// CHECK: kiln.gather_elements %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<3x5xf32>, tensor<3x2xi64>) -> tensor<3x2xf32>
// CHECK-NOT: onnx.
func.func @gather_elements(%x: tensor<3x5xf32>, %i: tensor<3x2xi64>) -> tensor<3x2xf32> {
  %0 = onnx.node "GatherElements"(%x, %i) opset 13 {axis = -1 : i64} : (tensor<3x5xf32>, tensor<3x2xi64>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

// Trilu: a select with a constant triangular mask (k = 1, lower).
// CHECK-LABEL: func.func @trilu
// CHECK: %[[M:.*]] = kiln.constant dense<{{\[}}[true, true, false], [true, true, true]]> : tensor<2x3xi1>
// CHECK: kiln.select %[[M]], %{{.*}}, %{{.*}} : (tensor<2x3xi1>, tensor<4x2x3xf32>, tensor<4x2x3xf32>) -> tensor<4x2x3xf32>
// CHECK-NOT: onnx.
func.func @trilu(%x: tensor<4x2x3xf32>) -> tensor<4x2x3xf32> {
  %k = onnx.constant dense<1> : tensor<i64>
  %0 = onnx.node "Trilu"(%x, %k) opset 14 {upper = 0 : i64} : (tensor<4x2x3xf32>, tensor<i64>) -> tensor<4x2x3xf32>
  return %0 : tensor<4x2x3xf32>
}

// -----

// DepthToSpace (DCR) and SpaceToDepth: reshape, transpose, reshape.
// EyeLike: a constant mask cast to the element type (folded).
// CHECK-LABEL: func.func @depth_space_eye
// CHECK: kiln.reshape %{{.*}} : tensor<1x8x2x3xf32> -> tensor<1x2x2x2x2x3xf32>
// CHECK: kiln.transpose %{{.*}} {perm = array<i64: 0, 3, 4, 1, 5, 2>}
// CHECK: kiln.reshape %{{.*}} : tensor<1x2x2x2x3x2xf32> -> tensor<1x2x4x6xf32>
// CHECK: kiln.transpose %{{.*}} {perm = array<i64: 0, 3, 5, 1, 2, 4>}
// CHECK: kiln.constant dense<{{\[}}[0.000000e+00, 1.000000e+00, 0.000000e+00], [0.000000e+00, 0.000000e+00, 1.000000e+00]]> : tensor<2x3xf32>
// CHECK-NOT: onnx.
func.func @depth_space_eye(%x: tensor<1x8x2x3xf32>, %e: tensor<2x3xf32>) -> (tensor<1x2x4x6xf32>, tensor<1x8x2x3xf32>, tensor<2x3xf32>) {
  %0 = onnx.node "DepthToSpace"(%x) opset 13 {blocksize = 2 : i64} : (tensor<1x8x2x3xf32>) -> tensor<1x2x4x6xf32>
  %1 = onnx.node "SpaceToDepth"(%0) opset 13 {blocksize = 2 : i64} : (tensor<1x2x4x6xf32>) -> tensor<1x8x2x3xf32>
  %2 = onnx.node "EyeLike"(%e) opset 9 {k = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0, %1, %2 : tensor<1x2x4x6xf32>, tensor<1x8x2x3xf32>, tensor<2x3xf32>
}

// -----

// TopK: K from a constant input, axis -1, both results; opset 1's k attribute.
// CHECK-LABEL: func.func @topk
// CHECK: kiln.topk %{{.*}} {axis = 1 : i64, k = 2 : i64} : (tensor<3x5xf32>) -> (tensor<3x2xf32>, tensor<3x2xi64>)
// CHECK: kiln.topk %{{.*}} {axis = 0 : i64, k = 1 : i64} : (tensor<3x5xf32>) -> (tensor<1x5xf32>, tensor<1x5xi64>)
// CHECK: kiln.topk %{{.*}} {axis = 1 : i64, k = 2 : i64, largest = false}
// CHECK-NOT: onnx.
func.func @topk(%x: tensor<3x5xf32>) -> (tensor<*xf32>, tensor<*xi64>, tensor<*xf32>, tensor<*xf32>) {
  %k = onnx.constant dense<[2]> : tensor<1xi64>
  %v, %i = onnx.node "TopK"(%x, %k) opset 11 {axis = -1 : i64} : (tensor<3x5xf32>, tensor<1xi64>) -> (tensor<*xf32>, tensor<*xi64>)
  %w, %j = onnx.node "TopK"(%x) opset 1 {axis = 0 : i64, k = 1 : i64} : (tensor<3x5xf32>) -> (tensor<*xf32>, tensor<*xi64>)
  %s, %t = onnx.node "TopK"(%x, %k) opset 11 {axis = 1 : i64, largest = 0 : i64} : (tensor<3x5xf32>, tensor<1xi64>) -> (tensor<*xf32>, tensor<*xi64>)
  return %v, %i, %w, %s : tensor<*xf32>, tensor<*xi64>, tensor<*xf32>, tensor<*xf32>
}

// -----

// CumSum: the axis a constant input, exclusive and reverse attributes.
// CHECK-LABEL: func.func @cumsum
// CHECK: kiln.cumsum %{{.*}} {axis = 0 : i64, exclusive = true, reverse = true} : (tensor<3x5xf32>) -> tensor<3x5xf32>
// CHECK-NOT: onnx.
func.func @cumsum(%x: tensor<3x5xf32>) -> tensor<*xf32> {
  %a = onnx.constant dense<-2> : tensor<i64>
  %0 = onnx.node "CumSum"(%x, %a) opset 14 {exclusive = 1 : i64, reverse = 1 : i64} : (tensor<3x5xf32>, tensor<i64>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

// OneHot (composed): indices wrapped into [0, depth), compared with 0..depth-1
// along the new axis, then on/off picked from values.
// CHECK-LABEL: func.func @onehot
// CHECK: kiln.less
// CHECK: kiln.select
// CHECK: kiln.equal %{{.*}}, %{{.*}} : (tensor<2x1x3xi64>, tensor<1x4x1xi64>) -> tensor<2x4x3xi1>
// CHECK: kiln.select %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x4x3xi1>, tensor<f32>, tensor<f32>) -> tensor<2x4x3xf32>
// CHECK-NOT: onnx.
func.func @onehot(%i: tensor<2x3xi64>, %vals: tensor<2xf32>) -> tensor<*xf32> {
  %d = onnx.constant dense<4> : tensor<i64>
  %0 = onnx.node "OneHot"(%i, %d, %vals) opset 11 {axis = 1 : i64} : (tensor<2x3xi64>, tensor<i64>, tensor<2xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

// ScatterElements (and opset 9's Scatter) and ScatterND with their reductions.
// CHECK-LABEL: func.func @scatter
// CHECK: kiln.scatter_elements %{{.*}}, %{{.*}}, %{{.*}} {axis = 1 : i64, reduction = "add"}
// CHECK: kiln.scatter_elements %{{.*}}, %{{.*}}, %{{.*}} {axis = 0 : i64} :
// CHECK: kiln.scatter_nd %{{.*}}, %{{.*}}, %{{.*}} {reduction = "mul"}
// CHECK-NOT: onnx.
func.func @scatter(%x: tensor<3x5xf32>, %i: tensor<3x2xi64>, %u: tensor<3x2xf32>, %n: tensor<2x1xi64>, %r: tensor<2x5xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %0 = onnx.node "ScatterElements"(%x, %i, %u) opset 16 {axis = -1 : i64, reduction = "add"} : (tensor<3x5xf32>, tensor<3x2xi64>, tensor<3x2xf32>) -> tensor<*xf32>
  %1 = onnx.node "Scatter"(%x, %i, %u) opset 9 {} : (tensor<3x5xf32>, tensor<3x2xi64>, tensor<3x2xf32>) -> tensor<*xf32>
  %2 = onnx.node "ScatterND"(%x, %n, %r) opset 16 {reduction = "mul"} : (tensor<3x5xf32>, tensor<2x1xi64>, tensor<2x5xf32>) -> tensor<*xf32>
  return %0, %1, %2 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}
