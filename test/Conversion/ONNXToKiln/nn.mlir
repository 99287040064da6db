// RUN: kiln-opt %s --convert-onnx-to-kiln -split-input-file | FileCheck %s

// Conv 2-D, strided and padded, with a bias that becomes a broadcast add:
// (8 + 1 + 1 - 3) / 2 + 1 = 4.
// CHECK-LABEL: func.func @conv2d_bias
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x8x8xf32>, %[[W:.*]]: tensor<16x3x3x3xf32>, %[[B:.*]]: tensor<16xf32>) -> tensor<2x16x4x4xf32>
// CHECK: %[[C:.*]] = kiln.conv %[[X]], %[[W]] {dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x3x8x8xf32>, tensor<16x3x3x3xf32>) -> tensor<2x16x4x4xf32>
// CHECK: %[[RB:.*]] = kiln.reshape %[[B]] : tensor<16xf32> -> tensor<1x16x1x1xf32>
// CHECK: %[[Y:.*]] = kiln.add %[[C]], %[[RB]] : (tensor<2x16x4x4xf32>, tensor<1x16x1x1xf32>) -> tensor<2x16x4x4xf32>
// CHECK: return %[[Y]]
// CHECK-NOT: onnx.
func.func @conv2d_bias(%x: tensor<2x3x8x8xf32>, %w: tensor<16x3x3x3xf32>, %b: tensor<16xf32>) -> tensor<2x16x4x4xf32> {
  %0 = onnx.node "Conv"(%x, %w, %b) opset 11 {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]} : (tensor<2x3x8x8xf32>, tensor<16x3x3x3xf32>, tensor<16xf32>) -> tensor<2x16x4x4xf32>
  return %0 : tensor<2x16x4x4xf32>
}

// -----

