// RUN: kiln-opt %s -split-input-file --kiln-attach-loss="loss=output loss-output=l" -verify-diagnostics | FileCheck %s

// The model computes its loss (ONNX Runtime training style): it moves first.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> (tensor<f32> {kiln.loss, onnx.name = "loss"}, tensor<4x10xf32> {onnx.name = "y"})
// CHECK: %[[L:.*]] = kiln.reshape %{{.*}} : tensor<1xf32> -> tensor<f32>
// CHECK: return %[[L]], %{{.*}}
func.func @forward(%x: tensor<4x10xf32>) -> (tensor<4x10xf32> {onnx.name = "y"}, tensor<1xf32> {onnx.name = "l"}) {
  %s = kiln.reduce_sum %x {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x10xf32>) -> tensor<f32>
  %r = kiln.reshape %s : tensor<f32> -> tensor<1xf32>
  return %x, %r : tensor<4x10xf32>, tensor<1xf32>
}

// -----

// expected-error @+1 {{--loss-output: output 'l' has type 'tensor<4xf32>'; the loss must be a floating-point scalar}}
func.func @forward(%x: tensor<4xf32>) -> (tensor<4xf32> {onnx.name = "l"}) {
  return %x : tensor<4xf32>
}
