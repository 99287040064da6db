// RUN: kiln-opt %s --kiln-prune-channels="ratio=0.5 importance=index" -split-input-file | FileCheck %s
// RUN: not kiln-opt %s --kiln-prune-channels="ratio=1" -split-input-file 2>&1 | FileCheck %s --check-prefix=RATIO
// RUN: not kiln-opt %s --kiln-prune-channels -split-input-file 2>&1 | FileCheck %s --check-prefix=VALUES

// conv1 (4 channels) -> BatchNorm -> ReLU -> conv2 (6 channels) -> flatten
// -> Linear to the 3 logits. Half of conv1's channels go (its weight, bias,
// the BatchNorm's four parameters, conv2's input channels), half of conv2's
// (its weight and bias, and the Linear's rows: a block of 2x2 = 4 per
// channel). The logits (a model output) and the input keep their shapes.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: tensor<2x1x4x4xf32> {onnx.name = "x"}
// CHECK-SAME: tensor<2x1x3x3xf32> {kiln.param, onnx.name = "w1"}
// CHECK-SAME: tensor<2x1x1xf32> {kiln.param, onnx.name = "b1"}
// CHECK-SAME: tensor<2xf32> {kiln.param, onnx.name = "s"}
// CHECK-SAME: tensor<2xf32> {kiln.param, onnx.name = "rv"}
// CHECK-SAME: tensor<3x2x3x3xf32> {kiln.param, onnx.name = "w2"}
// CHECK-SAME: tensor<3x1x1xf32> {kiln.param, onnx.name = "b2"}
// CHECK-SAME: tensor<12x3xf32> {kiln.param, onnx.name = "w3"}
// CHECK-SAME: -> (tensor<f32> {kiln.loss, onnx.name = "loss"}, tensor<2x3xf32> {onnx.name = "logits"})
// CHECK: kiln.conv {{.*}} -> tensor<2x2x4x4xf32>
// CHECK: kiln.add {{.*}} -> tensor<2x2x4x4xf32>
// CHECK: kiln.batch_norm_train {{.*}} -> (tensor<2x2x4x4xf32>, tensor<2xf32>, tensor<2xf32>)
// CHECK: kiln.conv {{.*}} : (tensor<2x2x4x4xf32>, tensor<3x2x3x3xf32>) -> tensor<2x3x2x2xf32>
// CHECK: kiln.reshape {{.*}} : tensor<2x3x2x2xf32> -> tensor<2x12xf32>
// CHECK: kiln.matmul {{.*}} : (tensor<2x12xf32>, tensor<12x3xf32>) -> tensor<2x3xf32>
func.func @forward(%x: tensor<2x1x4x4xf32> {onnx.name = "x"},
                   %labels: tensor<2xi64> {kiln.labels, onnx.name = "labels"},
                   %w1: tensor<4x1x3x3xf32> {kiln.param, onnx.name = "w1"},
                   %b1: tensor<4x1x1xf32> {kiln.param, onnx.name = "b1"},
                   %s: tensor<4xf32> {kiln.param, onnx.name = "s"},
                   %bb: tensor<4xf32> {kiln.param, onnx.name = "bb"},
                   %rm: tensor<4xf32> {kiln.param, onnx.name = "rm"},
                   %rv: tensor<4xf32> {kiln.param, onnx.name = "rv"},
                   %w2: tensor<6x4x3x3xf32> {kiln.param, onnx.name = "w2"},
                   %b2: tensor<6x1x1xf32> {kiln.param, onnx.name = "b2"},
                   %w3: tensor<24x3xf32> {kiln.param, onnx.name = "w3"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"}, tensor<2x3xf32> {onnx.name = "logits"}) {
  %c1 = kiln.conv %x, %w1 {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, groups = 1 : i64} : (tensor<2x1x4x4xf32>, tensor<4x1x3x3xf32>) -> tensor<2x4x4x4xf32>
  %a1 = kiln.add %c1, %b1 : (tensor<2x4x4x4xf32>, tensor<4x1x1xf32>) -> tensor<2x4x4x4xf32>
  %n:3 = kiln.batch_norm_train %a1, %s, %bb, %rm, %rv {epsilon = 1.0e-05 : f32, momentum = 0.9 : f32} : (tensor<2x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>)
  %r1 = kiln.relu %n#0 : tensor<2x4x4x4xf32>
  %c2 = kiln.conv %r1, %w2 {strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, groups = 1 : i64} : (tensor<2x4x4x4xf32>, tensor<6x4x3x3xf32>) -> tensor<2x6x2x2xf32>
  %a2 = kiln.add %c2, %b2 : (tensor<2x6x2x2xf32>, tensor<6x1x1xf32>) -> tensor<2x6x2x2xf32>
  %f = kiln.reshape %a2 : tensor<2x6x2x2xf32> -> tensor<2x24xf32>
  %y = kiln.matmul %f, %w3 : (tensor<2x24xf32>, tensor<24x3xf32>) -> tensor<2x3xf32>
  %l = kiln.softmax_cross_entropy %y, %labels {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
  return %l, %y : tensor<f32>, tensor<2x3xf32>
}

// -----

// A residual: the two branches' channels (wa's and wb's outputs, wb's
// input) are one class, pruned together; wc's features are another; a
// LayerNorm over wd's features keeps that class whole.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: tensor<8x2xf32> {kiln.param, onnx.name = "wa"}
// CHECK-SAME: tensor<2x2xf32> {kiln.param, onnx.name = "wb"}
// CHECK-SAME: tensor<2x3xf32> {kiln.param, onnx.name = "wc"}
// CHECK-SAME: tensor<3x6xf32> {kiln.param, onnx.name = "wd"}
// CHECK-SAME: tensor<6xf32> {kiln.param, onnx.name = "g"}
// CHECK: kiln.add {{.*}} : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
func.func @forward(%x: tensor<3x8xf32> {onnx.name = "x"},
                   %wa: tensor<8x4xf32> {kiln.param, onnx.name = "wa"},
                   %wb: tensor<4x4xf32> {kiln.param, onnx.name = "wb"},
                   %wc: tensor<4x6xf32> {kiln.param, onnx.name = "wc"},
                   %wd: tensor<6x6xf32> {kiln.param, onnx.name = "wd"},
                   %g: tensor<6xf32> {kiln.param, onnx.name = "g"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"}) {
  %h = kiln.matmul %x, %wa : (tensor<3x8xf32>, tensor<8x4xf32>) -> tensor<3x4xf32>
  %k = kiln.matmul %h, %wb : (tensor<3x4xf32>, tensor<4x4xf32>) -> tensor<3x4xf32>
  %r = kiln.add %h, %k : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %z = kiln.matmul %r, %wc : (tensor<3x4xf32>, tensor<4x6xf32>) -> tensor<3x6xf32>
  %zz = kiln.matmul %z, %wd : (tensor<3x6xf32>, tensor<6x6xf32>) -> tensor<3x6xf32>
  %n:3 = kiln.layer_norm %zz, %g, %g {axis = 1 : i64, epsilon = 1.0e-05 : f32} : (tensor<3x6xf32>, tensor<6xf32>, tensor<6xf32>) -> (tensor<3x6xf32>, tensor<3x1xf32>, tensor<3x1xf32>)
  %l = kiln.reduce_sum %n#0 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<3x6xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A concat of two branches' channels (4 and 2): each branch is pruned on
// its own (4 -> 2, 2 -> 1); the concat's result and the conv that reads it
// keep the kept channels at their offsets (0, 1 and 4: 3 of 6).
// CHECK-LABEL: func.func @forward
// CHECK-SAME: tensor<2x1x3x3xf32> {kiln.param, onnx.name = "wa"}
// CHECK-SAME: tensor<1x1x3x3xf32> {kiln.param, onnx.name = "wb"}
// CHECK-SAME: tensor<2x3x3x3xf32> {kiln.param, onnx.name = "wc"}
// CHECK-SAME: tensor<32x1xf32> {kiln.param, onnx.name = "wf"}
// CHECK: kiln.concat {{.*}} : (tensor<2x2x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x3x4x4xf32>
func.func @forward(%x: tensor<2x1x4x4xf32> {onnx.name = "x"},
                   %wa: tensor<4x1x3x3xf32> {kiln.param, onnx.name = "wa"},
                   %wb: tensor<2x1x3x3xf32> {kiln.param, onnx.name = "wb"},
                   %wc: tensor<4x6x3x3xf32> {kiln.param, onnx.name = "wc"},
                   %wf: tensor<64x3xf32> {kiln.param, onnx.name = "wf"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"}) {
  %a = kiln.conv %x, %wa {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, groups = 1 : i64} : (tensor<2x1x4x4xf32>, tensor<4x1x3x3xf32>) -> tensor<2x4x4x4xf32>
  %b = kiln.conv %x, %wb {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, groups = 1 : i64} : (tensor<2x1x4x4xf32>, tensor<2x1x3x3xf32>) -> tensor<2x2x4x4xf32>
  %cat = kiln.concat %a, %b {axis = 1 : i64} : (tensor<2x4x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x6x4x4xf32>
  %c = kiln.conv %cat, %wc {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, groups = 1 : i64} : (tensor<2x6x4x4xf32>, tensor<4x6x3x3xf32>) -> tensor<2x4x4x4xf32>
  %f = kiln.reshape %c : tensor<2x4x4x4xf32> -> tensor<2x64xf32>
  %y = kiln.matmul %f, %wf : (tensor<2x64xf32>, tensor<64x3xf32>) -> tensor<2x3xf32>
  %l = kiln.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// RATIO: --kiln-prune-channels: ratio must be in [0, 1), got 1
// VALUES: --kiln-prune-channels: importance=l1 needs the parameters' values
