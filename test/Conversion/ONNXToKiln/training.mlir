// RUN: kiln-opt %s --convert-onnx-to-kiln -split-input-file | FileCheck %s

// Gradient of d = (a + b) * a: the importer passes the differentiated value
// as the last operand. dd/da = (a + b) + a (two uses of a, summed) and
// dd/db = a, built by the reverse sweep over the converted ops.
// CHECK-LABEL: func.func @gradient_add_mul
// CHECK-SAME: (%[[A:.*]]: tensor<f32>, %[[B:.*]]: tensor<f32>)
// CHECK: %[[C:.*]] = kiln.add %[[A]], %[[B]]
// CHECK: %[[D:.*]] = kiln.mul %[[C]], %[[A]]
// CHECK-DAG: %[[ONE:.*]] = kiln.constant dense<1.000000e+00> : tensor<f32>
// CHECK-DAG: %[[DC:.*]] = kiln.mul %[[ONE]], %[[A]]
// CHECK-DAG: %[[DA2:.*]] = kiln.mul %[[ONE]], %[[C]]
// CHECK: %[[DA:.*]] = kiln.add %[[DA2]], %[[DC]]
// CHECK: return %[[D]], %[[DA]], %[[DC]]
// CHECK-NOT: onnx.
func.func @gradient_add_mul(%a: tensor<f32>, %b: tensor<f32>) -> (tensor<f32>, tensor<f32>, tensor<f32>) {
  %c = onnx.node "Add"(%a, %b) opset 12 {} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %d = onnx.node "Mul"(%c, %a) opset 12 {} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %g:2 = onnx.node "Gradient"(%a, %b, %d) domain "ai.onnx.preview.training" opset 1 {xs = ["a", "b"], y = "d"} : (tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
  return %d, %g#0, %g#1 : tensor<f32>, tensor<f32>, tensor<f32>
}

// -----

// An input the differentiated value does not depend on gets zeros.
// CHECK-LABEL: func.func @gradient_unused
// CHECK: %[[Z:.*]] = kiln.constant dense<0.000000e+00> : tensor<3xf32>
// CHECK: return %{{.*}}, %[[Z]]
func.func @gradient_unused(%a: tensor<3xf32>, %b: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  %c = onnx.node "Exp"(%a) opset 13 {} : (tensor<3xf32>) -> tensor<3xf32>
  %g:2 = onnx.node "Gradient"(%a, %b, %c) domain "ai.onnx.preview.training" opset 1 {xs = ["a", "b"], y = "c"} : (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>)
  return %g#0, %g#1 : tensor<3xf32>, tensor<3xf32>
}

// -----

// Nesterov momentum: V_new = alpha * V + (T > 0 ? beta : 1) * (norm * X + G),
// X_new = X - R * (g + alpha * V_new).
// CHECK-LABEL: func.func @momentum_nesterov
// CHECK-SAME: (%[[R:.*]]: tensor<f32>, %[[T:.*]]: tensor<i64>, %[[X:.*]]: tensor<2xf32>, %[[G:.*]]: tensor<2xf32>, %[[V:.*]]: tensor<2xf32>)
// CHECK: %[[POS:.*]] = kiln.greater %[[T]], %{{.*}} : (tensor<i64>, tensor<i64>) -> tensor<i1>
// CHECK: %[[BETA:.*]] = kiln.select %[[POS]], %{{.*}}, %{{.*}} : (tensor<i1>, tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK: %[[NX:.*]] = kiln.mul %{{.*}}, %[[X]]
// CHECK: %[[GR:.*]] = kiln.add %[[NX]], %[[G]]
// CHECK: %[[BG:.*]] = kiln.mul %[[BETA]], %[[GR]]
// CHECK: %[[AV:.*]] = kiln.mul %{{.*}}, %[[V]]
// CHECK: %[[VN:.*]] = kiln.add %[[AV]], %[[BG]]
// CHECK: %[[AVN:.*]] = kiln.mul %{{.*}}, %[[VN]]
// CHECK: %[[DIR:.*]] = kiln.add %[[GR]], %[[AVN]]
// CHECK: %[[STEP:.*]] = kiln.mul %[[R]], %[[DIR]]
// CHECK: %[[XN:.*]] = kiln.sub %[[X]], %[[STEP]]
// CHECK: return %[[XN]], %[[VN]]
func.func @momentum_nesterov(%r: tensor<f32>, %t: tensor<i64>, %x: tensor<2xf32>, %g: tensor<2xf32>, %v: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
  %0:2 = onnx.node "Momentum"(%r, %t, %x, %g, %v) domain "ai.onnx.preview.training" opset 1 {alpha = 9.500000e-01 : f32, beta = 1.000000e+00 : f32, mode = "nesterov", norm_coefficient = 0.00999999977 : f32} : (tensor<f32>, tensor<i64>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>)
  return %0#0, %0#1 : tensor<2xf32>, tensor<2xf32>
}

// -----

// Adam over two tensors: outputs are X1', X2', V1', V2', H1', H2'; the bias
// correction is R * sqrt(1 - beta^T) / (1 - alpha^T) when T > 0.
// CHECK-LABEL: func.func @adam_multiple
// CHECK: kiln.pow
// CHECK: kiln.pow
// CHECK: kiln.sqrt
// CHECK: kiln.select
// CHECK-COUNT-2: kiln.sqrt
// CHECK: return
// CHECK-NOT: onnx.
func.func @adam_multiple(%r: tensor<f32>, %t: tensor<i64>, %x1: tensor<1xf32>, %x2: tensor<2xf32>, %g1: tensor<1xf32>, %g2: tensor<2xf32>, %v1: tensor<1xf32>, %v2: tensor<2xf32>, %h1: tensor<1xf32>, %h2: tensor<2xf32>) -> (tensor<1xf32>, tensor<2xf32>, tensor<1xf32>, tensor<2xf32>, tensor<1xf32>, tensor<2xf32>) {
  %0:6 = onnx.node "Adam"(%r, %t, %x1, %x2, %g1, %g2, %v1, %v2, %h1, %h2) domain "ai.onnx.preview.training" opset 1 {alpha = 9.500000e-01 : f32, beta = 8.500000e-01 : f32, norm_coefficient = 1.000000e-03 : f32} : (tensor<f32>, tensor<i64>, tensor<1xf32>, tensor<2xf32>, tensor<1xf32>, tensor<2xf32>, tensor<1xf32>, tensor<2xf32>, tensor<1xf32>, tensor<2xf32>) -> (tensor<1xf32>, tensor<2xf32>, tensor<1xf32>, tensor<2xf32>, tensor<1xf32>, tensor<2xf32>)
  return %0#0, %0#1, %0#2, %0#3, %0#4, %0#5 : tensor<1xf32>, tensor<2xf32>, tensor<1xf32>, tensor<2xf32>, tensor<1xf32>, tensor<2xf32>
}
