// RUN: kiln-opt %s --kiln-attach-loss=soft-labels=true -verify-diagnostics | FileCheck %s
// RUN: kiln-opt %s --kiln-attach-loss=soft-labels=true --kiln-autodiff -verify-diagnostics | FileCheck %s --check-prefix=GRAD
// RUN: not kiln-opt %s --kiln-attach-loss="loss=mse soft-labels=true" 2>&1 | FileCheck %s --check-prefix=MSE

// Soft labels (kiln-compile --soft-labels): the labels argument has the
// logits' type, a probability row per position, and the loss is
// -mean over the positions of sum_c y_c * log_softmax(z)_c, from
// differentiable ops, so autodiff needs no new op.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[X:.*]]: tensor<4x3x10xf32> {onnx.name = "x"}, %[[L:.*]]: tensor<4x3x10xf32> {kiln.labels, onnx.name = "labels"}, %{{.*}}: tensor<10xf32> {kiln.param, onnx.name = "b"})
// CHECK-SAME: -> (tensor<f32> {kiln.loss, onnx.name = "loss"}, tensor<4x3x10xf32> {onnx.name = "logits"})
// CHECK: %[[Y:.*]] = kiln.add
// CHECK: %[[LOGP:.*]] = kiln.log_softmax %[[Y]] {axis = 2 : i64}
// CHECK: %[[P:.*]] = kiln.mul %[[L]], %[[LOGP]]
// CHECK: %[[S:.*]] = kiln.reduce_sum %[[P]] {axes = array<i64: 2>, keepdims = false} : (tensor<4x3x10xf32>) -> tensor<4x3xf32>
// CHECK: %[[M:.*]] = kiln.reduce_mean %[[S]] {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x3xf32>) -> tensor<f32>
// CHECK: %[[LOSS:.*]] = kiln.neg %[[M]] : tensor<f32>
// CHECK: return %[[LOSS]], %[[Y]]
// GRAD-LABEL: func.func @train_step
// GRAD-SAME: -> (tensor<f32> {kiln.loss, onnx.name = "loss"}, tensor<10xf32> {kiln.grad_of = 2 : i64, onnx.name = "b/grad"})
// GRAD: kiln.log_softmax_grad
// MSE: error: --soft-labels goes with --loss cross-entropy
func.func @forward(%x: tensor<4x3x10xf32> {onnx.name = "x"}, %b: tensor<10xf32> {kiln.param, onnx.name = "b"})
    -> (tensor<4x3x10xf32> {onnx.name = "logits"}) {
  %0 = kiln.add %x, %b : (tensor<4x3x10xf32>, tensor<10xf32>) -> tensor<4x3x10xf32>
  return %0 : tensor<4x3x10xf32>
}
