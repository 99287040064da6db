// RUN: kiln-opt %s --kiln-eval-mode | FileCheck %s

// Dropout is the identity; BatchNorm normalises with its running statistics.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: kiln.dropout
// CHECK: %[[Y:.*]] = kiln.batch_norm %arg0, %arg1, %arg2, %arg3, %arg4 {epsilon = 9.99999974E-6 : f32}
// CHECK-NOT: kiln.batch_norm_train
// CHECK: return %[[Y]], %arg3
func.func @forward(%x: tensor<2x3x4x4xf32>, %s: tensor<3xf32>, %b: tensor<3xf32>,
                   %rm: tensor<3xf32>, %rv: tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<3xf32>) {
  %d, %mask = kiln.dropout %x {ratio = 0.5 : f32} : (tensor<2x3x4x4xf32>) -> (tensor<2x3x4x4xf32>, tensor<2x3x4x4xi1>)
  %y, %m, %v = kiln.batch_norm_train %d, %s, %b, %rm, %rv {epsilon = 1.0e-05 : f32, momentum = 0.9 : f32}
      : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
      -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
  return %y, %m : tensor<2x3x4x4xf32>, tensor<3xf32>
}
