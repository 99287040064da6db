// RUN: kiln-opt %s -split-input-file --kiln-attach-loss -verify-diagnostics | FileCheck %s
// RUN: kiln-opt %s -split-input-file --kiln-attach-loss=loss=mse -verify-diagnostics | FileCheck %s --check-prefix=MSE

// Cross-entropy: a labels argument after the data inputs, class on the last
// axis, the loss first; the model's output stays.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[X:.*]]: tensor<4x3x10xf32> {onnx.name = "x"}, %[[L:.*]]: tensor<4x3xi64> {kiln.labels, onnx.name = "labels"}, %{{.*}}: tensor<10xf32> {kiln.param, onnx.name = "b"})
// CHECK-SAME: -> (tensor<f32> {kiln.loss, onnx.name = "loss"}, tensor<4x3x10xf32> {onnx.name = "logits"})
// CHECK: %[[Y:.*]] = kiln.add
// CHECK: %[[LOSS:.*]] = kiln.softmax_cross_entropy %[[Y]], %[[L]] {class_axis = 2 : i64}
// CHECK: return %[[LOSS]], %[[Y]]
// MSE-LABEL: func.func @forward
// MSE-SAME: %{{.*}}: tensor<4x3x10xf32> {kiln.labels, onnx.name = "labels"}
// MSE: kiln.mse_loss %{{.*}}, %{{.*}} :
func.func @forward(%x: tensor<4x3x10xf32> {onnx.name = "x"}, %b: tensor<10xf32> {kiln.param, onnx.name = "b"})
    -> (tensor<4x3x10xf32> {onnx.name = "logits"}) {
  %0 = kiln.add %x, %b : (tensor<4x3x10xf32>, tensor<10xf32>) -> tensor<4x3x10xf32>
  return %0 : tensor<4x3x10xf32>
}

// -----

// expected-error @+1 {{the model has 2 outputs (a, b); choose one with --logits}}
func.func @forward(%x: tensor<4x10xf32>) -> (tensor<4x10xf32> {onnx.name = "a"}, tensor<4x10xf32> {onnx.name = "b"}) {
  return %x, %x : tensor<4x10xf32>, tensor<4x10xf32>
}

// -----

// expected-error @+1 {{--labels: the model already has an input or parameter named 'labels'}}
func.func @forward(%x: tensor<4x10xf32> {onnx.name = "labels"}) -> tensor<4x10xf32> {
  return %x : tensor<4x10xf32>
}
