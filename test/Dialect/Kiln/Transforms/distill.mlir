// RUN: kiln-opt %s --kiln-distill="alpha=0.75 temperature=2" | FileCheck %s
// RUN: kiln-opt %s --kiln-distill --kiln-autodiff | FileCheck %s --check-prefix=AD
// RUN: not kiln-opt %s --kiln-distill=alpha=2 2>&1 | FileCheck %s --check-prefix=ALPHA

// The teacher's forward inlined on the student's input x, its parameter a
// frozen argument of @forward; the loss 0.75 * 4 * KL(p_t || p_s) + 0.25 * CE
// at temperature 2; @teacher is gone.
// CHECK-NOT: func.func @teacher
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4xf32> {onnx.name = "x"}
// CHECK-SAME: %[[TW:[^:]*]]: tensor<4x3xf32> {kiln.param, kiln.role = "frozen", onnx.name = "teacher/w"}
// CHECK: %[[CE:.*]] = kiln.softmax_cross_entropy
// CHECK: %[[T:.*]] = kiln.matmul %[[X]], %[[TW]]
// CHECK-DAG: %[[HALF:.*]] = kiln.constant dense<5.000000e-01>
// CHECK-DAG: %[[SS:.*]] = kiln.mul %[[S:.*]], %[[HALF]]
// CHECK-DAG: %[[TS:.*]] = kiln.mul %[[T]], %[[HALF]]
// CHECK-DAG: %[[LPS:.*]] = kiln.log_softmax %[[SS]] {axis = 1 : i64}
// CHECK-DAG: %[[LPT:.*]] = kiln.log_softmax %[[TS]] {axis = 1 : i64}
// CHECK-DAG: %[[PT:.*]] = kiln.softmax %[[TS]] {axis = 1 : i64}
// CHECK: %[[D:.*]] = kiln.sub %[[LPT]], %[[LPS]]
// CHECK: kiln.mul %[[PT]], %[[D]]
// CHECK: kiln.reduce_sum
// CHECK: %[[KL:.*]] = kiln.reduce_mean
// CHECK: %[[A:.*]] = kiln.constant dense<3.000000e+00>
// CHECK: %[[SOFT:.*]] = kiln.mul %[[KL]], %[[A]]
// CHECK: %[[B:.*]] = kiln.constant dense<2.500000e-01>
// CHECK: %[[HARD:.*]] = kiln.mul %[[CE]], %[[B]]
// CHECK: %[[L:.*]] = kiln.add %[[SOFT]], %[[HARD]]
// CHECK: return %[[L]], %[[S]]

// Autodiff trains the student's weight only.
// AD-LABEL: func.func @train_step
// AD-SAME: {kiln.param, kiln.role = "weight", onnx.name = "w"}
// AD-SAME: {kiln.param, kiln.role = "frozen", onnx.name = "teacher/w"}
// AD-NOT: onnx.name = "teacher/w/grad"
// AD: onnx.name = "w/grad"

// ALPHA: --kiln-distill: alpha must be in [0, 1], got 2
module {
func.func @forward(%x: tensor<2x4xf32> {onnx.name = "x"},
                   %labels: tensor<2xi64> {kiln.labels, onnx.name = "labels"},
                   %w: tensor<4x3xf32> {kiln.param, onnx.name = "w"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"}, tensor<2x3xf32> {onnx.name = "logits"}) {
  %s = kiln.matmul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %l = kiln.softmax_cross_entropy %s, %labels {axis = 1 : i64, reduction = "mean"} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
  return %l, %s : tensor<f32>, tensor<2x3xf32>
}
func.func @teacher(%x: tensor<2x4xf32> {onnx.name = "x"},
                   %w: tensor<4x3xf32> {kiln.param, onnx.name = "teacher/w"})
    -> (tensor<2x3xf32> {onnx.name = "logits"}) {
  %t = kiln.matmul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  return %t : tensor<2x3xf32>
}
}
