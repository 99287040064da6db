// RUN: kiln-opt %s --convert-onnx-to-kiln -split-input-file | FileCheck %s
// Errors: invalid.mlir.

// QuantizeLinear per tensor: round(x / scale) + zero point, saturated to
// uint8's range, cast.
// CHECK-LABEL: func.func @quantize
// CHECK: %[[D:.*]] = kiln.div %arg0, %arg1 : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
// CHECK: %[[R:.*]] = kiln.round %[[D]]
// CHECK: %[[Z:.*]] = kiln.cast %arg2 : tensor<ui8> -> tensor<f32>
// CHECK: %[[A:.*]] = kiln.add %[[R]], %[[Z]]
// CHECK: kiln.max %[[A]], %{{.*}}
// CHECK: kiln.min
// CHECK: kiln.cast %{{.*}} : tensor<2x3xf32> -> tensor<2x3xui8>
func.func @quantize(%x: tensor<2x3xf32>, %s: tensor<f32>, %z: tensor<ui8>) -> tensor<2x3xui8> {
  %0 = onnx.node "QuantizeLinear"(%x, %s, %z) opset 13 {} : (tensor<2x3xf32>, tensor<f32>, tensor<ui8>) -> tensor<2x3xui8>
  return %0 : tensor<2x3xui8>
}

// -----

// DequantizeLinear per axis (opset 13): the [C] scale and zero point
// reshaped along axis 0.
// CHECK-LABEL: func.func @dequantize_axis
// CHECK: %[[X:.*]] = kiln.cast %arg0 : tensor<4x3xi8> -> tensor<4x3xf32>
// CHECK: kiln.reshape %{{.*}} : tensor<4xf32> -> tensor<4x1xf32>
// CHECK: kiln.sub %[[X]]
// CHECK: kiln.reshape %arg1 : tensor<4xf32> -> tensor<4x1xf32>
// CHECK: kiln.mul
func.func @dequantize_axis(%x: tensor<4x3xi8>, %s: tensor<4xf32>, %z: tensor<4xi8>) -> tensor<4x3xf32> {
  %0 = onnx.node "DequantizeLinear"(%x, %s, %z) opset 13 {axis = 0 : si64} : (tensor<4x3xi8>, tensor<4xf32>, tensor<4xi8>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}
