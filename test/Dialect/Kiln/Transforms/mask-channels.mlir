// RUN: kiln-opt %s --kiln-prune-channels="ratio=0.5 at=3" --kiln-autodiff --kiln-attach-optimizer=optimizer=momentum --kiln-mask-channels | FileCheck %s
// RUN: not kiln-opt %s --kiln-mask-channels 2>&1 | FileCheck %s --check-prefix=NOCLASSES
// RUN: kiln-opt %s --kiln-prune-channels="ratio=0.5 at=3" --kiln-autodiff --kiln-attach-optimizer=optimizer=momentum --kiln-mask-channels=select-only | FileCheck %s --check-prefix=SELECT

// select-only (what kiln-compile runs: the executable switches to the
// smaller plan after step S): the mask is chosen and returned, nothing is
// multiplied by it.
// SELECT-LABEL: func.func @train_step
// SELECT: %[[P:.*]] = kiln.channel_prune
// SELECT-NOT: kiln.mul
// SELECT: return {{.*}}%[[P]] :

// --prune-at 3: the shapes stay; the class (w1's outputs, b1, w2's inputs)
// is recorded, and after the updates a channel_prune at step index 3 (on
// w1's updated value) masks w1, b1 and w2 and their momentum buffers.
// CHECK: module attributes {kiln.channel_classes = [{at = 3 : i64, axes = array<i64: 1, 0, 0>, blocks = array<i64: 1, 1, 1>, channels = 4 : i64, keep = 2 : i64, params = ["w1", "b1", "w2"], producer_axes = array<i64: 1>, producer_blocks = array<i64: 1>, producers = ["w1"]}]}
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tensor<8x4xf32> {kiln.param, kiln.role = "weight", onnx.name = "w1"}
// CHECK-SAME: %[[Q:[^:]*]]: tensor<4xf32> {kiln.init = "zeros", kiln.param, kiln.role = "optimizer", onnx.name = "channels/0/pruned"}
// CHECK: %[[W1:[^,]*]], %[[M1:[^ ]*]] = kiln.momentum_update %arg{{[0-9]+}}, {{.*}} -> (tensor<8x4xf32>, tensor<8x4xf32>)
// CHECK: %[[P:.*]] = kiln.channel_prune %[[W1]], %[[Q]], %{{.*}} {at = 3 : i64, axes = array<i64: 1>, blocks = array<i64: 1>, keep = 2 : i64}
// CHECK: %[[K:.*]] = kiln.sub %{{.*}}, %[[P]] : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK: %[[KR:.*]] = kiln.reshape %[[K]] : tensor<4xf32> -> tensor<1x4xf32>
// CHECK: kiln.mul %[[W1]], %[[KR]]
// CHECK: kiln.mul %[[M1]], %[[KR]]
// CHECK: return
// NOCLASSES: --kiln-mask-channels: needs @train_step and the classes --kiln-prune-channels at=S records
func.func @forward(%x: tensor<2x8xf32> {onnx.name = "x"},
                   %t: tensor<2x3xf32> {onnx.name = "t"},
                   %w1: tensor<8x4xf32> {kiln.param, onnx.name = "w1"},
                   %b1: tensor<4xf32> {kiln.param, onnx.name = "b1"},
                   %w2: tensor<4x3xf32> {kiln.param, onnx.name = "w2"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"}) {
  %h = kiln.matmul %x, %w1 : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %a = kiln.add %h, %b1 : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %r = kiln.relu %a : tensor<2x4xf32>
  %y = kiln.matmul %r, %w2 : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %l = kiln.mse_loss %y, %t : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
