// RUN: kiln-opt %s -split-input-file --kiln-microbatch=microbatches=2 -verify-diagnostics | FileCheck %s

// Two microbatches of the step built for one (batch 2): each data input
// takes 4 rows, and microbatch m is rows m, m + 2 (a reshape
// to [B/M, M, ...] and a slice of dimension 1), forward and backward once
// each, tagged by microbatch; the weights' transpose is shared; the loss
// and the gradient are the microbatches' mean.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tensor<4x8xf32> {onnx.name = "x"}
// CHECK-SAME: tensor<4x2xf32> {onnx.name = "labels"}
// CHECK: %[[WT:.*]] = kiln.transpose %{{.*}} {perm = array<i64: 1, 0>}
// CHECK-NOT: kiln.microbatch
// CHECK: %[[X3:.*]] = kiln.reshape %[[X:[^ ]*]] {kiln.microbatch = 0 : i64} : tensor<4x8xf32> -> tensor<2x2x8xf32>
// CHECK: kiln.slice %[[X3]] {kiln.microbatch = 0 : i64, limits = array<i64: 2, 1, 8>, starts = array<i64: 0, 0, 0>, strides = array<i64: 1, 1, 1>}
// CHECK: kiln.matmul %{{.*}}, %[[WT]] {kiln.microbatch = 0 : i64} : (tensor<2x8xf32>, tensor<8x2xf32>) -> tensor<2x2xf32>
// CHECK: %[[L0:.*]] = kiln.mse_loss {{.*}}kiln.microbatch = 0
// CHECK: %[[G0:.*]] = kiln.matmul {{.*}}kiln.microbatch = 0 : i64, transpose_lhs = true
// CHECK: kiln.slice %{{.*}} {kiln.microbatch = 1 : i64, limits = array<i64: 2, 2, 8>, starts = array<i64: 0, 1, 0>
// CHECK: %[[L1:.*]] = kiln.mse_loss {{.*}}kiln.microbatch = 1
// CHECK: %[[G1:.*]] = kiln.matmul {{.*}}kiln.microbatch = 1 : i64, transpose_lhs = true
// CHECK: %[[LS:.*]] = kiln.add %[[L0]], %[[L1]] : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK: %[[HALF:.*]] = kiln.constant dense<5.000000e-01> : tensor<f32>
// CHECK: %[[LOSS:.*]] = kiln.mul %[[LS]], %[[HALF]]
// CHECK: %[[GS:.*]] = kiln.add %[[G0]], %[[G1]] : (tensor<8x2xf32>, tensor<8x2xf32>) -> tensor<8x2xf32>
// CHECK: %[[GRAD:.*]] = kiln.mul %[[GS]], %{{.*}} : (tensor<8x2xf32>, tensor<f32>) -> tensor<8x2xf32>
// CHECK: return %[[LOSS]], %[[GRAD]]
func.func @train_step(%x: tensor<2x8xf32> {onnx.name = "x"},
                      %w: tensor<2x8xf32> {kiln.param, kiln.role = "weight", onnx.name = "w"},
                      %t: tensor<2x2xf32> {onnx.name = "labels"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"},
        tensor<8x2xf32> {kiln.grad_of = 1 : i64, onnx.name = "w/grad"}) {
  %wt = kiln.transpose %w {perm = array<i64: 1, 0>} : (tensor<2x8xf32>) -> tensor<8x2xf32>
  %y = kiln.matmul %x, %wt : (tensor<2x8xf32>, tensor<8x2xf32>) -> tensor<2x2xf32>
  %l = kiln.mse_loss %y, %t : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<f32>
  %g = kiln.matmul %x, %y {transpose_lhs = true} : (tensor<2x8xf32>, tensor<2x2xf32>) -> tensor<8x2xf32>
  return %l, %g : tensor<f32>, tensor<8x2xf32>
}

// -----

// BatchNorm's running statistics thread through the microbatches: the
// second reads what the first wrote, and the step returns the second's.
// CHECK-LABEL: func.func @train_step
// CHECK: %{{.*}}, %[[M0:.*]], %[[V0:.*]] = kiln.batch_norm_train %{{.*}}, %{{.*}}, %{{.*}}, %[[RM:[^,]*]], %[[RV:[^ ]*]] {{.*}}kiln.microbatch = 0
// CHECK: %{{.*}}, %[[M1:.*]], %[[V1:.*]] = kiln.batch_norm_train %{{.*}}, %{{.*}}, %{{.*}}, %[[M0]], %[[V0]] {{.*}}kiln.microbatch = 1
// CHECK: return %{{.*}}, %{{.*}}, %[[M1]], %[[V1]]
func.func @train_step(%x: tensor<2x3xf32> {onnx.name = "x"},
                      %s: tensor<3xf32> {kiln.param, kiln.role = "weight", onnx.name = "s"},
                      %b: tensor<3xf32> {kiln.param, kiln.role = "weight", onnx.name = "b"},
                      %rm: tensor<3xf32> {kiln.param, kiln.role = "state", onnx.name = "rm"},
                      %rv: tensor<3xf32> {kiln.param, kiln.role = "state", onnx.name = "rv"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"},
        tensor<3xf32> {kiln.grad_of = 1 : i64, onnx.name = "s/grad"},
        tensor<3xf32> {kiln.update = 3 : i64, onnx.name = "rm"},
        tensor<3xf32> {kiln.update = 4 : i64, onnx.name = "rv"}) {
  %y, %nm, %nv = kiln.batch_norm_train %x, %s, %b, %rm, %rv {epsilon = 1.0e-5 : f32, momentum = 0.9 : f32} : (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>)
  %l = kiln.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  %g = kiln.reduce_sum %y {axes = array<i64: 0>, keepdims = false} : (tensor<2x3xf32>) -> tensor<3xf32>
  return %l, %g, %nm, %nv : tensor<f32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
}

// -----

// expected-error @+1 {{'func.func' op result 1 is not the loss, a gradient or a state update: --kiln-microbatch runs after --kiln-autodiff and before --kiln-attach-optimizer}}
func.func @train_step(%x: tensor<4x8xf32> {onnx.name = "x"},
                      %w: tensor<8x2xf32> {kiln.param, kiln.role = "weight", onnx.name = "w"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"}, tensor<8x2xf32> {onnx.name = "w"}) {
  %y = kiln.matmul %x, %w : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
  %l = kiln.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x2xf32>) -> tensor<f32>
  return %l, %w : tensor<f32>, tensor<8x2xf32>
}

// -----

// Each microbatch's dropout draws its own masks: microbatch m's copy takes
// stream seed + m x 4 (4: past every stream of the step), not the first
// microbatch's masks again.
// CHECK-LABEL: func.func @train_step
// CHECK: kiln.dropout %{{.*}} {kiln.microbatch = 0 : i64, ratio = 5.000000e-01 : f32, seed = 3 : i64}
// CHECK: kiln.dropout %{{.*}} {kiln.microbatch = 1 : i64, ratio = 5.000000e-01 : f32, seed = 7 : i64}
func.func @train_step(%x: tensor<2x4xf32> {onnx.name = "x"},
                      %w: tensor<4xf32> {kiln.param, kiln.role = "weight", onnx.name = "w"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"},
        tensor<4xf32> {kiln.grad_of = 1 : i64, onnx.name = "w/grad"}) {
  %y, %m = kiln.dropout %x {ratio = 0.5 : f32, seed = 3 : i64} : (tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xi1>)
  %l = kiln.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x4xf32>) -> tensor<f32>
  %g = kiln.reduce_sum %y {axes = array<i64: 0>, keepdims = false} : (tensor<2x4xf32>) -> tensor<4xf32>
  return %l, %g : tensor<f32>, tensor<4xf32>
}
