// RUN: kiln-opt %s | kiln-opt | FileCheck %s
// RUN: kiln-opt %s --mlir-print-op-generic | kiln-opt | FileCheck %s

// The import form round-trips: op type, domain, opset, attributes, types and
// node names (locations) are kept.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %{{.*}}: tensor<4x8xf32> {onnx.name = "x"}
// CHECK-SAME: %{{.*}}: tensor<16x8xf32> {kiln.param, onnx.name = "fc.weight"}
func.func @forward(%x: tensor<4x8xf32> {onnx.name = "x"},
                   %w: tensor<16x8xf32> {kiln.param, onnx.name = "fc.weight"}) -> (tensor<4x16xf32> {onnx.name = "y"}) {
  // CHECK: %[[NONE:.*]] = onnx.none
  %none = onnx.none
  // CHECK: onnx.constant dense<[4, 16]> : tensor<2xi64>
  %shape = onnx.constant dense<[4, 16]> : tensor<2xi64>
  // CHECK: onnx.node "Gemm"(%{{.*}}, %{{.*}}, %[[NONE]]) opset 17 {alpha = 1.000000e+00 : f32, transB = 1 : i64}
  // CHECK-SAME: : (tensor<4x8xf32>, tensor<16x8xf32>, none) -> tensor<?x16xf32>
  %y = onnx.node "Gemm"(%x, %w, %none) opset 17 {alpha = 1.0 : f32, transB = 1 : i64} : (tensor<4x8xf32>, tensor<16x8xf32>, none) -> tensor<?x16xf32>
  // CHECK: onnx.node "Reshape"
  %r = onnx.node "Reshape"(%y, %shape) opset 17 {} : (tensor<?x16xf32>, tensor<2xi64>) -> tensor<*xf32>
  // CHECK: onnx.node "Custom"(%{{.*}}) domain "com.example" opset 1 {names = ["a", "b"], ratios = [5.000000e-01 : f32]}
  %c = onnx.node "Custom"(%r) domain "com.example" opset 1 {names = ["a", "b"], ratios = [0.5 : f32]} : (tensor<*xf32>) -> tensor<4x16xf32>
  return %c : tensor<4x16xf32>
}
