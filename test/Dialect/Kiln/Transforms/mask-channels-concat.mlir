// RUN: kiln-opt %s --kiln-prune-channels="ratio=0.5 at=2" --kiln-autodiff --kiln-attach-optimizer=optimizer=sgd --kiln-mask-channels | FileCheck %s

// A concat along the channels at --prune-at: each branch is a class with
// its own mask; the concat's result is a class of parts (entries 0 and 1,
// 4 and 2 channels) without a mask, whose readers (w3's rows) are masked by
// the parts' masks side by side.
// CHECK: module attributes {kiln.channel_classes = [{{.*}}producers = ["w1"]}, {{.*}}producers = ["w2"]}, {at = 2 : i64, axes = array<i64: 0>, blocks = array<i64: 1>, channels = 6 : i64, keep = 3 : i64, params = ["w3"], part_channels = array<i64: 4, 2>, parts = array<i64: 0, 1>}]}
// CHECK-LABEL: func.func @train_step
// CHECK: %[[W3:.*]] = kiln.sgd_update {{.*}} -> tensor<6x3xf32>
// CHECK: %[[P1:.*]] = kiln.channel_prune {{.*}} -> tensor<4xf32>
// CHECK: %[[P2:.*]] = kiln.channel_prune {{.*}} -> tensor<2xf32>
// CHECK: %[[CAT:.*]] = kiln.concat %[[P1]], %[[P2]] {axis = 0 : i64} : (tensor<4xf32>, tensor<2xf32>) -> tensor<6xf32>
// CHECK: kiln.sub %{{.*}}, %[[CAT]]
// CHECK: kiln.mul %[[W3]], %{{.*}} : (tensor<6x3xf32>, tensor<6x1xf32>) -> tensor<6x3xf32>
// CHECK: return {{.*}}%[[P1]], %[[P2]] : {{.*}}tensor<4xf32>, tensor<2xf32>
func.func @forward(%x: tensor<2x8xf32> {onnx.name = "x"},
                   %t: tensor<2x3xf32> {onnx.name = "t"},
                   %w1: tensor<8x4xf32> {kiln.param, onnx.name = "w1"},
                   %w2: tensor<8x2xf32> {kiln.param, onnx.name = "w2"},
                   %w3: tensor<6x3xf32> {kiln.param, onnx.name = "w3"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"}) {
  %h1 = kiln.matmul %x, %w1 : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %h2 = kiln.matmul %x, %w2 : (tensor<2x8xf32>, tensor<8x2xf32>) -> tensor<2x2xf32>
  %c = kiln.concat %h1, %h2 {axis = 1 : i64} : (tensor<2x4xf32>, tensor<2x2xf32>) -> tensor<2x6xf32>
  %r = kiln.relu %c : tensor<2x6xf32>
  %y = kiln.matmul %r, %w3 : (tensor<2x6xf32>, tensor<6x3xf32>) -> tensor<2x3xf32>
  %l = kiln.mse_loss %y, %t : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
