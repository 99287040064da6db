// RUN: kiln-opt %s --kiln-attach-optimizer=optimizer=adamw | FileCheck %s --check-prefix=ADAMW
// RUN: kiln-opt %s --kiln-attach-optimizer="optimizer=momentum nesterov=true clip-norm=1.0" | FileCheck %s --check-prefix=MOM
// RUN: kiln-opt %s --kiln-attach-optimizer=optimizer=sgd | FileCheck %s --check-prefix=SGD
// RUN: not kiln-opt %s --kiln-attach-optimizer=optimizer=lion 2>&1 | FileCheck %s --check-prefix=BAD

// adamw: two zero-initialised state tensors per parameter, lr and step
// arguments, the global gradient norm as result 1, updates in place of the
// gradients; torch's default weight decay for AdamW (0.01).
// ADAMW-LABEL: func.func @train_step
// ADAMW-SAME: %[[W:[^:]*]]: tensor<4x2xf32> {kiln.param, kiln.role = "weight", onnx.name = "w"}
// ADAMW-SAME: %[[M:[^:]*]]: tensor<4x2xf32> {kiln.init = "zeros", kiln.param, kiln.role = "optimizer", onnx.name = "w/exp_avg"}
// ADAMW-SAME: %[[V:[^:]*]]: tensor<4x2xf32> {kiln.init = "zeros", kiln.param, kiln.role = "optimizer", onnx.name = "w/exp_avg_sq"}
// ADAMW-SAME: %[[LR:[^:]*]]: tensor<f32> {onnx.name = "kiln.lr"}, %[[T:[^:]*]]: tensor<i64> {onnx.name = "kiln.step"}
// ADAMW-SAME: -> (tensor<f32> {kiln.loss, onnx.name = "loss"}, tensor<f32> {onnx.name = "grad_norm"}, tensor<4x2xf32> {kiln.update = 0 : i64, onnx.name = "w"}, tensor<4x2xf32> {kiln.update = 2 : i64, onnx.name = "w/exp_avg"}, tensor<4x2xf32> {kiln.update = 3 : i64, onnx.name = "w/exp_avg_sq"})
// ADAMW: %[[SUM:.*]] = kiln.reduce_sum_square %[[G:[^ ]*]] {axes = array<i64: 0, 1>, keepdims = false}
// ADAMW: %[[NORM:.*]] = kiln.sqrt %[[SUM]]
// ADAMW: %[[P:.*]], %[[NM:.*]], %[[NV:.*]] = kiln.adam_update %[[W]], %[[G]], %[[M]], %[[V]], %[[LR]], %[[T]] {beta1 = 0.899999976 : f32, beta2 = 9.990000e-01 : f32, decoupled = true, eps = 9.99999993E-9 : f32, weight_decay = 0.00999999977 : f32}
// ADAMW: return %{{.*}}, %[[NORM]], %[[P]], %[[NM]], %[[NV]]

// Clipping scales every gradient by min(1, clip / (norm + 1e-6)).
// MOM-LABEL: func.func @train_step
// MOM-SAME: onnx.name = "w/momentum_buffer"
// MOM: %[[NORM:.*]] = kiln.sqrt
// MOM: %[[EPS:.*]] = kiln.add %[[NORM]], %{{.*}}
// MOM: %[[C:.*]] = kiln.div %{{.*}}, %[[EPS]]
// MOM: %[[COEF:.*]] = kiln.min %[[C]], %{{.*}}
// MOM: %[[G:.*]] = kiln.mul %{{.*}}, %[[COEF]] : (tensor<4x2xf32>, tensor<f32>) -> tensor<4x2xf32>
// MOM: kiln.momentum_update %{{.*}}, %[[G]], %{{.*}}, %{{.*}} {momentum = 0.899999976 : f32, nesterov = true}

// SGD-LABEL: func.func @train_step
// SGD-NOT: kiln.init
// SGD: kiln.sgd_update %{{.*}}, %{{.*}}, %{{.*}} : (tensor<4x2xf32>, tensor<4x2xf32>, tensor<f32>) -> tensor<4x2xf32>

// BAD: for the --optimizer option: unknown optimizer 'lion' (expected sgd, momentum, adam or adamw)
func.func @train_step(%w: tensor<4x2xf32> {kiln.param, kiln.role = "weight", onnx.name = "w"},
                      %x: tensor<3x4xf32> {onnx.name = "x"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"}, tensor<4x2xf32> {kiln.grad_of = 0 : i64}) {
  %y = kiln.matmul %x, %w : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
  %s = kiln.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<3x2xf32>) -> tensor<f32>
  %g = kiln.matmul %x, %y {transpose_lhs = true} : (tensor<3x4xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
  return %s, %g : tensor<f32>, tensor<4x2xf32>
}
