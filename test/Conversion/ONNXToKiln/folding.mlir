// RUN: kiln-opt %s --convert-onnx-to-kiln -split-input-file | FileCheck %s

// `x.view(x.size(0), -1)` as PyTorch exports it: the shape subgraph folds in
// graph order, so the Reshape sees a constant shape and nothing else is left.
// CHECK-LABEL: func.func @view_batch_minus_one
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4x5xf32>) -> tensor<2x60xf32>
// CHECK-NOT: kiln.constant
// CHECK-NEXT: %[[R:.*]] = kiln.reshape %[[X]] : tensor<2x3x4x5xf32> -> tensor<2x60xf32>
// CHECK-NEXT: return %[[R]] : tensor<2x60xf32>
// CHECK-NOT: onnx.
func.func @view_batch_minus_one(%x: tensor<2x3x4x5xf32>) -> tensor<?x?xf32> {
  %s = onnx.node "Shape"(%x) opset 13 {} : (tensor<2x3x4x5xf32>) -> tensor<4xi64> loc("/Shape")
  %i = onnx.node "Constant"() opset 13 {value = dense<0> : tensor<i64>} : () -> tensor<i64> loc("/Constant")
  %g = onnx.node "Gather"(%s, %i) opset 13 {axis = 0 : i64} : (tensor<4xi64>, tensor<i64>) -> tensor<i64> loc("/Gather")
  %a = onnx.constant dense<[0]> : tensor<1xi64>
  %u = onnx.node "Unsqueeze"(%g, %a) opset 13 {} : (tensor<i64>, tensor<1xi64>) -> tensor<1xi64> loc("/Unsqueeze")
  %m = onnx.constant dense<[-1]> : tensor<1xi64>
  %c = onnx.node "Concat"(%u, %m) opset 13 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64> loc("/Concat")
  %r = onnx.node "Reshape"(%x, %c) opset 13 {} : (tensor<2x3x4x5xf32>, tensor<2xi64>) -> tensor<?x?xf32> loc("/Reshape")
  return %r : tensor<?x?xf32>
}

// -----

// The same at opset 11 (Unsqueeze axes as an attribute), with arithmetic on
// the gathered dims: x.view(b, c, h * w).
// CHECK-LABEL: func.func @view_merge_spatial
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4x5xf32>) -> tensor<2x3x20xf32>
// CHECK-NOT: kiln.constant
// CHECK-NEXT: %[[R:.*]] = kiln.reshape %[[X]] : tensor<2x3x4x5xf32> -> tensor<2x3x20xf32>
// CHECK-NEXT: return %[[R]]
func.func @view_merge_spatial(%x: tensor<2x3x4x5xf32>) -> tensor<*xf32> {
  %s = onnx.node "Shape"(%x) opset 11 {} : (tensor<2x3x4x5xf32>) -> tensor<4xi64>
  %i0 = onnx.constant dense<0> : tensor<i64>
  %i1 = onnx.constant dense<1> : tensor<i64>
  %i2 = onnx.constant dense<2> : tensor<i64>
  %i3 = onnx.constant dense<3> : tensor<i64>
  %b = onnx.node "Gather"(%s, %i0) opset 11 {axis = 0 : i64} : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  %c = onnx.node "Gather"(%s, %i1) opset 11 {axis = 0 : i64} : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  %h = onnx.node "Gather"(%s, %i2) opset 11 {axis = 0 : i64} : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  %w = onnx.node "Gather"(%s, %i3) opset 11 {axis = 0 : i64} : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  %hw = onnx.node "Mul"(%h, %w) opset 7 {} : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %ub = onnx.node "Unsqueeze"(%b) opset 11 {axes = [0]} : (tensor<i64>) -> tensor<1xi64>
  %uc = onnx.node "Unsqueeze"(%c) opset 11 {axes = [0]} : (tensor<i64>) -> tensor<1xi64>
  %uhw = onnx.node "Unsqueeze"(%hw) opset 11 {axes = [0]} : (tensor<i64>) -> tensor<1xi64>
  %cat = onnx.node "Concat"(%ub, %uc, %uhw) opset 11 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xi64>
  %r = onnx.node "Reshape"(%x, %cat) opset 5 {} : (tensor<2x3x4x5xf32>, tensor<3xi64>) -> tensor<*xf32>
  return %r : tensor<*xf32>
}

// -----

