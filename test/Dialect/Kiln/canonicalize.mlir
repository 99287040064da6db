// RUN: kiln-opt %s --canonicalize -split-input-file | FileCheck %s

// The shape subgraph PyTorch emits for x.view(x.size(0), -1), already in
// kiln form: it folds to one constant.
// CHECK-LABEL: func.func @shape_chain
// CHECK-NEXT: %[[C:.*]] = kiln.constant dense<[2, 12]> : tensor<2xi64>
// CHECK-NEXT: return %[[C]]
func.func @shape_chain() -> tensor<2xi64> {
  %shape = kiln.constant dense<[2, 3, 4]> : tensor<3xi64>
  %i0 = kiln.constant dense<0> : tensor<i64>
  %d0 = kiln.gather %shape, %i0 {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %u = kiln.reshape %d0 : tensor<i64> -> tensor<1xi64>
  %tail = kiln.slice %shape {starts = array<i64: 1>, limits = array<i64: 3>, strides = array<i64: 1>} : (tensor<3xi64>) -> tensor<2xi64>
  %p = kiln.reduce_prod %tail {axes = array<i64: 0>, keepdims = true} : (tensor<2xi64>) -> tensor<1xi64>
  %c = kiln.concat %u, %p {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  return %c : tensor<2xi64>
}

// -----

// CHECK-LABEL: func.func @arith
// CHECK-DAG: kiln.constant dense<[3, 0, -2]> : tensor<3xi64>
// CHECK-DAG: kiln.constant dense<[true, false, false]> : tensor<3xi1>
// CHECK-DAG: kiln.constant dense<[3.500000e+00, 1.000000e+00, 2.000000e+00]> : tensor<3xf32>
// CHECK-NOT: kiln.div
// CHECK-NOT: kiln.equal
func.func @arith() -> (tensor<3xi64>, tensor<3xi1>, tensor<3xf32>) {
  %a = kiln.constant dense<[7, 1, -5]> : tensor<3xi64>
  %b = kiln.constant dense<2> : tensor<i64>
  // Integer division truncates toward zero, as ONNX's Div does.
  %q = kiln.div %a, %b : (tensor<3xi64>, tensor<i64>) -> tensor<3xi64>
  %e = kiln.equal %q, %q : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi1>
  %m = kiln.constant dense<[true, false, false]> : tensor<3xi1>
  %z = kiln.and %e, %m : (tensor<3xi1>, tensor<3xi1>) -> tensor<3xi1>
  %f = kiln.cast %a : tensor<3xi64> -> tensor<3xf32>
  %half = kiln.constant dense<[2.0, 1.0, -2.5]> : tensor<3xf32>
  %r = kiln.div %f, %half : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %fl = kiln.constant dense<[3.5, 1.0, 2.0]> : tensor<3xf32>
  %mn = kiln.min %r, %fl : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %q, %z, %mn : tensor<3xi64>, tensor<3xi1>, tensor<3xf32>
}

// -----

// Integer division by zero is left for the runtime to report.
// CHECK-LABEL: func.func @div_zero
// CHECK: kiln.div
func.func @div_zero() -> tensor<2xi64> {
  %a = kiln.constant dense<[1, 2]> : tensor<2xi64>
  %b = kiln.constant dense<[1, 0]> : tensor<2xi64>
  %q = kiln.div %a, %b : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  return %q : tensor<2xi64>
}

// -----

// CHECK-LABEL: func.func @movement
// CHECK-DAG: kiln.constant dense<{{\[}}[1, 4], [2, 5], [3, 6]]> : tensor<3x2xi64>
// CHECK-DAG: kiln.constant dense<{{\[}}[1, 2, 3], [1, 2, 3]]> : tensor<2x3xi64>
// CHECK-DAG: kiln.constant dense<[6, 4]> : tensor<2xi64>
// CHECK-DAG: kiln.constant dense<[3, 3, 1]> : tensor<3xi64>
func.func @movement() -> (tensor<3x2xi64>, tensor<2x3xi64>, tensor<2xi64>, tensor<3xi64>) {
  %a = kiln.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %t = kiln.transpose %a {perm = array<i64: 1, 0>} : (tensor<2x3xi64>) -> tensor<3x2xi64>
  %row = kiln.constant dense<[1, 2, 3]> : tensor<3xi64>
  %b = kiln.broadcast %row : tensor<3xi64> -> tensor<2x3xi64>
  %flat = kiln.reshape %a : tensor<2x3xi64> -> tensor<6xi64>
  // A negative stride walks backwards: elements 5 and 3.
  %s = kiln.slice %flat {starts = array<i64: 5>, limits = array<i64: 2>, strides = array<i64: -2>} : (tensor<6xi64>) -> tensor<2xi64>
  %idx = kiln.constant dense<[-1, 2, 0]> : tensor<3xi64>
  %g = kiln.gather %row, %idx {axis = 0 : i64} : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  return %t, %b, %s, %g : tensor<3x2xi64>, tensor<2x3xi64>, tensor<2xi64>, tensor<3xi64>
}

// -----

// Identity forms fold to their operand.
// CHECK-LABEL: func.func @identities
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
// CHECK-NEXT: return %[[X]], %[[X]], %[[X]]
func.func @identities(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
  %0 = kiln.transpose %x {perm = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = kiln.reshape %x : tensor<2x3xf32> -> tensor<6xf32>
  %2 = kiln.reshape %1 : tensor<6xf32> -> tensor<2x3xf32>
  %3 = kiln.slice %x {starts = array<i64: 0, 0>, limits = array<i64: 2, 3>, strides = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0, %2, %3 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// A 3x3 conv with padding 1 over a 1x1 map: only the centre tap ever reads
// the input, so the weight is sliced to it and the padding dropped.
// CHECK-LABEL: func.func @conv_dead_taps_1x1
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x1x1xf32>, %[[W:.*]]: tensor<4x8x3x3xf32>)
// CHECK: %[[S:.*]] = kiln.slice %[[W]] {limits = array<i64: 4, 8, 2, 2>, starts = array<i64: 0, 0, 1, 1>, strides = array<i64: 1, 1, 1, 1>} : (tensor<4x8x3x3xf32>) -> tensor<4x8x1x1xf32>
// CHECK: %[[Y:.*]] = kiln.conv %[[X]], %[[S]] {dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<2x8x1x1xf32>, tensor<4x8x1x1xf32>) -> tensor<2x4x1x1xf32>
// CHECK: return %[[Y]]
func.func @conv_dead_taps_1x1(%x: tensor<2x8x1x1xf32>, %w: tensor<4x8x3x3xf32>) -> tensor<2x4x1x1xf32> {
  %0 = kiln.conv %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, groups = 1 : i64} : (tensor<2x8x1x1xf32>, tensor<4x8x3x3xf32>) -> tensor<2x4x1x1xf32>
  return %0 : tensor<2x4x1x1xf32>
}

// -----

// Stride 2 over 2x2 (ResNet's downsampling 3x3 at its last stage): tap 0
// reads only the begin padding; taps 1 and 2 stay, with no padding left.
// CHECK-LABEL: func.func @conv_dead_taps_strided
// CHECK: kiln.slice %{{.*}} {limits = array<i64: 4, 8, 3, 3>, starts = array<i64: 0, 0, 1, 1>, strides = array<i64: 1, 1, 1, 1>} : (tensor<4x8x3x3xf32>) -> tensor<4x8x2x2xf32>
// CHECK: kiln.conv %{{.*}}, %{{.*}} {dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<2x8x2x2xf32>, tensor<4x8x2x2xf32>) -> tensor<2x4x1x1xf32>
func.func @conv_dead_taps_strided(%x: tensor<2x8x2x2xf32>, %w: tensor<4x8x3x3xf32>) -> tensor<2x4x1x1xf32> {
  %0 = kiln.conv %x, %w {strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, groups = 1 : i64} : (tensor<2x8x2x2xf32>, tensor<4x8x3x3xf32>) -> tensor<2x4x1x1xf32>
  return %0 : tensor<2x4x1x1xf32>
}

// -----

// Every tap of a 3x3 / pad 1 conv over 2x2 reads the input somewhere: kept.
// CHECK-LABEL: func.func @conv_all_taps_live
// CHECK-NOT: kiln.slice
// CHECK: kiln.conv %{{.*}}, %{{.*}} {dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>}
func.func @conv_all_taps_live(%x: tensor<2x8x2x2xf32>, %w: tensor<4x8x3x3xf32>) -> tensor<2x4x2x2xf32> {
  %0 = kiln.conv %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, groups = 1 : i64} : (tensor<2x8x2x2xf32>, tensor<4x8x3x3xf32>) -> tensor<2x4x2x2xf32>
  return %0 : tensor<2x4x2x2xf32>
}

// -----

// 1-D, dilation 2: of the taps at offsets -2, 0, 2 over a length-1 input,
// only the middle one reads it.
// CHECK-LABEL: func.func @conv_dead_taps_dilated
// CHECK: kiln.slice %{{.*}} {limits = array<i64: 1, 1, 2>, starts = array<i64: 0, 0, 1>, strides = array<i64: 1, 1, 1>} : (tensor<1x1x3xf32>) -> tensor<1x1x1xf32>
// CHECK: kiln.conv %{{.*}}, %{{.*}} {dilations = array<i64: 2>, groups = 1 : i64, padding = array<i64: 0, 0>, strides = array<i64: 1>} : (tensor<1x1x1xf32>, tensor<1x1x1xf32>) -> tensor<1x1x1xf32>
func.func @conv_dead_taps_dilated(%x: tensor<1x1x1xf32>, %w: tensor<1x1x3xf32>) -> tensor<1x1x1xf32> {
  %0 = kiln.conv %x, %w {strides = array<i64: 1>, dilations = array<i64: 2>, padding = array<i64: 2, 2>, groups = 1 : i64} : (tensor<1x1x1xf32>, tensor<1x1x3xf32>) -> tensor<1x1x1xf32>
  return %0 : tensor<1x1x1xf32>
}

// -----

// Taps at offsets -3, -1, 1, 3 over a length-2 input: only tap 2 (offset 1)
// is live, but cropping to it would need a negative begin pad (skipping
// input element 0), which conv cannot express: kept.
// CHECK-LABEL: func.func @conv_dead_taps_negative_pad
// CHECK-NOT: kiln.slice
// CHECK: kiln.conv %{{.*}}, %{{.*}} {dilations = array<i64: 2>, groups = 1 : i64, padding = array<i64: 3, 2>, strides = array<i64: 1>}
func.func @conv_dead_taps_negative_pad(%x: tensor<1x1x2xf32>, %w: tensor<1x1x4xf32>) -> tensor<1x1x1xf32> {
  %0 = kiln.conv %x, %w {strides = array<i64: 1>, dilations = array<i64: 2>, padding = array<i64: 3, 2>, groups = 1 : i64} : (tensor<1x1x2xf32>, tensor<1x1x4xf32>) -> tensor<1x1x1xf32>
  return %0 : tensor<1x1x1xf32>
}

// -----

// A transpose of an operand's last two dimensions becomes the matmul's
// flag (also through a cast: the cast moves onto the untransposed weight);
// a transpose of other dimensions stays.
// CHECK-LABEL: func.func @matmul_transposes
//  CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<16x8xf32>, %[[B:.*]]: tensor<2x8x4xf32>, %[[C:.*]]: tensor<4x2x8xf32>)
//   CHECK-DAG: %[[WL:.*]] = kiln.cast %[[W]] : tensor<16x8xf32> -> tensor<16x8xbf16>
//   CHECK-DAG: %[[M0:.*]] = kiln.matmul %[[X]], %[[W]] {transpose_rhs = true} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
//   CHECK-DAG: %[[M1:.*]] = kiln.matmul %{{.*}}, %[[WL]] {transpose_rhs = true} : (tensor<4x8xbf16>, tensor<16x8xbf16>) -> tensor<4x16xbf16>
//   CHECK-DAG: kiln.matmul %[[B]], %[[X]] {transpose_lhs = true, transpose_rhs = true} : (tensor<2x8x4xf32>, tensor<4x8xf32>) -> tensor<2x4x4xf32>
//   CHECK-DAG: %[[T:.*]] = kiln.transpose %[[C]] {perm = array<i64: 1, 0, 2>}
//   CHECK-DAG: kiln.matmul %[[T]], %[[X]] {transpose_rhs = true}
func.func @matmul_transposes(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<2x8x4xf32>, %c: tensor<4x2x8xf32>)
    -> (tensor<4x16xf32>, tensor<4x16xbf16>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) {
  %wt = kiln.transpose %w {perm = array<i64: 1, 0>} : (tensor<16x8xf32>) -> tensor<8x16xf32>
  %m0 = kiln.matmul %x, %wt : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %xl = kiln.cast %x : tensor<4x8xf32> -> tensor<4x8xbf16>
  %wtl = kiln.cast %wt : tensor<8x16xf32> -> tensor<8x16xbf16>
  %m1 = kiln.matmul %xl, %wtl : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
  %bt = kiln.transpose %b {perm = array<i64: 0, 2, 1>} : (tensor<2x8x4xf32>) -> tensor<2x4x8xf32>
  %m2 = kiln.matmul %bt, %x {transpose_rhs = true} : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x4xf32>
  %ct = kiln.transpose %c {perm = array<i64: 1, 0, 2>} : (tensor<4x2x8xf32>) -> tensor<2x4x8xf32>
  %m3 = kiln.matmul %ct, %x {transpose_rhs = true} : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x4xf32>
  return %m0, %m1, %m2, %m3 : tensor<4x16xf32>, tensor<4x16xbf16>, tensor<2x4x4xf32>, tensor<2x4x4xf32>
}
