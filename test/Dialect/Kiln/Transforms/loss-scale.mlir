// RUN: kiln-opt %s --kiln-autodiff=loss-scale=true --kiln-attach-optimizer="optimizer=sgd loss-scale=true clip-norm=1.0" | FileCheck %s
// RUN: kiln-opt %s --kiln-autodiff=loss-scale=true --kiln-attach-optimizer="optimizer=adam loss-scale=true" | FileCheck %s --check-prefix=ADAM
// RUN: not kiln-opt %s --kiln-autodiff --kiln-attach-optimizer="loss-scale=true" 2>&1 | FileCheck %s --check-prefix=NOSCALE

// Loss scaling. --kiln-autodiff loss-scale: backward starts from the new
// f32 argument kiln.loss_scale instead of 1 (the broadcast seed of the sum).
// --kiln-attach-optimizer loss-scale: each gradient times 1 / scale first,
// so the norm and the clipping see the unscaled gradient; the update skips
// the step when the sum of squares is not below +inf (Inf or NaN).
// CHECK-LABEL: func.func @train_step
//  CHECK-SAME: %[[W:[^:]*]]: tensor<4x2xf32> {kiln.param, kiln.role = "weight", onnx.name = "w"}, %[[S:[^:]*]]: tensor<f32> {onnx.name = "kiln.loss_scale"}, %[[LR:[^:]*]]: tensor<f32> {onnx.name = "kiln.lr"}
//       CHECK: %[[SEED:.*]] = kiln.reshape %[[S]] : tensor<f32> -> tensor<1x1xf32>
//       CHECK: %[[G:.*]] = kiln.matmul %{{.*}}, {{.*}} {transpose_lhs = true}
//       CHECK: %[[INV:.*]] = kiln.reciprocal %[[S]] : tensor<f32>
//       CHECK: %[[U:.*]] = kiln.mul %[[G]], %[[INV]] : (tensor<4x2xf32>, tensor<f32>) -> tensor<4x2xf32>
//       CHECK: %[[SQ:.*]] = kiln.reduce_sum_square %[[U]]
//       CHECK: %[[NORM:.*]] = kiln.sqrt %[[SQ]]
//       CHECK: %[[INF:.*]] = kiln.constant dense<0x7F800000> : tensor<f32>
//       CHECK: %[[FIN:.*]] = kiln.less %[[SQ]], %[[INF]]
//       CHECK: %[[SKIP:.*]] = kiln.not %[[FIN]] : tensor<i1>
//       CHECK: %[[CLIPPED:.*]] = kiln.mul %[[U]], %{{.*}} : (tensor<4x2xf32>, tensor<f32>) -> tensor<4x2xf32>
//       CHECK: kiln.sgd_update %[[W]], %[[CLIPPED]], %[[LR]], %[[SKIP]] : (tensor<4x2xf32>, tensor<4x2xf32>, tensor<f32>, tensor<i1>) -> tensor<4x2xf32>

// ADAM-LABEL: func.func @train_step
//       ADAM: %[[SKIP:.*]] = kiln.not
//       ADAM: kiln.adam_update {{.*}}, %[[SKIP]] {{{.*}}} : (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<f32>, tensor<i64>, tensor<i1>)

// NOSCALE: error: --kiln-attach-optimizer loss-scale: @train_step has no 'kiln.loss_scale' argument; run --kiln-autodiff with loss-scale
func.func @forward(%x: tensor<3x4xf32> {onnx.name = "x"}, %w: tensor<4x2xf32> {kiln.param, onnx.name = "w"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"}) {
  %y = kiln.matmul %x, %w : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
  %s = kiln.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<3x2xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
