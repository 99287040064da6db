// RUN: kiln-opt %s --kiln-prune-channels="ratio=0.5 at=2" --kiln-autodiff --kiln-attach-optimizer=optimizer=sgd --kiln-mask-channels | FileCheck %s

// Channels tied by a residual add: one class with two producers (w1's and
// w2's outputs), whose channel_prune ranks them by the summed L1 norms; its
// result is the [C] mask, not a producer's type (the op's operands start
// with the variadic producers).
// CHECK: module attributes {kiln.channel_classes = [{at = 2 : i64, {{.*}}channels = 4 : i64, keep = 2 : i64, {{.*}}producers = ["w1", "w2"]}]}
// CHECK-LABEL: func.func @train_step
// CHECK: %[[W1:.*]] = kiln.sgd_update {{.*}} -> tensor<8x4xf32>
// CHECK: %[[W2:.*]] = kiln.sgd_update {{.*}} -> tensor<8x4xf32>
// CHECK: kiln.channel_prune %[[W1]], %[[W2]], %{{.*}}, %{{.*}} {at = 2 : i64, axes = array<i64: 1, 1>, blocks = array<i64: 1, 1>, keep = 2 : i64} : (tensor<8x4xf32>, tensor<8x4xf32>, tensor<4xf32>, tensor<i64>) -> tensor<4xf32>
func.func @forward(%x: tensor<2x8xf32> {onnx.name = "x"},
                   %t: tensor<2x3xf32> {onnx.name = "t"},
                   %w1: tensor<8x4xf32> {kiln.param, onnx.name = "w1"},
                   %w2: tensor<8x4xf32> {kiln.param, onnx.name = "w2"},
                   %w3: tensor<4x3xf32> {kiln.param, onnx.name = "w3"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"}) {
  %h1 = kiln.matmul %x, %w1 : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %h2 = kiln.matmul %x, %w2 : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %s = kiln.add %h1, %h2 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %r = kiln.relu %s : tensor<2x4xf32>
  %y = kiln.matmul %r, %w3 : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %l = kiln.mse_loss %y, %t : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
