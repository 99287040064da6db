// RUN: kiln-opt %s --split-input-file --kiln-mixed-precision | FileCheck %s
// RUN: kiln-opt %s --split-input-file --kiln-mixed-precision=dtype=fp16 | FileCheck %s --check-prefix=FP16
// RUN: kiln-opt %s --split-input-file --kiln-mixed-precision="fp32-ops=MatMul,Relu" | FileCheck %s --check-prefix=OPS
// RUN: kiln-opt %s --split-input-file --kiln-mixed-precision --canonicalize | FileCheck %s --check-prefix=CANON

// Class low: a matmul computes in bf16. Each f32 value is cast once, right
// after it is defined: the weight both matmuls read has one bf16 copy (the
// master weight stays f32). Class follow: the bias add and the relu between
// the matmuls compute in bf16, the bias (a weight) cast to its activation's
// type. The function keeps its f32 result type.
// CHECK-LABEL: func.func @forward
//  CHECK-SAME: (%[[X:.*]]: tensor<2x8xf32>, %[[W:.*]]: tensor<8x8xf32> {kiln.param}, %[[B:.*]]: tensor<8xf32> {kiln.param})
//   CHECK-DAG: %[[BL:.*]] = kiln.cast %[[B]] : tensor<8xf32> -> tensor<8xbf16>
//   CHECK-DAG: %[[WL:.*]] = kiln.cast %[[W]] : tensor<8x8xf32> -> tensor<8x8xbf16>
//   CHECK-DAG: %[[XL:.*]] = kiln.cast %[[X]] : tensor<2x8xf32> -> tensor<2x8xbf16>
//       CHECK: %[[M0:.*]] = kiln.matmul %[[XL]], %[[WL]] : (tensor<2x8xbf16>, tensor<8x8xbf16>) -> tensor<2x8xbf16>
//       CHECK: %[[A:.*]] = kiln.add %[[M0]], %[[BL]] : (tensor<2x8xbf16>, tensor<8xbf16>) -> tensor<2x8xbf16>
//       CHECK: %[[R:.*]] = kiln.relu %[[A]] : tensor<2x8xbf16>
//       CHECK: %[[M1:.*]] = kiln.matmul %[[R]], %[[WL]] : (tensor<2x8xbf16>, tensor<8x8xbf16>) -> tensor<2x8xbf16>
//       CHECK: %[[OUT:.*]] = kiln.cast %[[M1]] : tensor<2x8xbf16> -> tensor<2x8xf32>
//       CHECK: return %[[OUT]] : tensor<2x8xf32>
//   CHECK-NOT: kiln.cast
// FP16-LABEL: func.func @forward
//       FP16: kiln.matmul {{.*}} : (tensor<2x8xf16>, tensor<8x8xf16>) -> tensor<2x8xf16>
//       FP16: kiln.add {{.*}} : (tensor<2x8xf16>, tensor<8xf16>) -> tensor<2x8xf16>
// --fp32-ops names ONNX op types: the ops converted from a MatMul or Relu
// node (their location says so) stay f32; the add between them, an Add
// node, follows its f32 activation.
// OPS-LABEL: func.func @forward
//   OPS-NOT: bf16
//       OPS: return
func.func @forward(%x: tensor<2x8xf32>, %w: tensor<8x8xf32> {kiln.param}, %b: tensor<8xf32> {kiln.param}) -> tensor<2x8xf32> {
  %0 = kiln.matmul %x, %w : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> loc("mm0"(fused<"onnx.MatMul">["m.onnx":1:0]))
  %1 = kiln.add %0, %b : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32> loc("add"(fused<"onnx.Add">["m.onnx":2:0]))
  %2 = kiln.relu %1 : tensor<2x8xf32> loc("relu"(fused<"onnx.Relu">["m.onnx":3:0]))
  %3 = kiln.matmul %2, %w : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> loc("mm1"(fused<"onnx.MatMul">["m.onnx":4:0]))
  return %3 : tensor<2x8xf32>
}

// -----

