// RUN: kiln-opt %s --kiln-autodiff=break-vjp=kiln.relu | FileCheck %s
// RUN: not kiln-opt %s --kiln-autodiff=break-vjp=relu 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// break-vjp, a testing aid (kiln-gradcheck's tests): the gradient relu's VJP
// produces is scaled by 1.5; the other ops' VJPs are untouched.
// CHECK-LABEL: func.func @train_step
// CHECK-NOT: 1.500000e+00
// CHECK: %[[DX:.*]] = kiln.relu_grad
// CHECK-NEXT: %[[K:.*]] = kiln.constant dense<1.500000e+00> : tensor<f32>
// CHECK-NEXT: %[[SCALED:.*]] = kiln.mul %[[DX]], %[[K]] : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
// CHECK: kiln.matmul %[[SCALED]], %{{.*}} {transpose_lhs = true}
// CHECK-NOT: 1.500000e+00
// UNKNOWN: break-vjp names no op: 'relu' (a kiln op name, as kiln.relu)
func.func @forward(%x: tensor<4x8xf32> {onnx.name = "x"},
                   %w1: tensor<16x8xf32> {kiln.param, onnx.name = "w1"},
                   %w2: tensor<16x2xf32> {kiln.param, onnx.name = "w2"},
                   %t: tensor<4x2xf32> {onnx.name = "labels"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"}) {
  %0 = kiln.matmul %x, %w1 {transpose_rhs = true} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %1 = kiln.relu %0 : tensor<4x16xf32>
  %2 = kiln.matmul %1, %w2 : (tensor<4x16xf32>, tensor<16x2xf32>) -> tensor<4x2xf32>
  %3 = kiln.mse_loss %2, %t : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<f32>
  return %3 : tensor<f32>
}
