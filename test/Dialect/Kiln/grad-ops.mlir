// RUN: kiln-opt %s | kiln-opt | FileCheck %s

// The backward and optimizer ops round-trip.
// CHECK-LABEL: func.func @grads
func.func @grads(%dy: tensor<2x16x8x8xf32>, %x: tensor<2x3x8x8xf32>, %w: tensor<16x3x3x3xf32>,
                 %ids: tensor<2x4xi64>, %de: tensor<2x4x8xf32>, %dl: tensor<f32>,
                 %z: tensor<4x10xf32>, %lab: tensor<4xi64>, %m: tensor<4x10xi1>) {
  // CHECK: kiln.conv_input_grad
  %a = kiln.conv_input_grad %dy, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>,
                                     padding = array<i64: 1, 1, 1, 1>, groups = 1 : i64}
      : (tensor<2x16x8x8xf32>, tensor<16x3x3x3xf32>) -> tensor<2x3x8x8xf32>
  // CHECK: kiln.conv_weight_grad
  %b = kiln.conv_weight_grad %x, %dy {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>,
                                      padding = array<i64: 1, 1, 1, 1>, groups = 1 : i64}
      : (tensor<2x3x8x8xf32>, tensor<2x16x8x8xf32>) -> tensor<16x3x3x3xf32>
  // CHECK: kiln.gather_grad
  %c = kiln.gather_grad %de, %ids {axis = 0 : i64} : (tensor<2x4x8xf32>, tensor<2x4xi64>) -> tensor<100x8xf32>
  // CHECK: kiln.softmax_cross_entropy_grad
  %d = kiln.softmax_cross_entropy_grad %dl, %z, %lab : (tensor<f32>, tensor<4x10xf32>, tensor<4xi64>) -> tensor<4x10xf32>
  // CHECK: kiln.relu_grad %{{.*}}, %{{.*}} : tensor<4x10xf32>
  %e = kiln.relu_grad %z, %z : tensor<4x10xf32>
  // CHECK: kiln.dropout_grad
  %f = kiln.dropout_grad %z, %m {ratio = 5.0e-01 : f32} : (tensor<4x10xf32>, tensor<4x10xi1>) -> tensor<4x10xf32>
  // CHECK: kiln.slice_grad
  %g = kiln.slice_grad %z {starts = array<i64: 0, 0>, limits = array<i64: 4, 20>, strides = array<i64: 1, 2>}
      : (tensor<4x10xf32>) -> tensor<4x20xf32>
  return
}