// Conv 1-D with dilation 2: the kernel spans 5, 10 - 5 + 1 = 6.
// CHECK-LABEL: func.func @conv1d_dilated
// CHECK: kiln.conv %{{.*}}, %{{.*}} {dilations = array<i64: 2>, groups = 1 : i64, padding = array<i64: 0, 0>, strides = array<i64: 1>} : (tensor<1x4x10xf32>, tensor<6x4x3xf32>) -> tensor<1x6x6xf32>
func.func @conv1d_dilated(%x: tensor<1x4x10xf32>, %w: tensor<6x4x3xf32>) -> tensor<*xf32> {
  %0 = onnx.node "Conv"(%x, %w) opset 1 {dilations = [2]} : (tensor<1x4x10xf32>, tensor<6x4x3xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

// Grouped and depthwise convolution; asymmetric pads are
// [H_begin, W_begin, H_end, W_end].
// CHECK-LABEL: func.func @conv_groups
// CHECK-SAME: (%[[X:.*]]: tensor<1x6x5x5xf32>, %[[W:.*]]: tensor<6x2x3x3xf32>, %[[DW:.*]]: tensor<6x1x3x3xf32>)
// CHECK: %[[G:.*]] = kiln.conv %[[X]], %[[W]] {dilations = array<i64: 1, 1>, groups = 3 : i64, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x6x5x5xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x3x3xf32>
// CHECK: %[[D:.*]] = kiln.conv %[[X]], %[[DW]] {dilations = array<i64: 1, 1>, groups = 6 : i64, padding = array<i64: 1, 0, 1, 2>, strides = array<i64: 1, 2>} : (tensor<1x6x5x5xf32>, tensor<6x1x3x3xf32>) -> tensor<1x6x5x3xf32>
// CHECK: return %[[G]], %[[D]]
func.func @conv_groups(%x: tensor<1x6x5x5xf32>, %w: tensor<6x2x3x3xf32>, %dw: tensor<6x1x3x3xf32>) -> (tensor<1x6x3x3xf32>, tensor<*xf32>) {
  %0 = onnx.node "Conv"(%x, %w) opset 11 {group = 3 : i64} : (tensor<1x6x5x5xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x3x3xf32>
  %1 = onnx.node "Conv"(%x, %dw) opset 11 {group = 6 : i64, pads = [1, 0, 1, 2], strides = [1, 2]} : (tensor<1x6x5x5xf32>, tensor<6x1x3x3xf32>) -> tensor<*xf32>
  return %0, %1 : tensor<1x6x3x3xf32>, tensor<*xf32>
}

// -----

// auto_pad resolves to explicit pads: output ceil(in / stride), the total
// padding split evenly, the odd one at the end (SAME_UPPER) or the
// beginning (SAME_LOWER); VALID pads nothing.
// CHECK-LABEL: func.func @conv_auto_pad
// CHECK: kiln.conv %{{.*}}, %{{.*}} {dilations = array<i64: 1>, groups = 1 : i64, padding = array<i64: 1, 2>, strides = array<i64: 1>} : (tensor<1x1x7xf32>, tensor<1x1x4xf32>) -> tensor<1x1x7xf32>
// CHECK: kiln.conv %{{.*}}, %{{.*}} {dilations = array<i64: 1>, groups = 1 : i64, padding = array<i64: 2, 1>, strides = array<i64: 1>} : (tensor<1x1x7xf32>, tensor<1x1x4xf32>) -> tensor<1x1x7xf32>
// CHECK: kiln.conv %{{.*}}, %{{.*}} {dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x1x5x5xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x3x3xf32>
// CHECK: kiln.conv %{{.*}}, %{{.*}} {dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x1x5x5xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x3x3xf32>
// CHECK: kiln.conv %{{.*}}, %{{.*}} {dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x1x5x5xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x3x3xf32>
func.func @conv_auto_pad(%x: tensor<1x1x7xf32>, %w: tensor<1x1x4xf32>, %x2: tensor<1x1x5x5xf32>, %w2: tensor<1x1x2x2xf32>, %w3: tensor<1x1x3x3xf32>)
    -> (tensor<1x1x7xf32>, tensor<1x1x7xf32>, tensor<1x1x3x3xf32>, tensor<1x1x3x3xf32>, tensor<1x1x3x3xf32>) {
  %0 = onnx.node "Conv"(%x, %w) opset 11 {auto_pad = "SAME_UPPER"} : (tensor<1x1x7xf32>, tensor<1x1x4xf32>) -> tensor<1x1x7xf32>
  %1 = onnx.node "Conv"(%x, %w) opset 11 {auto_pad = "SAME_LOWER"} : (tensor<1x1x7xf32>, tensor<1x1x4xf32>) -> tensor<1x1x7xf32>
  %2 = onnx.node "Conv"(%x2, %w2) opset 11 {auto_pad = "SAME_UPPER", strides = [2, 2]} : (tensor<1x1x5x5xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x3x3xf32>
  %3 = onnx.node "Conv"(%x2, %w2) opset 11 {auto_pad = "SAME_LOWER", strides = [2, 2]} : (tensor<1x1x5x5xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x3x3xf32>
  %4 = onnx.node "Conv"(%x2, %w3) opset 11 {auto_pad = "VALID"} : (tensor<1x1x5x5xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x3x3xf32>
  return %0, %1, %2, %3, %4 : tensor<1x1x7xf32>, tensor<1x1x7xf32>, tensor<1x1x3x3xf32>, tensor<1x1x3x3xf32>, tensor<1x1x3x3xf32>
}

// -----

// ConvTranspose: 2 * (4 - 1) + 1 + 3 - 1 - 1 = 8; the weight is
// [C_in, C_out / group, k...]; bias as for Conv.
// CHECK-LABEL: func.func @conv_transpose
// CHECK-SAME: (%[[X:.*]]: tensor<1x4x4x4xf32>, %[[W:.*]]: tensor<4x2x3x3xf32>, %[[B:.*]]: tensor<2xf32>) -> tensor<1x2x8x8xf32>
// CHECK: %[[C:.*]] = kiln.conv_transpose %[[X]], %[[W]] {dilations = array<i64: 1, 1>, groups = 1 : i64, output_padding = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x4x4x4xf32>, tensor<4x2x3x3xf32>) -> tensor<1x2x8x8xf32>
// CHECK: %[[RB:.*]] = kiln.reshape %[[B]] : tensor<2xf32> -> tensor<1x2x1x1xf32>
// CHECK: %[[Y:.*]] = kiln.add %[[C]], %[[RB]] : (tensor<1x2x8x8xf32>, tensor<1x2x1x1xf32>) -> tensor<1x2x8x8xf32>
// CHECK: return %[[Y]]
func.func @conv_transpose(%x: tensor<1x4x4x4xf32>, %w: tensor<4x2x3x3xf32>, %b: tensor<2xf32>) -> tensor<1x2x8x8xf32> {
  %0 = onnx.node "ConvTranspose"(%x, %w, %b) opset 11 {strides = [2, 2], pads = [1, 1, 1, 1], output_padding = [1, 1]} : (tensor<1x4x4x4xf32>, tensor<4x2x3x3xf32>, tensor<2xf32>) -> tensor<1x2x8x8xf32>
  return %0 : tensor<1x2x8x8xf32>
}

// -----

// Grouped, dilated 1-D ConvTranspose: 2 groups of 3 output channels;
// (5 - 1) + (3 - 1) * 2 + 1 = 9.
// CHECK-LABEL: func.func @conv_transpose_group
// CHECK: kiln.conv_transpose %{{.*}}, %{{.*}} {dilations = array<i64: 2>, groups = 2 : i64, output_padding = array<i64: 0>, padding = array<i64: 0, 0>, strides = array<i64: 1>} : (tensor<1x4x5xf32>, tensor<4x3x3xf32>) -> tensor<1x6x9xf32>
func.func @conv_transpose_group(%x: tensor<1x4x5xf32>, %w: tensor<4x3x3xf32>) -> tensor<*xf32> {
  %0 = onnx.node "ConvTranspose"(%x, %w) opset 11 {group = 2 : i64, dilations = [2]} : (tensor<1x4x5xf32>, tensor<4x3x3xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

// ConvTranspose pads derived from output_shape or auto_pad (output
// in * stride): total = 2 * (3 - 1) + 3 - out. SAME_UPPER puts the odd pad
// at the end; SAME_LOWER and output_shape (auto_pad NOTSET) at the
// beginning, per the spec's equations. An output_shape past what the input
// covers becomes output_padding (ONNX's convtranspose_output_shape test).
// CHECK-LABEL: func.func @conv_transpose_output_shape
// CHECK: kiln.conv_transpose %{{.*}}, %{{.*}} {{{.*}}output_padding = array<i64: 0, 0>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x1x3x3xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x5x5xf32>
// CHECK: kiln.conv_transpose %{{.*}}, %{{.*}} {{{.*}}output_padding = array<i64: 0, 0>, padding = array<i64: 1, 1, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x1x3x3xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x6x6xf32>
// CHECK: kiln.conv_transpose %{{.*}}, %{{.*}} {{{.*}}output_padding = array<i64: 0, 0>, padding = array<i64: 0, 0, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x1x3x3xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x6x6xf32>
// CHECK: kiln.conv_transpose %{{.*}}, %{{.*}} {{{.*}}output_padding = array<i64: 0, 0>, padding = array<i64: 1, 1, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x1x3x3xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x6x6xf32>
// CHECK: kiln.conv_transpose %{{.*}}, %{{.*}} {{{.*}}output_padding = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 3, 2>} : (tensor<1x1x3x3xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x10x8xf32>
func.func @conv_transpose_output_shape(%x: tensor<1x1x3x3xf32>, %w: tensor<1x1x3x3xf32>, %w2: tensor<1x2x3x3xf32>)
    -> (tensor<1x1x5x5xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<1x2x10x8xf32>) {
  %0 = onnx.node "ConvTranspose"(%x, %w) opset 11 {strides = [2, 2], output_shape = [5, 5]} : (tensor<1x1x3x3xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x5x5xf32>
  %1 = onnx.node "ConvTranspose"(%x, %w) opset 11 {strides = [2, 2], output_shape = [6, 6]} : (tensor<1x1x3x3xf32>, tensor<1x1x3x3xf32>) -> tensor<*xf32>
  %2 = onnx.node "ConvTranspose"(%x, %w) opset 11 {strides = [2, 2], auto_pad = "SAME_UPPER"} : (tensor<1x1x3x3xf32>, tensor<1x1x3x3xf32>) -> tensor<*xf32>
  %3 = onnx.node "ConvTranspose"(%x, %w) opset 11 {strides = [2, 2], auto_pad = "SAME_LOWER"} : (tensor<1x1x3x3xf32>, tensor<1x1x3x3xf32>) -> tensor<*xf32>
  %4 = onnx.node "ConvTranspose"(%x, %w2) opset 11 {strides = [3, 2], output_shape = [10, 8]} : (tensor<1x1x3x3xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x10x8xf32>
  return %0, %1, %2, %3, %4 : tensor<1x1x5x5xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<1x2x10x8xf32>
}

// -----

// BatchNormalization in inference mode.
// CHECK-LABEL: func.func @batchnorm
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4x4xf32>, %[[S:.*]]: tensor<3xf32>, %[[B:.*]]: tensor<3xf32>, %[[M:.*]]: tensor<3xf32>, %[[V:.*]]: tensor<3xf32>)
// CHECK: %[[Y:.*]] = kiln.batch_norm %[[X]], %[[S]], %[[B]], %[[M]], %[[V]] {epsilon = 1.000000e-03 : f32} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
// CHECK: return %[[Y]]
func.func @batchnorm(%x: tensor<2x3x4x4xf32>, %s: tensor<3xf32>, %b: tensor<3xf32>, %m: tensor<3xf32>, %v: tensor<3xf32>) -> tensor<2x3x4x4xf32> {
  %0 = onnx.node "BatchNormalization"(%x, %s, %b, %m, %v) opset 15 {epsilon = 1.0e-3 : f32} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  return %0 : tensor<2x3x4x4xf32>
}

// -----

// training_mode = 1 (opset 14+): batch statistics, and the updated running
// mean and variance as outputs 1 and 2; epsilon defaults to 1e-5.
// CHECK-LABEL: func.func @batchnorm_train
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4x4xf32>, %[[S:.*]]: tensor<3xf32>, %[[B:.*]]: tensor<3xf32>, %[[M:.*]]: tensor<3xf32>, %[[V:.*]]: tensor<3xf32>)
// CHECK: %[[Y:.*]], %[[RM:.*]], %[[RV:.*]] = kiln.batch_norm_train %[[X]], %[[S]], %[[B]], %[[M]], %[[V]] {epsilon = 9.99999974E-6 : f32, momentum = 8.000000e-01 : f32} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
// CHECK: return %[[Y]], %[[RM]], %[[RV]]
func.func @batchnorm_train(%x: tensor<2x3x4x4xf32>, %s: tensor<3xf32>, %b: tensor<3xf32>, %m: tensor<3xf32>, %v: tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>) {
  %0:3 = onnx.node "BatchNormalization"(%x, %s, %b, %m, %v) opset 15 {training_mode = 1 : i64, momentum = 0.8 : f32} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
  return %0#0, %0#1, %0#2 : tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>
}

// -----

// Before opset 14, training mode is implied by a use of the running-stat
// outputs (momentum defaults to 0.9); without one it is inference.
// CHECK-LABEL: func.func @batchnorm_train_opset9
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x5xf32>, %[[S:.*]]: tensor<3xf32>, %[[B:.*]]: tensor<3xf32>, %[[M:.*]]: tensor<3xf32>, %[[V:.*]]: tensor<3xf32>)
// CHECK: %[[Y:.*]], %[[RM:.*]], %[[RV:.*]] = kiln.batch_norm_train %[[X]], %[[S]], %[[B]], %[[M]], %[[V]] {epsilon = 9.99999974E-6 : f32, momentum = 0.899999976 : f32} : (tensor<2x3x5xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x5xf32>, tensor<3xf32>, tensor<3xf32>)
// CHECK: %[[I:.*]] = kiln.batch_norm %[[X]], %[[S]], %[[B]], %[[M]], %[[V]] {epsilon = 9.99999974E-6 : f32} : (tensor<2x3x5xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x5xf32>
// CHECK: return %[[Y]], %[[RM]], %[[RV]], %[[I]]
func.func @batchnorm_train_opset9(%x: tensor<2x3x5xf32>, %s: tensor<3xf32>, %b: tensor<3xf32>, %m: tensor<3xf32>, %v: tensor<3xf32>) -> (tensor<2x3x5xf32>, tensor<3xf32>, tensor<3xf32>, tensor<2x3x5xf32>) {
  %0:5 = onnx.node "BatchNormalization"(%x, %s, %b, %m, %v) opset 9 {} : (tensor<2x3x5xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x5xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
  %1 = onnx.node "BatchNormalization"(%x, %s, %b, %m, %v) opset 9 {} : (tensor<2x3x5xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x5xf32>
  return %0#0, %0#1, %0#2, %1 : tensor<2x3x5xf32>, tensor<3xf32>, tensor<3xf32>, tensor<2x3x5xf32>
}

// -----

// LayerNormalization over the trailing dims from `axis` (default -1); the
// mean and inverse std outputs keep the leading dims. A missing bias is a
// zero constant; scale and bias broadcast to the normalised shape.
// CHECK-LABEL: func.func @layernorm
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x32xf32>, %[[G:.*]]: tensor<32xf32>, %[[B:.*]]: tensor<32xf32>, %[[G2:.*]]: tensor<8x32xf32>)
// CHECK: %[[Y0:.*]], %{{.*}}, %{{.*}} = kiln.layer_norm %[[X]], %[[G]], %[[B]] {axis = 2 : i64, epsilon = 9.99999997E-7 : f32} : (tensor<2x8x32xf32>, tensor<32xf32>, tensor<32xf32>) -> (tensor<2x8x32xf32>, tensor<2x8x1xf32>, tensor<2x8x1xf32>)
// CHECK: %[[Z:.*]] = kiln.constant dense<0.000000e+00> : tensor<8x32xf32>
// CHECK: %[[Y1:.*]], %[[MEAN:.*]], %[[RSTD:.*]] = kiln.layer_norm %[[X]], %[[G2]], %[[Z]] {axis = 1 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>) -> (tensor<2x8x32xf32>, tensor<2x1x1xf32>, tensor<2x1x1xf32>)
// CHECK: %[[BG:.*]] = kiln.broadcast %[[G]] : tensor<32xf32> -> tensor<8x32xf32>
// CHECK: %[[BB:.*]] = kiln.broadcast %[[B]] : tensor<32xf32> -> tensor<8x32xf32>
// CHECK: %[[Y2:.*]], %{{.*}}, %{{.*}} = kiln.layer_norm %[[X]], %[[BG]], %[[BB]] {axis = 1 : i64, epsilon = 9.99999974E-6 : f32}
// CHECK: return %[[Y0]], %[[Y1]], %[[MEAN]], %[[RSTD]], %[[Y2]]
func.func @layernorm(%x: tensor<2x8x32xf32>, %g: tensor<32xf32>, %b: tensor<32xf32>, %g2: tensor<8x32xf32>)
    -> (tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x1x1xf32>, tensor<2x1x1xf32>, tensor<*xf32>) {
  %0 = onnx.node "LayerNormalization"(%x, %g, %b) opset 17 {epsilon = 1.0e-6 : f32} : (tensor<2x8x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  %1:3 = onnx.node "LayerNormalization"(%x, %g2) opset 17 {axis = 1 : i64} : (tensor<2x8x32xf32>, tensor<8x32xf32>) -> (tensor<2x8x32xf32>, tensor<2x1x1xf32>, tensor<2x1x1xf32>)
  %2 = onnx.node "LayerNormalization"(%x, %g, %b) opset 17 {axis = -2 : i64} : (tensor<2x8x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<*xf32>
  return %0, %1#0, %1#1, %1#2, %2 : tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x1x1xf32>, tensor<2x1x1xf32>, tensor<*xf32>
}

// -----

// MaxPool; ceil_mode becomes extra end padding (5 with k 2, s 2: 3 windows
// instead of 2), where a window must still start inside the input or its
// begin padding (as PyTorch, and ONNX shape inference from 1.16).
// CHECK-LABEL: func.func @maxpool
// CHECK-SAME: (%[[X:.*]]: tensor<1x3x8x8xf32>, %[[Y:.*]]: tensor<1x1x5x5xf32>)
// CHECK: %[[P0:.*]] = kiln.max_pool %[[X]] {dilations = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x3x8x8xf32>) -> tensor<1x3x4x4xf32>
// CHECK: %[[P1:.*]] = kiln.max_pool %[[Y]] {dilations = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x1x5x5xf32>) -> tensor<1x1x3x3xf32>
// CHECK: %[[P2:.*]] = kiln.max_pool %[[Y]] {dilations = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x1x5x5xf32>) -> tensor<1x1x2x2xf32>
// CHECK: %[[P3:.*]] = kiln.max_pool %[[X]] {dilations = array<i64: 1, 1>, kernel = array<i64: 3, 3>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
// CHECK: %[[P4:.*]] = kiln.max_pool %[[X]] {dilations = array<i64: 2, 2>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 1, 1>, strides = array<i64: 3, 3>} : (tensor<1x3x8x8xf32>) -> tensor<1x3x3x3xf32>
// CHECK: %[[P5:.*]] = kiln.max_pool %[[Y]] {dilations = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x1x5x5xf32>) -> tensor<1x1x3x3xf32>
// CHECK: return %[[P0]], %[[P1]], %[[P2]], %[[P3]], %[[P4]], %[[P5]]
func.func @maxpool(%x: tensor<1x3x8x8xf32>, %y: tensor<1x1x5x5xf32>)
    -> (tensor<1x3x4x4xf32>, tensor<1x1x3x3xf32>, tensor<1x1x2x2xf32>, tensor<1x3x8x8xf32>, tensor<*xf32>, tensor<*xf32>) {
  %0 = onnx.node "MaxPool"(%x) opset 12 {kernel_shape = [2, 2], strides = [2, 2]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x4x4xf32>
  %1 = onnx.node "MaxPool"(%y) opset 12 {kernel_shape = [2, 2], strides = [2, 2], ceil_mode = 1 : i64} : (tensor<1x1x5x5xf32>) -> tensor<1x1x3x3xf32>
  %2 = onnx.node "MaxPool"(%y) opset 12 {kernel_shape = [2, 2], strides = [2, 2]} : (tensor<1x1x5x5xf32>) -> tensor<1x1x2x2xf32>
  %3 = onnx.node "MaxPool"(%x) opset 8 {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
  // Dilated, ceil: span 3, ceil((8 - 3) / 3) + 1 = 3.
  %4 = onnx.node "MaxPool"(%x) opset 12 {kernel_shape = [2, 2], dilations = [2, 2], strides = [3, 3], ceil_mode = 1 : i64} : (tensor<1x3x8x8xf32>) -> tensor<*xf32>
  // ceil((5 + 2 - 2) / 2) + 1 = 4, but the 4th window would start in the end
  // padding: 3 windows and no extra padding.
  %5 = onnx.node "MaxPool"(%y) opset 12 {kernel_shape = [2, 2], strides = [2, 2], pads = [1, 1, 1, 1], ceil_mode = 1 : i64} : (tensor<1x1x5x5xf32>) -> tensor<*xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<1x3x4x4xf32>, tensor<1x1x3x3xf32>, tensor<1x1x2x2xf32>, tensor<1x3x8x8xf32>, tensor<*xf32>, tensor<*xf32>
}

// -----

// AveragePool: count_include_pad (default 0); with ceil_mode the extra end
// padding is also listed in ceil_pad, which the divisor never counts.
// CHECK-LABEL: func.func @avgpool
// CHECK-SAME: (%[[X:.*]]: tensor<1x3x8x8xf32>, %[[Y:.*]]: tensor<1x1x5x5xf32>)
// CHECK: %[[A0:.*]] = kiln.avg_pool %[[X]] {count_include_pad = true, dilations = array<i64: 1, 1>, kernel = array<i64: 3, 3>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
// CHECK: %[[A1:.*]] = kiln.avg_pool %[[X]] {dilations = array<i64: 1, 1>, kernel = array<i64: 3, 3>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
// CHECK: %[[A2:.*]] = kiln.avg_pool %[[Y]] {ceil_pad = array<i64: 1, 1>, count_include_pad = true, dilations = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x1x5x5xf32>) -> tensor<1x1x3x3xf32>
// CHECK: %[[A3:.*]] = kiln.avg_pool %[[Y]] {dilations = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x1x5x5xf32>) -> tensor<1x1x4x4xf32>
// CHECK: return %[[A0]], %[[A1]], %[[A2]], %[[A3]]
func.func @avgpool(%x: tensor<1x3x8x8xf32>, %y: tensor<1x1x5x5xf32>) -> (tensor<1x3x8x8xf32>, tensor<1x3x8x8xf32>, tensor<1x1x3x3xf32>, tensor<1x1x4x4xf32>) {
  %0 = onnx.node "AveragePool"(%x) opset 11 {kernel_shape = [3, 3], pads = [1, 1, 1, 1], count_include_pad = 1 : i64} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
  %1 = onnx.node "AveragePool"(%x) opset 11 {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
  %2 = onnx.node "AveragePool"(%y) opset 11 {kernel_shape = [2, 2], strides = [2, 2], ceil_mode = 1 : i64, count_include_pad = 1 : i64} : (tensor<1x1x5x5xf32>) -> tensor<1x1x3x3xf32>
  %3 = onnx.node "AveragePool"(%y) opset 7 {kernel_shape = [2, 2]} : (tensor<1x1x5x5xf32>) -> tensor<1x1x4x4xf32>
  return %0, %1, %2, %3 : tensor<1x3x8x8xf32>, tensor<1x3x8x8xf32>, tensor<1x1x3x3xf32>, tensor<1x1x4x4xf32>
}

// -----

// CHECK-LABEL: func.func @global_avgpool
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x5x7xf32>)
// CHECK: %[[Y:.*]] = kiln.reduce_mean %[[X]] {axes = array<i64: 2, 3>} : (tensor<2x3x5x7xf32>) -> tensor<2x3x1x1xf32>
// CHECK: return %[[Y]]
func.func @global_avgpool(%x: tensor<2x3x5x7xf32>) -> tensor<2x3x1x1xf32> {
  %0 = onnx.node "GlobalAveragePool"(%x) opset 1 {} : (tensor<2x3x5x7xf32>) -> tensor<2x3x1x1xf32>
  return %0 : tensor<2x3x1x1xf32>
}

// -----

// Dropout in training: ratio and training_mode are constant inputs (opset
// 12+). The seed attribute picks the mask stream; without it the stream
// is keyed by the node's name.
// CHECK-LABEL: func.func @dropout_train
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK: %[[Y:.*]], %[[MASK:.*]] = kiln.dropout %[[X]] {ratio = 2.500000e-01 : f32, seed = 7 : i64} : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xi1>)
// CHECK: %[[Y2:.*]], %{{.*}} = kiln.dropout %[[Y]] {ratio = 2.500000e-01 : f32, seed = {{[0-9]+}} : i64} : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xi1>)
// CHECK: return %[[Y]], %[[MASK]], %[[Y2]]
// CHECK-NOT: onnx.
func.func @dropout_train(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xi1>, tensor<4x8xf32>) {
  %r = onnx.node "Constant"() opset 13 {value = dense<2.500000e-01> : tensor<f32>} : () -> tensor<f32>
  %t = onnx.constant dense<true> : tensor<i1>
  %0:2 = onnx.node "Dropout"(%x, %r, %t) opset 13 {seed = 7 : i64} : (tensor<4x8xf32>, tensor<f32>, tensor<i1>) -> (tensor<4x8xf32>, tensor<4x8xi1>)
  %1 = onnx.node "Dropout"(%0#0, %r, %t) opset 13 {} : (tensor<4x8xf32>, tensor<f32>, tensor<i1>) -> tensor<4x8xf32> loc("drop")
  return %0#0, %0#1, %1 : tensor<4x8xf32>, tensor<4x8xi1>, tensor<4x8xf32>
}

// -----

// Two Dropouts whose names were lost (IR printed without locations) still get
// distinct mask streams, keyed by their source positions.
// CHECK-LABEL: func.func @dropout_unnamed
// CHECK: kiln.dropout %{{.*}} {ratio = 5.000000e-01 : f32, seed = [[S1:[0-9]+]] : i64}
// CHECK-NOT: seed = [[S1]] :
// CHECK: kiln.dropout %{{.*}} {ratio = 5.000000e-01 : f32, seed = {{[0-9]+}} : i64}
func.func @dropout_unnamed(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %r = onnx.node "Constant"() opset 13 {value = dense<5.000000e-01> : tensor<f32>} : () -> tensor<f32>
  %t = onnx.constant dense<true> : tensor<i1>
  %0 = onnx.node "Dropout"(%x, %r, %t) opset 13 {} : (tensor<4x8xf32>, tensor<f32>, tensor<i1>) -> tensor<4x8xf32>
  %1 = onnx.node "Dropout"(%x, %r, %t) opset 13 {} : (tensor<4x8xf32>, tensor<f32>, tensor<i1>) -> tensor<4x8xf32>
  return %0, %1 : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Dropout in inference (no or a false training_mode, and every opset before
// 12) is the identity with an all-true mask.
// CHECK-LABEL: func.func @dropout_inference
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NOT: kiln.dropout
// CHECK-DAG: %[[M0:.*]] = kiln.constant dense<true> : tensor<4x8xi1>
// CHECK-DAG: %[[M1:.*]] = kiln.constant dense<true> : tensor<4x8xi1>
// CHECK-NOT: kiln.dropout
// CHECK: return %[[X]], %[[M0]], %[[X]], %[[X]], %[[M1]], %[[X]]
func.func @dropout_inference(%x: tensor<4x8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xi1>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xi1>, tensor<4x8xf32>) {
  %0:2 = onnx.node "Dropout"(%x) opset 13 {} : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xi1>)
  %f = onnx.constant dense<false> : tensor<i1>
  %r = onnx.node "Constant"() opset 13 {value = dense<5.000000e-01> : tensor<f32>} : () -> tensor<f32>
  %1 = onnx.node "Dropout"(%x, %r, %f) opset 12 {} : (tensor<4x8xf32>, tensor<f32>, tensor<i1>) -> tensor<4x8xf32>
  %2:2 = onnx.node "Dropout"(%x) opset 10 {ratio = 0.3 : f32} : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xi1>)
  %3 = onnx.node "Dropout"(%x) opset 7 {ratio = 0.3 : f32} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0#0, %0#1, %1, %2#0, %2#1, %3 : tensor<4x8xf32>, tensor<4x8xi1>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xi1>, tensor<4x8xf32>
}

// -----

// SoftmaxCrossEntropyLoss: reduction mean (default), none (the labels'
// shape [N, D]) or sum; weights and ignore_index pass through; the
// log_prob output is a log_softmax over the class axis 1.
// CHECK-LABEL: func.func @softmax_cross_entropy
// CHECK-SAME: (%[[S:.*]]: tensor<4x10xf32>, %[[L:.*]]: tensor<4xi64>, %[[S3:.*]]: tensor<2x5x3xf32>, %[[L3:.*]]: tensor<2x3xi64>, %[[W:.*]]: tensor<5xf32>)
// CHECK: %[[A:.*]] = kiln.softmax_cross_entropy %[[S]], %[[L]] : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
// CHECK: %[[B:.*]] = kiln.softmax_cross_entropy %[[S3]], %[[L3]], %[[W]] {ignore_index = -100 : i64, reduction = "none"} : (tensor<2x5x3xf32>, tensor<2x3xi64>, tensor<5xf32>) -> tensor<2x3xf32>
// CHECK: %[[LP:.*]] = kiln.log_softmax %[[S3]] {axis = 1 : i64} : (tensor<2x5x3xf32>) -> tensor<2x5x3xf32>
// CHECK: %[[C:.*]] = kiln.softmax_cross_entropy %[[S3]], %[[L3]] {reduction = "sum"} : (tensor<2x5x3xf32>, tensor<2x3xi64>) -> tensor<f32>
// CHECK: return %[[A]], %[[B]], %[[LP]], %[[C]]
func.func @softmax_cross_entropy(%s: tensor<4x10xf32>, %l: tensor<4xi64>, %s3: tensor<2x5x3xf32>, %l3: tensor<2x3xi64>, %w: tensor<5xf32>)
    -> (tensor<f32>, tensor<2x3xf32>, tensor<2x5x3xf32>, tensor<f32>) {
  %0 = onnx.node "SoftmaxCrossEntropyLoss"(%s, %l) opset 13 {} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
  %1:2 = onnx.node "SoftmaxCrossEntropyLoss"(%s3, %l3, %w) opset 13 {reduction = "none", ignore_index = -100 : i64} : (tensor<2x5x3xf32>, tensor<2x3xi64>, tensor<5xf32>) -> (tensor<2x3xf32>, tensor<2x5x3xf32>)
  %2 = onnx.node "SoftmaxCrossEntropyLoss"(%s3, %l3) opset 12 {reduction = "sum"} : (tensor<2x5x3xf32>, tensor<2x3xi64>) -> tensor<f32>
  return %0, %1#0, %1#1, %2 : tensor<f32>, tensor<2x3xf32>, tensor<2x5x3xf32>, tensor<f32>
}

// -----

// CHECK-LABEL: func.func @nll_loss
// CHECK-SAME: (%[[S:.*]]: tensor<4x10xf32>, %[[L:.*]]: tensor<4xi64>, %[[S3:.*]]: tensor<2x5x3xf32>, %[[L3:.*]]: tensor<2x3xi32>, %[[W:.*]]: tensor<5xf32>)
// CHECK: %[[A:.*]] = kiln.nll_loss %[[S]], %[[L]] {reduction = "sum"} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
// CHECK: %[[B:.*]] = kiln.nll_loss %[[S3]], %[[L3]], %[[W]] {ignore_index = 1 : i64, reduction = "none"} : (tensor<2x5x3xf32>, tensor<2x3xi32>, tensor<5xf32>) -> tensor<2x3xf32>
// CHECK: %[[C:.*]] = kiln.nll_loss %[[S3]], %[[L3]], %[[W]] : (tensor<2x5x3xf32>, tensor<2x3xi32>, tensor<5xf32>) -> tensor<f32>
// CHECK: return %[[A]], %[[B]], %[[C]]
// CHECK-NOT: onnx.
func.func @nll_loss(%s: tensor<4x10xf32>, %l: tensor<4xi64>, %s3: tensor<2x5x3xf32>, %l3: tensor<2x3xi32>, %w: tensor<5xf32>) -> (tensor<f32>, tensor<2x3xf32>, tensor<*xf32>) {
  %0 = onnx.node "NegativeLogLikelihoodLoss"(%s, %l) opset 13 {reduction = "sum"} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
  %1 = onnx.node "NegativeLogLikelihoodLoss"(%s3, %l3, %w) opset 12 {reduction = "none", ignore_index = 1 : i64} : (tensor<2x5x3xf32>, tensor<2x3xi32>, tensor<5xf32>) -> tensor<2x3xf32>
  %2 = onnx.node "NegativeLogLikelihoodLoss"(%s3, %l3, %w) opset 13 {} : (tensor<2x5x3xf32>, tensor<2x3xi32>, tensor<5xf32>) -> tensor<*xf32>
  return %0, %1, %2 : tensor<f32>, tensor<2x3xf32>, tensor<*xf32>
}

// -----

// InstanceNormalization: mean and variance over the spatial dims per
// (sample, channel); scale and bias broadcast as [C, 1, 1].
// CHECK-LABEL: func.func @instance_norm
// CHECK: %[[M:.*]] = kiln.reduce_mean %[[X:[^ ]*]] {axes = array<i64: 2, 3>}
// CHECK: %[[D:.*]] = kiln.sub %[[X]], %[[M]]
// CHECK: kiln.rsqrt
// CHECK: kiln.reshape %{{.*}} : tensor<3xf32> -> tensor<3x1x1xf32>
// CHECK-NOT: onnx.
func.func @instance_norm(%x: tensor<2x3x4x5xf32>, %s: tensor<3xf32>, %b: tensor<3xf32>) -> tensor<2x3x4x5xf32> {
  %0 = onnx.node "InstanceNormalization"(%x, %s, %b) opset 6 {epsilon = 1.0e-3 : f32} : (tensor<2x3x4x5xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x5xf32>
  return %0 : tensor<2x3x4x5xf32>
}
