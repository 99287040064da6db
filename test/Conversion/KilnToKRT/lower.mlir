// RUN: kiln-opt %s -split-input-file --kiln-lower-to-runtime -verify-diagnostics | FileCheck %s

// Each kiln op becomes an alloc per result and a launch of its kernel with its
// attributes, defaults included, and its FLOPs from CostOpInterface (a 2x8 by
// 8x16 matmul: 2*2*8*16); elementwise ops may run in place.
// CHECK-LABEL: func.func @mlp
// CHECK-SAME: (%[[X:.*]]: memref<2x8xf32> {onnx.name = "x"}, %[[W:.*]]: memref<16x8xf32> {kiln.param, onnx.name = "w"}) -> (memref<2x16xf32> {onnx.name = "y"})
func.func @mlp(%x: tensor<2x8xf32> {onnx.name = "x"}, %w: tensor<16x8xf32> {kiln.param, onnx.name = "w"}) -> (tensor<2x16xf32> {onnx.name = "y"}) {
  // CHECK: %[[B:.*]] = krt.constant dense<1.000000e+00> : tensor<16xf32> : memref<16xf32>
  %b = kiln.constant dense<1.0> : tensor<16xf32>
  // CHECK: %[[M:.*]] = krt.alloc : memref<2x16xf32>
  // CHECK: krt.launch "matmul" ins(%[[X]], %[[W]] : memref<2x8xf32>, memref<16x8xf32>) outs(%[[M]] : memref<2x16xf32>) {params = {transpose_lhs = false, transpose_rhs = true}} flops 512
  %0 = kiln.matmul %x, %w {transpose_rhs = true} : (tensor<2x8xf32>, tensor<16x8xf32>) -> tensor<2x16xf32>
  // CHECK: %[[A:.*]] = krt.alloc : memref<2x16xf32>
  // CHECK: krt.launch "add" ins(%[[M]], %[[B]] : memref<2x16xf32>, memref<16xf32>) outs(%[[A]] : memref<2x16xf32>) {in_place}
  %1 = kiln.add %0, %b : (tensor<2x16xf32>, tensor<16xf32>) -> tensor<2x16xf32>
  // CHECK: %[[R:.*]] = krt.alloc : memref<2x16xf32>
  // CHECK: krt.launch "gelu" ins(%[[A]] : memref<2x16xf32>) outs(%[[R]] : memref<2x16xf32>) {in_place, params = {approximate = "none"}}
  %2 = kiln.gelu %1 : tensor<2x16xf32>
  // CHECK: return %[[R]] : memref<2x16xf32>
  return %2 : tensor<2x16xf32>
}

// -----

// Reshape is a view; multi-result ops get one alloc per result; default-valued
// attributes are written out.
// CHECK-LABEL: func.func @norm
func.func @norm(%x: tensor<2x3x4xf32>, %g: tensor<12xf32>, %b: tensor<12xf32>) -> tensor<2xf32> {
  // CHECK: %[[V:.*]] = krt.view %{{.*}} : memref<2x3x4xf32> -> memref<2x12xf32>
  %0 = kiln.reshape %x : tensor<2x3x4xf32> -> tensor<2x12xf32>
  // CHECK: %[[Y:.*]] = krt.alloc : memref<2x12xf32>
  // CHECK: %[[MEAN:.*]] = krt.alloc : memref<2x1xf32>
  // CHECK: %[[RSTD:.*]] = krt.alloc : memref<2x1xf32>
  // CHECK: krt.launch "layer_norm" ins(%[[V]], %{{.*}}, %{{.*}} : memref<2x12xf32>, memref<12xf32>, memref<12xf32>) outs(%[[Y]], %[[MEAN]], %[[RSTD]] : memref<2x12xf32>, memref<2x1xf32>, memref<2x1xf32>) {params = {axis = 1 : i64, epsilon = 9.99999974E-6 : f32}}
  %y, %m, %r = kiln.layer_norm %0, %g, %b {axis = 1 : i64, epsilon = 1.0e-05 : f32}
      : (tensor<2x12xf32>, tensor<12xf32>, tensor<12xf32>) -> (tensor<2x12xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  // CHECK: krt.launch "reduce_sum" {{.*}} {params = {axes = array<i64: 1>, keepdims = false}}
  %s = kiln.reduce_sum %y {axes = array<i64: 1>, keepdims = false} : (tensor<2x12xf32>) -> tensor<2xf32>
  return %s : tensor<2xf32>
}

// -----

// A function that only forwards its input lowers to a plain return.
// CHECK-LABEL: func.func @identity(%{{.*}}: memref<3xi64>) -> memref<3xi64>
func.func @identity(%x: tensor<3xi64>) -> tensor<3xi64> {
  return %x : tensor<3xi64>
}

// -----

func.func @not_kiln(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'arith.negf' op cannot be lowered to the runtime: only kiln ops have kernels}}
  %0 = arith.negf %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}
