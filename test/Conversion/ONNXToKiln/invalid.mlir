// RUN: kiln-opt %s --convert-onnx-to-kiln -split-input-file -verify-diagnostics
// RUN: not kiln-opt %s --convert-onnx-to-kiln -split-input-file 2>&1 | FileCheck %s --check-prefix=UNNAMED
// A node whose name was lost is named by its position in the file:
// UNNAMED: error: node at {{.*}}invalid.mlir:{{[0-9]+}}:8 (NonMaxSuppression): unsupported op

// A named node (its location is just the name, so the error has no line).
func.func @unsupported_named(%x: tensor<4x4xf32>) -> tensor<*xf32> {
  // expected-error@unknown {{node 'mod' (Mod): unsupported op 'Mod'}}
  %0 = onnx.node "Mod"(%x, %x) opset 13 {} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<*xf32> loc("mod")
  return %0 : tensor<*xf32>
}

// -----

func.func @unsupported(%b: tensor<1x4x4xf32>, %s: tensor<1x1x4xf32>) -> tensor<*xi64> {
  // expected-error @+1 {{(NonMaxSuppression): unsupported op 'NonMaxSuppression'}}
  %0 = onnx.node "NonMaxSuppression"(%b, %s) opset 11 {} : (tensor<1x4x4xf32>, tensor<1x1x4xf32>) -> tensor<*xi64>
  return %0 : tensor<*xi64>
}

// -----