// Class float32: softmax and the loss compute in f32, their bf16 operands
// cast up. Class follow, with activations of two types: a residual f32
// stream plus a bf16 branch is added in f32 (torch's type promotion).
// CHECK-LABEL: func.func @forward
//       CHECK: %[[M:.*]] = kiln.matmul {{.*}} -> tensor<4x8xbf16>
//       CHECK: %[[MF:.*]] = kiln.cast %[[M]] : tensor<4x8xbf16> -> tensor<4x8xf32>
//       CHECK: %[[RES:.*]] = kiln.add %[[MF]], %arg0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
//       CHECK: %[[SM:.*]] = kiln.softmax %[[RES]] {{.*}} -> tensor<4x8xf32>
//       CHECK: %[[SML:.*]] = kiln.cast %[[SM]] : tensor<4x8xf32> -> tensor<4x8xbf16>
//       CHECK: %[[M2:.*]] = kiln.matmul %[[SML]], {{.*}} -> tensor<4x8xbf16>
//       CHECK: %[[M2F:.*]] = kiln.cast %[[M2]] : tensor<4x8xbf16> -> tensor<4x8xf32>
//       CHECK: kiln.softmax_cross_entropy %[[M2F]], %arg2 : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
func.func @forward(%x: tensor<4x8xf32>, %w: tensor<8x8xf32> {kiln.param}, %labels: tensor<4xi64>) -> (tensor<f32> {kiln.loss}) {
  %0 = kiln.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %1 = kiln.add %0, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = kiln.softmax %1 {axis = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %3 = kiln.matmul %2, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = kiln.softmax_cross_entropy %3, %labels : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Class follow over weights only (an embedding gather: a weight and integer
// indices) stays f32, as torch leaves an embedding; class keep (a constant,
// a cast) is never retyped; the norm (float32) reads the f32 gather as is.
// CHECK-LABEL: func.func @forward
//       CHECK: %[[E:.*]] = kiln.gather %arg1, %arg0 {{.*}} -> tensor<2x3x8xf32>
//       CHECK: kiln.layer_norm %[[E]], {{.*}} : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>)
//       CHECK: kiln.cast {{.*}} : tensor<2x3x8xf32> -> tensor<2x3x8xbf16>
//       CHECK: kiln.matmul {{.*}} -> tensor<2x3x8xbf16>
//       CHECK: kiln.mul {{.*}} : (tensor<2x3x8xbf16>, tensor<bf16>) -> tensor<2x3x8xbf16>
//       CHECK: kiln.cast {{.*}} : tensor<2x3x8xbf16> -> tensor<2x3x8xi64>
func.func @forward(%idx: tensor<2x3xi64>, %emb: tensor<16x8xf32> {kiln.param}, %g: tensor<8xf32> {kiln.param}, %w: tensor<8x8xf32> {kiln.param}) -> tensor<2x3x8xi64> {
  %half = kiln.constant dense<0.5> : tensor<f32>
  %e = kiln.gather %emb, %idx {axis = 0 : i64} : (tensor<16x8xf32>, tensor<2x3xi64>) -> tensor<2x3x8xf32>
  %n, %mean, %rstd = kiln.layer_norm %e, %g, %g {axis = 2 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>)
  %m = kiln.matmul %n, %w : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
  %s = kiln.mul %m, %half : (tensor<2x3x8xf32>, tensor<f32>) -> tensor<2x3x8xf32>
  %i = kiln.cast %s : tensor<2x3x8xf32> -> tensor<2x3x8xi64>
  return %i : tensor<2x3x8xi64>
}

// -----

// Cast cancellation: a cast up and straight back down is the original value
// (cast(cast(x : bf16 -> f32) -> bf16) is x), folded by the canonicalizer;
// the other order rounds, and stays.
// CANON-LABEL: func.func @forward(%arg0: tensor<4xbf16>, %arg1: tensor<4xf32>)
//       CANON: %[[D:.*]] = kiln.cast %arg1 : tensor<4xf32> -> tensor<4xbf16>
//       CANON: %[[U:.*]] = kiln.cast %[[D]] : tensor<4xbf16> -> tensor<4xf32>
//       CANON: return %arg0, %[[U]]
func.func @forward(%l: tensor<4xbf16>, %f: tensor<4xf32>) -> (tensor<4xbf16>, tensor<4xf32>) {
  %up = kiln.cast %l : tensor<4xbf16> -> tensor<4xf32>
  %back = kiln.cast %up : tensor<4xf32> -> tensor<4xbf16>
  %down = kiln.cast %f : tensor<4xf32> -> tensor<4xbf16>
  %round = kiln.cast %down : tensor<4xbf16> -> tensor<4xf32>
  return %back, %round : tensor<4xbf16>, tensor<4xf32>
}