// A shape prefix taken by Slice (torch.flatten(x, 1) in newer exporters),
// and a Cast of it on the way.
// CHECK-LABEL: func.func @flatten_by_slice
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>) -> tensor<2x12xf32>
// CHECK-NOT: kiln.constant
// CHECK-NEXT: %[[R:.*]] = kiln.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<2x12xf32>
// CHECK-NEXT: return %[[R]]
func.func @flatten_by_slice(%x: tensor<2x3x4xf32>) -> tensor<*xf32> {
  %s = onnx.node "Shape"(%x) opset 13 {} : (tensor<2x3x4xf32>) -> tensor<3xi64>
  %st = onnx.constant dense<[0]> : tensor<1xi64>
  %en = onnx.constant dense<[1]> : tensor<1xi64>
  %ax = onnx.constant dense<[0]> : tensor<1xi64>
  %p = onnx.node "Slice"(%s, %st, %en, %ax) opset 13 {} : (tensor<3xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %p32 = onnx.node "Cast"(%p) opset 13 {to = 6 : i64} : (tensor<1xi64>) -> tensor<1xi32>
  %p64 = onnx.node "Cast"(%p32) opset 13 {to = 7 : i64} : (tensor<1xi32>) -> tensor<1xi64>
  %m = onnx.constant dense<[-1]> : tensor<1xi64>
  %c = onnx.node "Concat"(%p64, %m) opset 13 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  %r = onnx.node "Reshape"(%x, %c) opset 13 {} : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<*xf32>
  return %r : tensor<*xf32>
}

// -----

// `x.expand(2, -1, 4)` as PyTorch exports it: -1 entries are replaced by 1
// through ConstantOfShape/Mul/Equal/Where, all folded; Expand becomes one
// static kiln.broadcast.
// CHECK-LABEL: func.func @expand_minus_one
// CHECK-SAME: (%[[X:.*]]: tensor<1x3x1xf32>) -> tensor<2x3x4xf32>
// CHECK-NOT: kiln.constant
// CHECK-NEXT: %[[B:.*]] = kiln.broadcast %[[X]] : tensor<1x3x1xf32> -> tensor<2x3x4xf32>
// CHECK-NEXT: return %[[B]]
// CHECK-NOT: onnx.
func.func @expand_minus_one(%x: tensor<1x3x1xf32>) -> tensor<*xf32> {
  %shape = onnx.constant dense<[2, -1, 4]> : tensor<3xi64>
  %n = onnx.constant dense<[3]> : tensor<1xi64>
  %ones = onnx.node "ConstantOfShape"(%n) opset 9 {value = dense<1> : tensor<1xi64>} : (tensor<1xi64>) -> tensor<3xi64>
  %neg = onnx.node "Constant"() opset 13 {value = dense<-1> : tensor<i64>} : () -> tensor<i64>
  %negs = onnx.node "Mul"(%ones, %neg) opset 13 {} : (tensor<3xi64>, tensor<i64>) -> tensor<3xi64>
  %eq = onnx.node "Equal"(%shape, %negs) opset 13 {} : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi1>
  %w = onnx.node "Where"(%eq, %ones, %shape) opset 9 {} : (tensor<3xi1>, tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  %e = onnx.node "Expand"(%x, %w) opset 13 {} : (tensor<1x3x1xf32>, tensor<3xi64>) -> tensor<*xf32>
  return %e : tensor<*xf32>
}

// -----

// An attention-mask style chain: a Range compared with a Shape-derived bound
// folds to a constant mask that a Where on real data consumes.
// CHECK-LABEL: func.func @mask_where
// CHECK-SAME: (%[[X:.*]]: tensor<2x4xf32>, %[[F:.*]]: tensor<f32>) -> tensor<2x4xf32>
// CHECK: %[[M:.*]] = kiln.constant dense<[true, true, true, false]> : tensor<4xi1>
// CHECK-NEXT: %[[S:.*]] = kiln.select %[[M]], %[[X]], %[[F]] : (tensor<4xi1>, tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
// CHECK-NEXT: return %[[S]]
func.func @mask_where(%x: tensor<2x4xf32>, %f: tensor<f32>) -> tensor<2x4xf32> {
  %s = onnx.node "Shape"(%x) opset 13 {} : (tensor<2x4xf32>) -> tensor<2xi64>
  %i = onnx.constant dense<1> : tensor<i64>
  %len = onnx.node "Gather"(%s, %i) opset 13 {axis = 0 : i64} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %z = onnx.constant dense<0> : tensor<i64>
  %one = onnx.constant dense<1> : tensor<i64>
  %r = onnx.node "Range"(%z, %len, %one) opset 11 {} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<4xi64>
  %three = onnx.constant dense<3> : tensor<i64>
  %m = onnx.node "Less"(%r, %three) opset 13 {} : (tensor<4xi64>, tensor<i64>) -> tensor<4xi1>
  %y = onnx.node "Where"(%m, %x, %f) opset 16 {} : (tensor<4xi1>, tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// A reversed Slice of a shape (negative step, INT64_MIN end) folds too.
// CHECK-LABEL: func.func @reversed_shape
// CHECK-NEXT: %[[C:.*]] = kiln.constant dense<[4, 3, 2]> : tensor<3xi64>
// CHECK-NEXT: return %[[C]] : tensor<3xi64>
func.func @reversed_shape(%x: tensor<2x3x4xf32>) -> tensor<*xi64> {
  %s = onnx.node "Shape"(%x) opset 13 {} : (tensor<2x3x4xf32>) -> tensor<3xi64>
  %st = onnx.constant dense<[-1]> : tensor<1xi64>
  %en = onnx.constant dense<[-9223372036854775808]> : tensor<1xi64>
  %ax = onnx.constant dense<[0]> : tensor<1xi64>
  %sp = onnx.constant dense<[-1]> : tensor<1xi64>
  %0 = onnx.node "Slice"(%s, %st, %en, %ax, %sp) opset 13 {} : (tensor<3xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<*xi64>
  return %0 : tensor<*xi64>
}