func.func @unsupported_domain(%x: tensor<4xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{(Gelu): unsupported op 'Gelu' in domain 'com.microsoft'}}
  %0 = onnx.node "Gelu"(%x) domain "com.microsoft" opset 1 {} : (tensor<4xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

// Add before opset 7 had no NumPy broadcasting.
func.func @unsupported_opset(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{(Add): opset 6 of this op is not supported}}
  %0 = onnx.node "Add"(%a, %b) opset 6 {} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @reshape_dynamic_shape(%x: tensor<2x3xf32>, %s: tensor<2xi64>) -> tensor<*xf32> {
  // expected-error @+1 {{(Reshape): shape (input 1) must be a constant or computable from constants}}
  %0 = onnx.node "Reshape"(%x, %s) opset 13 {} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @reshape_two_minus_one(%x: tensor<2x3xf32>) -> tensor<*xf32> {
  %s = onnx.constant dense<[-1, -1]> : tensor<2xi64>
  // expected-error @+1 {{(Reshape): shape has more than one -1}}
  %0 = onnx.node "Reshape"(%x, %s) opset 13 {} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @reshape_count(%x: tensor<2x3xf32>) -> tensor<*xf32> {
  %s = onnx.constant dense<[4, 2]> : tensor<2xi64>
  // expected-error @+1 {{(Reshape): cannot reshape tensor<2x3xf32> to tensor<4x2xf32>}}
  %0 = onnx.node "Reshape"(%x, %s) opset 13 {} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @add_no_broadcast(%a: tensor<2x3xf32>, %b: tensor<4xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{(Add): shapes [2,3] and [4] do not broadcast}}
  %0 = onnx.node "Add"(%a, %b) opset 14 {} : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @add_element_types(%a: tensor<2x3xf32>, %b: tensor<2x3xi64>) -> tensor<*xf32> {
  // expected-error @+1 {{(Add): operands have different element types: 'tensor<2x3xf32>' and 'tensor<2x3xi64>'}}
  %0 = onnx.node "Add"(%a, %b) opset 14 {} : (tensor<2x3xf32>, tensor<2x3xi64>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @squeeze_non_one(%x: tensor<1x3x4xf32>) -> tensor<*xf32> {
  %a = onnx.constant dense<[1]> : tensor<1xi64>
  // expected-error @+1 {{(Squeeze): cannot squeeze dimension 1 of size 3}}
  %0 = onnx.node "Squeeze"(%x, %a) opset 13 {} : (tensor<1x3x4xf32>, tensor<1xi64>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @unsqueeze_no_axes(%x: tensor<3xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{(Unsqueeze): axes are required}}
  %0 = onnx.node "Unsqueeze"(%x) opset 13 {} : (tensor<3xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @conv_channels(%x: tensor<1x3x8x8xf32>, %w: tensor<4x2x3x3xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{(Conv): channels do not match: input has 3, weight expects 2 x 1 groups}}
  %0 = onnx.node "Conv"(%x, %w) opset 11 {} : (tensor<1x3x8x8xf32>, tensor<4x2x3x3xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @conv_transpose_channels(%x: tensor<1x3x4x4xf32>, %w: tensor<4x2x3x3xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{(ConvTranspose): channels do not match: input has 3, weight has 4}}
  %0 = onnx.node "ConvTranspose"(%x, %w) opset 11 {} : (tensor<1x3x4x4xf32>, tensor<4x2x3x3xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @conv_kernel_shape(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{(Conv): kernel_shape disagrees with the weight's shape}}
  %0 = onnx.node "Conv"(%x, %w) opset 11 {kernel_shape = [5, 5]} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @gemm_not_matrix(%a: tensor<2x3x4xf32>, %b: tensor<4x5xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{(Gemm): A and B must be matrices}}
  %0 = onnx.node "Gemm"(%a, %b) opset 13 {} : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @gemm_bias(%a: tensor<2x4xf32>, %b: tensor<4x5xf32>, %c: tensor<3x5xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{(Gemm): shapes [2,5] and [3,5] do not broadcast}}
  %0 = onnx.node "Gemm"(%a, %b, %c) opset 13 {} : (tensor<2x4xf32>, tensor<4x5xf32>, tensor<3x5xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

// C broadcasts to the product's shape only one way.
func.func @gemm_bias_grows(%a: tensor<2x4xf32>, %b: tensor<4x5xf32>, %c: tensor<3x1x5xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{(Gemm): C does not broadcast to the product's shape}}
  %0 = onnx.node "Gemm"(%a, %b, %c) opset 13 {} : (tensor<2x4xf32>, tensor<4x5xf32>, tensor<3x1x5xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @matmul_contracting(%a: tensor<2x4xf32>, %b: tensor<3x5xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{(MatMul): contracting dimensions differ: 4 vs 3}}
  %0 = onnx.node "MatMul"(%a, %b) opset 13 {} : (tensor<2x4xf32>, tensor<3x5xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @dynamic_dim(%x: tensor<?x4xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{(Relu): input 0 has no static shape (tensor<?x4xf32>); fix the input dimensions with --dim NAME=N or --batch-size N}}
  %0 = onnx.node "Relu"(%x) opset 14 {} : (tensor<?x4xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @attr_type(%a: tensor<2x4xf32>, %b: tensor<5x4xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{(Gemm): attribute 'transB' must be an int}}
  %0 = onnx.node "Gemm"(%a, %b) opset 13 {transB = "yes"} : (tensor<2x4xf32>, tensor<5x4xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @attr_list_type(%x: tensor<2x3xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{(Transpose): attribute 'perm' must be a list of ints}}
  %0 = onnx.node "Transpose"(%x) opset 13 {perm = 1 : i64} : (tensor<2x3xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @result_disagrees(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  // expected-error @+1 {{(Relu): result type tensor<2x3xf32> disagrees with ONNX shape inference (tensor<3x2xf32>)}}
  %0 = onnx.node "Relu"(%x) opset 14 {} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

func.func @result_element_disagrees(%x: tensor<2x3xf32>) -> tensor<2x3xf16> {
  // expected-error @+1 {{(Cast): result type tensor<2x3xf32> disagrees with ONNX shape inference (tensor<2x3xf16>)}}
  %0 = onnx.node "Cast"(%x) opset 13 {to = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf16>
  return %0 : tensor<2x3xf16>
}

// -----

func.func @split_uneven(%x: tensor<7xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
  // expected-error @+1 {{(Split): dimension 7 does not split evenly into 2 outputs}}
  %0:2 = onnx.node "Split"(%x) opset 13 {} : (tensor<7xf32>) -> (tensor<*xf32>, tensor<*xf32>)
  return %0#0, %0#1 : tensor<*xf32>, tensor<*xf32>
}

// -----

func.func @split_sizes(%x: tensor<7xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
  // expected-error @+1 {{(Split): split sizes do not add up to dimension 0}}
  %0:2 = onnx.node "Split"(%x) opset 11 {split = [3, 3]} : (tensor<7xf32>) -> (tensor<*xf32>, tensor<*xf32>)
  return %0#0, %0#1 : tensor<*xf32>, tensor<*xf32>
}

// -----

func.func @slice_step_zero(%x: tensor<4xf32>) -> tensor<*xf32> {
  %s = onnx.constant dense<[0]> : tensor<1xi64>
  %e = onnx.constant dense<[4]> : tensor<1xi64>
  %a = onnx.constant dense<[0]> : tensor<1xi64>
  %p = onnx.constant dense<[0]> : tensor<1xi64>
  // expected-error @+1 {{(Slice): step is 0}}
  %0 = onnx.node "Slice"(%x, %s, %e, %a, %p) opset 13 {} : (tensor<4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @softmax_axis(%x: tensor<2x3xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{(Softmax): axis 2 is out of range for rank 2}}
  %0 = onnx.node "Softmax"(%x) opset 13 {axis = 2 : i64} : (tensor<2x3xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @cast_string(%x: tensor<2xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{(Cast): cast to ONNX data type 8 is not supported}}
  %0 = onnx.node "Cast"(%x) opset 13 {to = 8 : i64} : (tensor<2xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @maxpool_indices(%x: tensor<1x1x4x4xf32>) -> tensor<*xi64> {
  // expected-error @+1 {{(MaxPool): output 1 is not supported}}
  %0:2 = onnx.node "MaxPool"(%x) opset 12 {kernel_shape = [2, 2]} : (tensor<1x1x4x4xf32>) -> (tensor<*xf32>, tensor<*xi64>)
  return %0#1 : tensor<*xi64>
}

// -----

func.func @batchnorm_saved_stats(%x: tensor<2x3x4xf32>, %s: tensor<3xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{(BatchNormalization): the saved_mean/saved_var outputs are not supported}}
  %0:5 = onnx.node "BatchNormalization"(%x, %s, %s, %s, %s) opset 9 {} : (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  return %0#3 : tensor<*xf32>
}

// -----

func.func @dropout_ratio_input(%x: tensor<4xf32>, %r: tensor<f32>) -> tensor<*xf32> {
  // expected-error @+1 {{(Dropout): ratio (input 1) must be a constant or computable from constants}}
  %0 = onnx.node "Dropout"(%x, %r) opset 13 {} : (tensor<4xf32>, tensor<f32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @loss_labels(%s: tensor<4x10xf32>, %l: tensor<5xi64>) -> tensor<*xf32> {
  // expected-error @+1 {{(SoftmaxCrossEntropyLoss): labels must have shape [4] for logits 'tensor<4x10xf32>', got 'tensor<5xi64>'}}
  %0 = onnx.node "SoftmaxCrossEntropyLoss"(%s, %l) opset 13 {} : (tensor<4x10xf32>, tensor<5xi64>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @pad_reflect(%x: tensor<2x3xf32>) -> tensor<*xf32> {
  %p = onnx.constant dense<[0, 3, 0, 0]> : tensor<4xi64>
  // expected-error @+1 {{(Pad): reflect padding of dim 1 must be smaller than its size}}
  %0 = onnx.node "Pad"(%x, %p) opset 13 {mode = "reflect"} : (tensor<2x3xf32>, tensor<4xi64>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @momentum_no_alpha(%r: tensor<f32>, %t: tensor<i64>, %x: tensor<2xf32>, %g: tensor<2xf32>, %v: tensor<2xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{(Momentum): attribute 'alpha' is required}}
  %0:2 = onnx.node "Momentum"(%r, %t, %x, %g, %v) domain "ai.onnx.preview.training" opset 1 {beta = 1.0 : f32, mode = "standard", norm_coefficient = 0.0 : f32} : (tensor<f32>, tensor<i64>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<*xf32>, tensor<*xf32>)
  return %0#0 : tensor<*xf32>
}

// -----

func.func @momentum_bad_mode(%r: tensor<f32>, %t: tensor<i64>, %x: tensor<2xf32>, %g: tensor<2xf32>, %v: tensor<2xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{(Momentum): mode must be 'standard' or 'nesterov', got 'heavy'}}
  %0:2 = onnx.node "Momentum"(%r, %t, %x, %g, %v) domain "ai.onnx.preview.training" opset 1 {alpha = 0.9 : f32, beta = 1.0 : f32, mode = "heavy", norm_coefficient = 0.0 : f32} : (tensor<f32>, tensor<i64>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<*xf32>, tensor<*xf32>)
  return %0#0 : tensor<*xf32>
}

// -----

func.func @adam_bad_arity(%r: tensor<f32>, %t: tensor<i64>, %x: tensor<2xf32>, %g: tensor<2xf32>, %v: tensor<2xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{(Adam): expects R, T and 4 tensors per optimized tensor, got 5 inputs}}
  %0:3 = onnx.node "Adam"(%r, %t, %x, %g, %v) domain "ai.onnx.preview.training" opset 1 {} : (tensor<f32>, tensor<i64>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  return %0#0 : tensor<*xf32>
}

// -----

func.func @adagrad_shape(%r: tensor<f32>, %t: tensor<i64>, %x: tensor<2xf32>, %g: tensor<3xf32>, %h: tensor<2xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{(Adagrad): input 3 does not have the shape of the tensor it updates (input 2)}}
  %0:2 = onnx.node "Adagrad"(%r, %t, %x, %g, %h) domain "ai.onnx.preview.training" opset 1 {} : (tensor<f32>, tensor<i64>, tensor<2xf32>, tensor<3xf32>, tensor<2xf32>) -> (tensor<*xf32>, tensor<*xf32>)
  return %0#0 : tensor<*xf32>
}

// -----

func.func @adagrad_int_count(%r: tensor<f32>, %t: tensor<f32>, %x: tensor<2xf32>, %g: tensor<2xf32>, %h: tensor<2xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{(Adagrad): T (input 1) must be an int64 scalar}}
  %0:2 = onnx.node "Adagrad"(%r, %t, %x, %g, %h) domain "ai.onnx.preview.training" opset 1 {} : (tensor<f32>, tensor<f32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<*xf32>, tensor<*xf32>)
  return %0#0 : tensor<*xf32>
}

// -----

// Gradient through an op with no gradient rule names that op.
func.func @gradient_no_rule(%a: tensor<3xf32>) -> tensor<*xf32> {
  %m = onnx.node "ReduceMax"(%a) opset 13 {keepdims = 0 : i64} : (tensor<3xf32>) -> tensor<f32>
  // expected-error @+1 {{(Gradient): 'kiln.reduce_max' op is on the path from an input of Gradient to its 'y' but has no gradient rule}}
  %g = onnx.node "Gradient"(%a, %m) domain "ai.onnx.preview.training" opset 1 {xs = ["a"], y = "m"} : (tensor<3xf32>, tensor<f32>) -> tensor<*xf32>
  return %g : tensor<*xf32>
}

// -----

func.func @gradient_no_xs(%a: tensor<3xf32>) -> tensor<*xf32> {
  %e = onnx.node "Exp"(%a) opset 13 {} : (tensor<3xf32>) -> tensor<3xf32>
  // expected-error @+1 {{(Gradient): attribute 'xs' (the tensors to differentiate with respect to) is required}}
  %g = onnx.node "Gradient"(%a, %e) domain "ai.onnx.preview.training" opset 1 {y = "e"} : (tensor<3xf32>, tensor<3xf32>) -> tensor<*xf32>
  return %g : tensor<*xf32>
}

// -----

func.func @gather_elements_rank(%x: tensor<3x5xf32>, %i: tensor<3xi64>) -> tensor<*xf32> {
  // expected-error @+1 {{(GatherElements): indices have rank 1, the input rank 2}}
  %0 = onnx.node "GatherElements"(%x, %i) opset 13 {axis = 0 : i64} : (tensor<3x5xf32>, tensor<3xi64>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @prelu_slope(%x: tensor<2x3xf32>, %s: tensor<2x4xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{(PRelu): shapes [2,4] and [2,3] do not broadcast}}
  %0 = onnx.node "PRelu"(%x, %s) opset 16 {} : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @dequantize_axis_opset10(%x: tensor<4x3xi8>, %s: tensor<4xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{(DequantizeLinear): x_scale must be a scalar before opset 13 (per-axis quantization)}}
  %0 = onnx.node "DequantizeLinear"(%x, %s) opset 10 {} : (tensor<4x3xi8>, tensor<4xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @quantize_int16(%x: tensor<4xf32>, %s: tensor<f32>, %z: tensor<i16>) -> tensor<4xi16> {
  // expected-error @+1 {{(QuantizeLinear): the quantized type must be uint8 or int8, got i16}}
  %0 = onnx.node "QuantizeLinear"(%x, %s, %z) opset 13 {} : (tensor<4xf32>, tensor<f32>, tensor<i16>) -> tensor<4xi16>
  return %0 : tensor<4xi16>
}

// -----

func.func @topk_k_not_constant(%x: tensor<3x5xf32>, %k: tensor<1xi64>) -> tensor<*xf32> {
  // expected-error @+1 {{(TopK)}}
  %v, %i = onnx.node "TopK"(%x, %k) opset 11 {} : (tensor<3x5xf32>, tensor<1xi64>) -> (tensor<*xf32>, tensor<*xi64>)
  return %v : tensor<*xf32>
}

// -----

func.func @onehot_values(%i: tensor<2x3xi64>, %vals: tensor<3xf32>) -> tensor<*xf32> {
  %d = onnx.constant dense<4> : tensor<i64>
  // expected-error @+1 {{(OneHot): values must be a 2-element tensor [off, on]}}
  %0 = onnx.node "OneHot"(%i, %d, %vals) opset 11 {} : (tensor<2x3xi64>, tensor<i64>, tensor<3xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}
