// RUN: kiln-opt %s -split-input-file --kiln-lower-to-runtime -verify-diagnostics | FileCheck %s

// Updated values go into the parameter's own storage: an in-place update
// kernel that reads the parameter last writes there directly, anything else
// is copied before the return; updates leave the result list.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[P:.*]]: memref<4xf32> {kiln.param, onnx.name = "p"}, %[[G:.*]]: memref<4xf32>, %[[LR:.*]]: memref<f32>, %[[S:.*]]: memref<4xf32> {kiln.param, onnx.name = "s"}) -> (memref<f32> {kiln.loss})
// CHECK: krt.launch "sgd_update" ins(%[[P]], %[[G]], %[[LR]] : memref<4xf32>, memref<4xf32>, memref<f32>) outs(%[[P]] : memref<4xf32>) {in_place, params = {weight_decay = 0.000000e+00 : f32}}
// CHECK: %[[N:.*]] = krt.alloc : memref<4xf32>
// CHECK: krt.launch "exp" ins(%[[S]] : memref<4xf32>) outs(%[[N]] : memref<4xf32>)
// CHECK: krt.launch "copy" ins(%[[N]] : memref<4xf32>) outs(%[[S]] : memref<4xf32>)
// CHECK-NEXT: return %{{.*}} : memref<f32>
func.func @train_step(%p: tensor<4xf32> {kiln.param, onnx.name = "p"}, %g: tensor<4xf32>, %lr: tensor<f32>,
                      %s: tensor<4xf32> {kiln.param, onnx.name = "s"})
    -> (tensor<f32> {kiln.loss}, tensor<4xf32> {kiln.update = 0 : i64}, tensor<4xf32> {kiln.update = 3 : i64}) {
  %l = kiln.reduce_sum %p {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
  %p1 = kiln.sgd_update %p, %g, %lr : (tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %s1 = kiln.exp %s : tensor<4xf32>
  %r = kiln.reduce_sum %s {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
  return %l, %p1, %s1 : tensor<f32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// A parameter still read after its update is copied, not overwritten early.
// CHECK-LABEL: func.func @late_reader
// CHECK: krt.launch "sgd_update" {{.*}} outs(%[[NEW:.*]] : memref<4xf32>)
// CHECK: krt.launch "reduce_sum" ins(%arg0
// CHECK: krt.launch "copy" ins(%[[NEW]] : memref<4xf32>) outs(%arg0 : memref<4xf32>)
func.func @late_reader(%p: tensor<4xf32> {kiln.param}, %g: tensor<4xf32>, %lr: tensor<f32>)
    -> (tensor<f32>, tensor<4xf32> {kiln.update = 0 : i64}) {
  %p1 = kiln.sgd_update %p, %g, %lr : (tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %l = kiln.reduce_sum %p {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
  return %l, %p1 : tensor<f32>, tensor<4xf32>
}

// -----

// An update of another type. (An argument number out of range is refused
// when the IR is verified: test/Dialect/Kiln/attrs.mlir.)
// expected-error @+1 {{result #1 updates argument #5, which does not exist or has another type}}
func.func @bad_update(%p: tensor<4xf32> {kiln.param}, %a1: tensor<f32>, %a2: tensor<f32>, %a3: tensor<f32>, %a4: tensor<f32>, %q: tensor<2xf32> {kiln.param}) -> (tensor<f32>, tensor<4xf32> {kiln.update = 5 : i64}) {
  %l = kiln.reduce_sum %p {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
  return %l, %p : tensor<f32>, tensor<4xf32>
}
