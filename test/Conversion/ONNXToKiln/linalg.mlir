// RUN: kiln-opt %s --convert-onnx-to-kiln -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @matmul_2d
// CHECK-SAME: (%[[A:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8x16xf32>) -> tensor<4x16xf32>
// CHECK: %[[Y:.*]] = kiln.matmul %[[A]], %[[B]] : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
// CHECK: return %[[Y]]
// CHECK-NOT: onnx.
func.func @matmul_2d(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %0 = onnx.node "MatMul"(%a, %b) opset 13 {} : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// Batch dimensions broadcast: [2,1,4,8] x [3,8,5] -> [2,3,4,5].
// CHECK-LABEL: func.func @matmul_batched
// CHECK: kiln.matmul %{{.*}}, %{{.*}} : (tensor<2x1x4x8xf32>, tensor<3x8x5xf32>) -> tensor<2x3x4x5xf32>
func.func @matmul_batched(%a: tensor<2x1x4x8xf32>, %b: tensor<3x8x5xf32>) -> tensor<?x?x?x?xf32> {
  %0 = onnx.node "MatMul"(%a, %b) opset 13 {} : (tensor<2x1x4x8xf32>, tensor<3x8x5xf32>) -> tensor<?x?x?x?xf32>
  return %0 : tensor<?x?x?x?xf32>
}

// -----

// A 1-D lhs is promoted to [1, K] and the 1 removed again: [8] x [2,8,5] -> [2,5].
// CHECK-LABEL: func.func @matmul_vec_lhs
// CHECK-SAME: (%[[A:.*]]: tensor<8xf32>, %[[B:.*]]: tensor<2x8x5xf32>) -> tensor<2x5xf32>
// CHECK: %[[R:.*]] = kiln.reshape %[[A]] : tensor<8xf32> -> tensor<1x8xf32>
// CHECK: %[[M:.*]] = kiln.matmul %[[R]], %[[B]] : (tensor<1x8xf32>, tensor<2x8x5xf32>) -> tensor<2x1x5xf32>
// CHECK: %[[Y:.*]] = kiln.reshape %[[M]] : tensor<2x1x5xf32> -> tensor<2x5xf32>
// CHECK: return %[[Y]]
func.func @matmul_vec_lhs(%a: tensor<8xf32>, %b: tensor<2x8x5xf32>) -> tensor<2x5xf32> {
  %0 = onnx.node "MatMul"(%a, %b) opset 13 {} : (tensor<8xf32>, tensor<2x8x5xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

// A 1-D rhs is promoted to [K, 1]: [3,4,8] x [8] -> [3,4].
// CHECK-LABEL: func.func @matmul_vec_rhs
// CHECK-SAME: (%[[A:.*]]: tensor<3x4x8xf32>, %[[B:.*]]: tensor<8xf32>) -> tensor<3x4xf32>
// CHECK: %[[R:.*]] = kiln.reshape %[[B]] : tensor<8xf32> -> tensor<8x1xf32>
// CHECK: %[[M:.*]] = kiln.matmul %[[A]], %[[R]] : (tensor<3x4x8xf32>, tensor<8x1xf32>) -> tensor<3x4x1xf32>
// CHECK: %[[Y:.*]] = kiln.reshape %[[M]] : tensor<3x4x1xf32> -> tensor<3x4xf32>
// CHECK: return %[[Y]]
func.func @matmul_vec_rhs(%a: tensor<3x4x8xf32>, %b: tensor<8xf32>) -> tensor<3x4xf32> {
  %0 = onnx.node "MatMul"(%a, %b) opset 9 {} : (tensor<3x4x8xf32>, tensor<8xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// Two vectors give a scalar (a dot product).
// CHECK-LABEL: func.func @matmul_dot
// CHECK: kiln.reshape %{{.*}} : tensor<8xf32> -> tensor<1x8xf32>
// CHECK: kiln.reshape %{{.*}} : tensor<8xf32> -> tensor<8x1xf32>
// CHECK: %[[M:.*]] = kiln.matmul %{{.*}}, %{{.*}} : (tensor<1x8xf32>, tensor<8x1xf32>) -> tensor<1x1xf32>
// CHECK: %[[Y:.*]] = kiln.reshape %[[M]] : tensor<1x1xf32> -> tensor<f32>
// CHECK: return %[[Y]] : tensor<f32>
func.func @matmul_dot(%a: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<f32> {
  %0 = onnx.node "MatMul"(%a, %b) opset 13 {} : (tensor<8xf32>, tensor<8xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Gemm with transB and a [N] bias, as torch.nn.Linear exports.
// CHECK-LABEL: func.func @gemm_linear
// CHECK-SAME: (%[[X:.*]]: tensor<4x12xf32>, %[[W:.*]]: tensor<5x12xf32>, %[[B:.*]]: tensor<5xf32>) -> tensor<4x5xf32>
// CHECK: %[[M:.*]] = kiln.matmul %[[X]], %[[W]] {transpose_rhs = true} : (tensor<4x12xf32>, tensor<5x12xf32>) -> tensor<4x5xf32>
// CHECK: %[[Y:.*]] = kiln.add %[[M]], %[[B]] : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
// CHECK: return %[[Y]]
// CHECK-NOT: kiln.mul
func.func @gemm_linear(%x: tensor<4x12xf32>, %w: tensor<5x12xf32>, %b: tensor<5xf32>) -> tensor<4x5xf32> {
  %0 = onnx.node "Gemm"(%x, %w, %b) opset 13 {alpha = 1.0 : f32, beta = 1.0 : f32, transB = 1 : i64} : (tensor<4x12xf32>, tensor<5x12xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

// transA, alpha and beta: y = alpha * A^T B + beta * C, C of shape [M, 1].
// CHECK-LABEL: func.func @gemm_alpha_beta
// CHECK-SAME: (%[[A:.*]]: tensor<6x3xf32>, %[[B:.*]]: tensor<6x7xf32>, %[[C:.*]]: tensor<3x1xf32>)
// CHECK: %[[M:.*]] = kiln.matmul %[[A]], %[[B]] {transpose_lhs = true} : (tensor<6x3xf32>, tensor<6x7xf32>) -> tensor<3x7xf32>
// CHECK: %[[AL:.*]] = kiln.constant dense<5.000000e-01> : tensor<f32>
// CHECK: %[[MA:.*]] = kiln.mul %[[M]], %[[AL]] : (tensor<3x7xf32>, tensor<f32>) -> tensor<3x7xf32>
// CHECK: %[[BE:.*]] = kiln.constant dense<2.000000e+00> : tensor<f32>
// CHECK: %[[CB:.*]] = kiln.mul %[[C]], %[[BE]] : (tensor<3x1xf32>, tensor<f32>) -> tensor<3x1xf32>
// CHECK: %[[Y:.*]] = kiln.add %[[MA]], %[[CB]] : (tensor<3x7xf32>, tensor<3x1xf32>) -> tensor<3x7xf32>
// CHECK: return %[[Y]] : tensor<3x7xf32>
func.func @gemm_alpha_beta(%a: tensor<6x3xf32>, %b: tensor<6x7xf32>, %c: tensor<3x1xf32>) -> tensor<*xf32> {
  %0 = onnx.node "Gemm"(%a, %b, %c) opset 11 {alpha = 0.5 : f32, beta = 2.0 : f32, transA = 1 : i64} : (tensor<6x3xf32>, tensor<6x7xf32>, tensor<3x1xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

// Gemm without C (optional from opset 11), both transposed.
// CHECK-LABEL: func.func @gemm_no_c
// CHECK: %[[M:.*]] = kiln.matmul %{{.*}}, %{{.*}} {transpose_lhs = true, transpose_rhs = true} : (tensor<6x3xf32>, tensor<7x6xf32>) -> tensor<3x7xf32>
// CHECK-NEXT: return %[[M]]
func.func @gemm_no_c(%a: tensor<6x3xf32>, %b: tensor<7x6xf32>) -> tensor<*xf32> {
  %none = onnx.none
  %0 = onnx.node "Gemm"(%a, %b, %none) opset 13 {transA = 1 : i64, transB = 1 : i64} : (tensor<6x3xf32>, tensor<7x6xf32>, none) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

// ReduceSumSquare: axes an attribute through opset 17.
// CHECK-LABEL: func.func @reduce_sum_square
// CHECK: kiln.reduce_sum_square %{{.*}} {axes = array<i64: 0, 2>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<3xf32>
// CHECK-NOT: onnx.
func.func @reduce_sum_square(%x: tensor<2x3x4xf32>) -> tensor<3xf32> {
  %0 = onnx.node "ReduceSumSquare"(%x) opset 13 {axes = [0, -1], keepdims = 0 : i64} : (tensor<2x3x4xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// ReduceSum at opset 11 takes axes as an attribute (negative axes count
// from the end); at opset 13 as an input.
// CHECK-LABEL: func.func @reduce_sum
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK: %[[R0:.*]] = kiln.reduce_sum %[[X]] {axes = array<i64: 1, 2>} : (tensor<2x3x4xf32>) -> tensor<2x1x1xf32>
// CHECK: %[[R1:.*]] = kiln.reduce_sum %[[X]] {axes = array<i64: 0, 2>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<3xf32>
// CHECK: %[[R2:.*]] = kiln.reduce_sum %[[X]] {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<f32>
// CHECK: return %[[R0]], %[[R1]], %[[R2]], %[[X]]
// CHECK-NOT: onnx.
func.func @reduce_sum(%x: tensor<2x3x4xf32>) -> (tensor<2x1x1xf32>, tensor<3xf32>, tensor<f32>, tensor<2x3x4xf32>) {
  %0 = onnx.node "ReduceSum"(%x) opset 11 {axes = [-1, 1]} : (tensor<2x3x4xf32>) -> tensor<2x1x1xf32>
  %axes = onnx.constant dense<[2, 0]> : tensor<2xi64>
  %1 = onnx.node "ReduceSum"(%x, %axes) opset 13 {keepdims = 0 : i64} : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<3xf32>
  // No axes: all of them.
  %2 = onnx.node "ReduceSum"(%x) opset 13 {keepdims = 0 : i64} : (tensor<2x3x4xf32>) -> tensor<f32>
  // No axes with noop_with_empty_axes: the identity.
  %3 = onnx.node "ReduceSum"(%x) opset 13 {noop_with_empty_axes = 1 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %0, %1, %2, %3 : tensor<2x1x1xf32>, tensor<3xf32>, tensor<f32>, tensor<2x3x4xf32>
}

// -----

// ReduceMean/Max/Min take axes as an attribute through opset 17 and as an
// input from 18.
// CHECK-LABEL: func.func @reduce_mean_max_min
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK: %[[M0:.*]] = kiln.reduce_mean %[[X]] {axes = array<i64: 2>} : (tensor<2x3x4xf32>) -> tensor<2x3x1xf32>
// CHECK: %[[M1:.*]] = kiln.reduce_mean %[[X]] {axes = array<i64: 1>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<2x4xf32>
// CHECK: %[[MX:.*]] = kiln.reduce_max %[[X]] {axes = array<i64: 0>} : (tensor<2x3x4xf32>) -> tensor<1x3x4xf32>
// CHECK: %[[MN:.*]] = kiln.reduce_min %[[X]] {axes = array<i64: 0, 1, 2>} : (tensor<2x3x4xf32>) -> tensor<1x1x1xf32>
// CHECK: %[[MN2:.*]] = kiln.reduce_min %[[X]] {axes = array<i64: 1>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<2x4xf32>
// CHECK: return %[[M0]], %[[M1]], %[[MX]], %[[MN]], %[[MN2]]
func.func @reduce_mean_max_min(%x: tensor<2x3x4xf32>) -> (tensor<2x3x1xf32>, tensor<2x4xf32>, tensor<*xf32>, tensor<1x1x1xf32>, tensor<*xf32>) {
  %0 = onnx.node "ReduceMean"(%x) opset 13 {axes = [-1]} : (tensor<2x3x4xf32>) -> tensor<2x3x1xf32>
  %a1 = onnx.constant dense<[1]> : tensor<1xi64>
  %1 = onnx.node "ReduceMean"(%x, %a1) opset 18 {keepdims = 0 : i64} : (tensor<2x3x4xf32>, tensor<1xi64>) -> tensor<2x4xf32>
  %2 = onnx.node "ReduceMax"(%x) opset 13 {axes = [0]} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %3 = onnx.node "ReduceMin"(%x) opset 13 {} : (tensor<2x3x4xf32>) -> tensor<1x1x1xf32>
  %4 = onnx.node "ReduceMin"(%x, %a1) opset 18 {keepdims = 0 : i64} : (tensor<2x3x4xf32>, tensor<1xi64>) -> tensor<*xf32>
  return %0, %1, %2, %3, %4 : tensor<2x3x1xf32>, tensor<2x4xf32>, tensor<*xf32>, tensor<1x1x1xf32>, tensor<*xf32>
}

// -----

// ArgMax: axis defaults to 0 and keepdims to 1; results are i64.
// CHECK-LABEL: func.func @argmax
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK: %[[A0:.*]] = kiln.argmax %[[X]] {axis = 0 : i64} : (tensor<2x3x4xf32>) -> tensor<1x3x4xi64>
// CHECK: %[[A1:.*]] = kiln.argmax %[[X]] {axis = 2 : i64, keepdims = false, select_last_index = true} : (tensor<2x3x4xf32>) -> tensor<2x3xi64>
// CHECK: return %[[A0]], %[[A1]]
func.func @argmax(%x: tensor<2x3x4xf32>) -> (tensor<*xi64>, tensor<2x3xi64>) {
  %0 = onnx.node "ArgMax"(%x) opset 11 {} : (tensor<2x3x4xf32>) -> tensor<*xi64>
  %1 = onnx.node "ArgMax"(%x) opset 13 {axis = -1 : i64, keepdims = 0 : i64, select_last_index = 1 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3xi64>
  return %0, %1 : tensor<*xi64>, tensor<2x3xi64>
}

// -----

// Softmax and LogSoftmax from opset 13 work along `axis` (default -1).
// CHECK-LABEL: func.func @softmax_opset13
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK: %[[S0:.*]] = kiln.softmax %[[X]] {axis = 2 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// CHECK: %[[S1:.*]] = kiln.softmax %[[X]] {axis = 1 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// CHECK: %[[L0:.*]] = kiln.log_softmax %[[X]] {axis = 2 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// CHECK: %[[L1:.*]] = kiln.log_softmax %[[X]] {axis = 0 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// CHECK: return %[[S0]], %[[S1]], %[[L0]], %[[L1]]
// CHECK-NOT: kiln.reshape
func.func @softmax_opset13(%x: tensor<2x3x4xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<2x3x4xf32>) {
  %0 = onnx.node "Softmax"(%x) opset 13 {} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %1 = onnx.node "Softmax"(%x) opset 13 {axis = 1 : i64} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %2 = onnx.node "LogSoftmax"(%x) opset 13 {axis = -1 : i64} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %3 = onnx.node "LogSoftmax"(%x) opset 13 {axis = 0 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %0, %1, %2, %3 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<2x3x4xf32>
}

// -----

// Before opset 13 the input is coerced to 2-D [prod(d < axis), prod(d >= axis)]
// (axis default 1) and normalised along the second dimension.
// CHECK-LABEL: func.func @softmax_opset11
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK: %[[F:.*]] = kiln.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<2x12xf32>
// CHECK: %[[S:.*]] = kiln.softmax %[[F]] {axis = 1 : i64} : (tensor<2x12xf32>) -> tensor<2x12xf32>
// CHECK: %[[Y:.*]] = kiln.reshape %[[S]] : tensor<2x12xf32> -> tensor<2x3x4xf32>
// CHECK: %[[F2:.*]] = kiln.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<1x24xf32>
// CHECK: %[[L:.*]] = kiln.log_softmax %[[F2]] {axis = 1 : i64} : (tensor<1x24xf32>) -> tensor<1x24xf32>
// CHECK: %[[Y2:.*]] = kiln.reshape %[[L]] : tensor<1x24xf32> -> tensor<2x3x4xf32>
// CHECK: return %[[Y]], %[[Y2]]
func.func @softmax_opset11(%x: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<*xf32>) {
  %0 = onnx.node "Softmax"(%x) opset 11 {} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %1 = onnx.node "LogSoftmax"(%x) opset 11 {axis = 0 : i64} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  return %0, %1 : tensor<2x3x4xf32>, tensor<*xf32>
}

// -----

// Before opset 13, an axis that is the last one needs no reshape.
// CHECK-LABEL: func.func @softmax_opset11_last
// CHECK-SAME: (%[[X:.*]]: tensor<4x10xf32>)
// CHECK-NOT: kiln.reshape
// CHECK: %[[S:.*]] = kiln.softmax %[[X]] {axis = 1 : i64} : (tensor<4x10xf32>) -> tensor<4x10xf32>
// CHECK: %[[L:.*]] = kiln.log_softmax %[[X]] {axis = 1 : i64} : (tensor<4x10xf32>) -> tensor<4x10xf32>
// CHECK-NOT: kiln.reshape
// CHECK: return %[[S]], %[[L]]
func.func @softmax_opset11_last(%x: tensor<4x10xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
  %0 = onnx.node "Softmax"(%x) opset 11 {} : (tensor<4x10xf32>) -> tensor<*xf32>
  %1 = onnx.node "LogSoftmax"(%x) opset 1 {axis = -1 : i64} : (tensor<4x10xf32>) -> tensor<*xf32>
  return %0, %1 : tensor<*xf32>, tensor<*xf32>
}

// -----

// ReduceL1 = sum |x|, ReduceL2 = sqrt(sum x^2), ReduceLogSum = log(sum x),
// ReduceLogSumExp = log(sum exp(x - max)) + max.
// CHECK-LABEL: func.func @reduce_composites
// CHECK: %[[A:.*]] = kiln.abs %[[X:[^ ]*]]
// CHECK: kiln.reduce_sum %[[A]] {axes = array<i64: 1>, keepdims = false}
// CHECK: %[[SS:.*]] = kiln.reduce_sum_square %[[X]] {axes = array<i64: 1>, keepdims = false}
// CHECK: kiln.sqrt %[[SS]]
// CHECK: %[[S:.*]] = kiln.reduce_sum %[[X]] {axes = array<i64: 1>, keepdims = false}
// CHECK: kiln.log %[[S]]
// CHECK: %[[M:.*]] = kiln.reduce_max %[[X]] {axes = array<i64: 1>}
// CHECK: %[[D:.*]] = kiln.sub %[[X]], %[[M]]
// CHECK: %[[E:.*]] = kiln.exp %[[D]]
// CHECK: %[[SE:.*]] = kiln.reduce_sum %[[E]] {axes = array<i64: 1>, keepdims = false}
// CHECK: %[[L:.*]] = kiln.log %[[SE]]
// CHECK: %[[MR:.*]] = kiln.reshape %[[M]]
// CHECK: kiln.add %[[L]], %[[MR]]
// CHECK-NOT: onnx.
func.func @reduce_composites(%x: tensor<2x3xf32>) -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {
  %0 = onnx.node "ReduceL1"(%x) opset 13 {axes = [1], keepdims = 0 : i64} : (tensor<2x3xf32>) -> tensor<2xf32>
  %1 = onnx.node "ReduceL2"(%x) opset 13 {axes = [1], keepdims = 0 : i64} : (tensor<2x3xf32>) -> tensor<2xf32>
  %2 = onnx.node "ReduceLogSum"(%x) opset 13 {axes = [1], keepdims = 0 : i64} : (tensor<2x3xf32>) -> tensor<2xf32>
  %3 = onnx.node "ReduceLogSumExp"(%x) opset 13 {axes = [1], keepdims = 0 : i64} : (tensor<2x3xf32>) -> tensor<2xf32>
  return %0, %1, %2, %3 : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
}
