// RUN: kiln-opt %s -split-input-file --kiln-autodiff -verify-diagnostics | FileCheck %s
// RUN: kiln-opt %s -split-input-file --kiln-autodiff=freeze=^w2 -verify-diagnostics | FileCheck %s --check-prefix=FREEZE

// y = relu(x·w1ᵀ + b)·w2: the gradients in reverse, the bias gradient summed
// over the broadcast batch axis; @forward is kept.
// CHECK-LABEL: func.func @forward
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x8xf32> {onnx.name = "x"}
// CHECK-SAME: %[[W1:[^:]*]]: tensor<16x8xf32> {kiln.param, kiln.role = "weight", onnx.name = "w1"}
// CHECK-SAME: %[[B:[^:]*]]: tensor<16xf32> {kiln.param, kiln.role = "weight", onnx.name = "b"}
// CHECK-SAME: %[[W2:[^:]*]]: tensor<16x2xf32> {kiln.param, kiln.role = "weight", onnx.name = "w2"}
// CHECK-SAME: -> (tensor<f32> {kiln.loss, onnx.name = "loss"}, tensor<16x8xf32> {kiln.grad_of = 1 : i64, onnx.name = "w1/grad"}, tensor<16xf32> {kiln.grad_of = 2 : i64, onnx.name = "b/grad"}, tensor<16x2xf32> {kiln.grad_of = 3 : i64, onnx.name = "w2/grad"})
// CHECK: %[[MM:.*]] = kiln.matmul %[[X]], %[[W1]] {transpose_rhs = true}
// CHECK: %[[PRE:.*]] = kiln.add %[[MM]], %[[B]]
// CHECK: %[[H:.*]] = kiln.relu %[[PRE]]
// CHECK: %[[Y:.*]] = kiln.matmul %[[H]], %[[W2]]
// CHECK: %[[LOSS:.*]] = kiln.mse_loss %[[Y]]
// CHECK: %[[ONE:.*]] = kiln.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DY:.*]] = kiln.mul %{{.*}}, %{{.*}} : (tensor<4x2xf32>, tensor<f32>) -> tensor<4x2xf32>
// CHECK: %[[DH:.*]] = kiln.matmul %[[DY]], %[[W2]] {transpose_rhs = true}
// CHECK: %[[DW2:.*]] = kiln.matmul %[[H]], %[[DY]] {transpose_lhs = true}
// CHECK: %[[DPRE:.*]] = kiln.relu_grad %[[DH]], %[[PRE]]
// CHECK: %[[DBK:.*]] = kiln.reduce_sum %[[DPRE]] {axes = array<i64: 0>}
// CHECK: %[[DB:.*]] = kiln.reshape %[[DBK]] : tensor<1x16xf32> -> tensor<16xf32>
// CHECK: %[[DW1:.*]] = kiln.matmul %[[DPRE]], %[[X]] {transpose_lhs = true}
// CHECK: return %[[LOSS]], %[[DW1]], %[[DB]], %[[DW2]]
// FREEZE-LABEL: func.func @train_step
// FREEZE-SAME: {kiln.param, kiln.role = "frozen", onnx.name = "w2"}
// FREEZE-SAME: -> (tensor<f32> {kiln.loss, onnx.name = "loss"}, tensor<16x8xf32> {kiln.grad_of = 1 : i64, onnx.name = "w1/grad"}, tensor<16xf32> {kiln.grad_of = 2 : i64, onnx.name = "b/grad"})
func.func @forward(%x: tensor<4x8xf32> {onnx.name = "x"},
                   %w1: tensor<16x8xf32> {kiln.param, onnx.name = "w1"},
                   %b: tensor<16xf32> {kiln.param, onnx.name = "b"},
                   %w2: tensor<16x2xf32> {kiln.param, onnx.name = "w2"},
                   %t: tensor<4x2xf32> {onnx.name = "labels"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"}) {
  %0 = kiln.matmul %x, %w1 {transpose_rhs = true} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %1 = kiln.add %0, %b : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %2 = kiln.relu %1 : tensor<4x16xf32>
  %3 = kiln.matmul %2, %w2 : (tensor<4x16xf32>, tensor<16x2xf32>) -> tensor<4x2xf32>
  %4 = kiln.mse_loss %3, %t : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<f32>
  return %4 : tensor<f32>
}

// -----

// A value used twice gets the sum of both gradients; BatchNorm's running
// statistics are state, threaded out as updates (PyTorch's unbiased variance).
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[RM:[^:]*]]: tensor<3xf32> {kiln.param, kiln.role = "state", onnx.name = "rm"}
// CHECK-SAME: %[[RV:[^:]*]]: tensor<3xf32> {kiln.param, kiln.role = "state", onnx.name = "rv"}
// CHECK-SAME: tensor<3xf32> {kiln.update = 3 : i64, onnx.name = "rm"}, tensor<3xf32> {kiln.update = 4 : i64, onnx.name = "rv"}
// CHECK: %[[Y:.*]], %[[NM:.*]], %[[NV:.*]] = kiln.batch_norm_train {{.*}}unbiased_running_var = true
// CHECK: kiln.add %{{.*}}, %{{.*}} : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>)
// CHECK: kiln.batch_norm_train_grad
// CHECK: return %{{.*}}, %{{.*}}, %{{.*}}, %[[NM]], %[[NV]]
func.func @forward(%x: tensor<2x3x4x4xf32> {onnx.name = "x"},
                   %s: tensor<3xf32> {kiln.param, onnx.name = "s"},
                   %b: tensor<3xf32> {kiln.param, onnx.name = "b"},
                   %rm: tensor<3xf32> {kiln.param, onnx.name = "rm"},
                   %rv: tensor<3xf32> {kiln.param, onnx.name = "rv"})
    -> (tensor<f32> {kiln.loss}) {
  %y, %m, %v = kiln.batch_norm_train %x, %s, %b, %rm, %rv {epsilon = 1.0e-05 : f32, momentum = 0.9 : f32}
      : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
      -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
  %sq = kiln.mul %y, %y : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %l = kiln.reduce_sum %sq {axes = array<i64: 0, 1, 2, 3>, keepdims = false} : (tensor<2x3x4x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

func.func @forward(%x: tensor<4xf32> {kiln.param, onnx.name = "x"}) -> (tensor<f32> {kiln.loss}) {
  // expected-error @+1 {{is on the path from a trainable parameter to the loss but has no gradient rule (op 'kiln.reduce_max')}}
  %m = kiln.reduce_max %x {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
  return %m : tensor<f32>
}

// -----

// expected-error @+1 {{@forward's result 0 is not a loss; run --kiln-attach-loss first}}
func.func @forward(%x: tensor<4xf32> {kiln.param}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{nothing to train: no floating-point parameter reaches the loss}}
func.func @forward(%x: tensor<4xf32>, %p: tensor<4xf32> {kiln.param}) -> (tensor<f32> {kiln.loss}) {
  %s = kiln.reduce_sum %x {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
