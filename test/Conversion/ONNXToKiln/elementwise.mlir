// RUN: kiln-opt %s --convert-onnx-to-kiln -split-input-file | FileCheck %s

// Binary arithmetic broadcasts as NumPy does; the ONNX result types may be
// static, dynamic or unranked.
// CHECK-LABEL: func.func @binary
// CHECK-SAME: (%[[A:.*]]: tensor<2x3xf32>, %[[B:.*]]: tensor<3xf32>)
// CHECK-SAME: -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>)
// CHECK: %[[ADD:.*]] = kiln.add %[[A]], %[[B]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: %[[SUB:.*]] = kiln.sub %[[A]], %[[B]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: %[[MUL:.*]] = kiln.mul %[[B]], %[[A]] : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: %[[DIV:.*]] = kiln.div %[[A]], %[[B]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: return %[[ADD]], %[[SUB]], %[[MUL]], %[[DIV]]
// CHECK-NOT: onnx.
func.func @binary(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> (tensor<*xf32>, tensor<2x3xf32>, tensor<?x3xf32>, tensor<*xf32>) {
  %0 = onnx.node "Add"(%a, %b) opset 14 {} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<*xf32>
  %1 = onnx.node "Sub"(%a, %b) opset 14 {} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %2 = onnx.node "Mul"(%b, %a) opset 14 {} : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<?x3xf32>
  %3 = onnx.node "Div"(%a, %b) opset 7 {} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<*xf32>
  return %0, %1, %2, %3 : tensor<*xf32>, tensor<2x3xf32>, tensor<?x3xf32>, tensor<*xf32>
}

// -----

// Both operands stretch: [4,1] and [1,5] broadcast to [4,5]; a rank-0
// operand broadcasts to anything.
// CHECK-LABEL: func.func @broadcast_both
// CHECK-SAME: (%[[A:.*]]: tensor<4x1xf32>, %[[B:.*]]: tensor<1x5xf32>, %[[S:.*]]: tensor<f32>)
// CHECK: %[[ADD:.*]] = kiln.add %[[A]], %[[B]] : (tensor<4x1xf32>, tensor<1x5xf32>) -> tensor<4x5xf32>
// CHECK: %[[MUL:.*]] = kiln.mul %[[ADD]], %[[S]] : (tensor<4x5xf32>, tensor<f32>) -> tensor<4x5xf32>
// CHECK: return %[[MUL]] : tensor<4x5xf32>
func.func @broadcast_both(%a: tensor<4x1xf32>, %b: tensor<1x5xf32>, %s: tensor<f32>) -> tensor<*xf32> {
  %0 = onnx.node "Add"(%a, %b) opset 13 {} : (tensor<4x1xf32>, tensor<1x5xf32>) -> tensor<4x5xf32>
  %1 = onnx.node "Mul"(%0, %s) opset 13 {} : (tensor<4x5xf32>, tensor<f32>) -> tensor<*xf32>
  return %1 : tensor<*xf32>
}

// -----

// Pow with an exponent of another type (opset 12+) computes in the base's type.
// CHECK-LABEL: func.func @pow
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>, %[[Y:.*]]: tensor<2x3xf32>, %[[I:.*]]: tensor<i64>)
// CHECK: %[[P0:.*]] = kiln.pow %[[X]], %[[Y]] : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: %[[C:.*]] = kiln.cast %[[I]] : tensor<i64> -> tensor<f32>
// CHECK: %[[P1:.*]] = kiln.pow %[[X]], %[[C]] : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
// CHECK: return %[[P0]], %[[P1]]
func.func @pow(%x: tensor<2x3xf32>, %y: tensor<2x3xf32>, %i: tensor<i64>) -> (tensor<*xf32>, tensor<*xf32>) {
  %0 = onnx.node "Pow"(%x, %y) opset 7 {} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<*xf32>
  %1 = onnx.node "Pow"(%x, %i) opset 15 {} : (tensor<2x3xf32>, tensor<i64>) -> tensor<*xf32>
  return %0, %1 : tensor<*xf32>, tensor<*xf32>
}

// -----

// CHECK-LABEL: func.func @unary
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
// CHECK: %[[SQRT:.*]] = kiln.sqrt %[[X]] : tensor<2x3xf32>
// CHECK: %[[REC:.*]] = kiln.reciprocal %[[SQRT]] : tensor<2x3xf32>
// CHECK: %[[NEG:.*]] = kiln.neg %[[REC]] : tensor<2x3xf32>
// CHECK: %[[ABS:.*]] = kiln.abs %[[NEG]] : tensor<2x3xf32>
// CHECK: %[[EXP:.*]] = kiln.exp %[[ABS]] : tensor<2x3xf32>
// CHECK: %[[LOG:.*]] = kiln.log %[[EXP]] : tensor<2x3xf32>
// CHECK: %[[TANH:.*]] = kiln.tanh %[[LOG]] : tensor<2x3xf32>
// CHECK: %[[SIG:.*]] = kiln.sigmoid %[[TANH]] : tensor<2x3xf32>
// CHECK: %[[RELU:.*]] = kiln.relu %[[SIG]] : tensor<2x3xf32>
// CHECK: %[[ERF:.*]] = kiln.erf %[[RELU]] : tensor<2x3xf32>
// CHECK: %[[SP:.*]] = kiln.softplus %[[ERF]] : tensor<2x3xf32>
// CHECK: return %[[SP]] : tensor<2x3xf32>
// CHECK-NOT: onnx.
func.func @unary(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = onnx.node "Sqrt"(%x) opset 13 {} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = onnx.node "Reciprocal"(%0) opset 13 {} : (tensor<2x3xf32>) -> tensor<*xf32>
  %2 = onnx.node "Neg"(%1) opset 13 {} : (tensor<*xf32>) -> tensor<*xf32>
  %3 = onnx.node "Abs"(%2) opset 13 {} : (tensor<*xf32>) -> tensor<?x?xf32>
  %4 = onnx.node "Exp"(%3) opset 13 {} : (tensor<?x?xf32>) -> tensor<*xf32>
  %5 = onnx.node "Log"(%4) opset 13 {} : (tensor<*xf32>) -> tensor<*xf32>
  %6 = onnx.node "Tanh"(%5) opset 13 {} : (tensor<*xf32>) -> tensor<*xf32>
  %7 = onnx.node "Sigmoid"(%6) opset 13 {} : (tensor<*xf32>) -> tensor<*xf32>
  %8 = onnx.node "Relu"(%7) opset 14 {} : (tensor<*xf32>) -> tensor<*xf32>
  %9 = onnx.node "Erf"(%8) opset 13 {} : (tensor<*xf32>) -> tensor<*xf32>
  %10 = onnx.node "Softplus"(%9) opset 1 {} : (tensor<*xf32>) -> tensor<2x3xf32>
  return %10 : tensor<2x3xf32>
}

// -----

// Unary ops at their oldest supported opset.
// CHECK-LABEL: func.func @unary_opset6
// CHECK: kiln.relu %{{.*}} : tensor<4xf32>
// CHECK: kiln.neg %{{.*}} : tensor<4xf32>
func.func @unary_opset6(%x: tensor<4xf32>) -> tensor<*xf32> {
  %0 = onnx.node "Relu"(%x) opset 6 {} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = onnx.node "Neg"(%0) opset 6 {} : (tensor<4xf32>) -> tensor<*xf32>
  return %1 : tensor<*xf32>
}

// -----

// LeakyRelu's alpha defaults to 0.01, Elu's to 1.0.
// CHECK-LABEL: func.func @leaky_elu
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
// CHECK: %[[L0:.*]] = kiln.leaky_relu %[[X]] {alpha = 2.000000e-01 : f32} : tensor<2x3xf32>
// CHECK: %[[L1:.*]] = kiln.leaky_relu %[[X]] {alpha = 0.00999999977 : f32} : tensor<2x3xf32>
// CHECK: %[[E0:.*]] = kiln.elu %[[X]] {alpha = 5.000000e-01 : f32} : tensor<2x3xf32>
// CHECK: %[[E1:.*]] = kiln.elu %[[X]] {alpha = 1.000000e+00 : f32} : tensor<2x3xf32>
// CHECK: return %[[L0]], %[[L1]], %[[E0]], %[[E1]]
func.func @leaky_elu(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %0 = onnx.node "LeakyRelu"(%x) opset 16 {alpha = 0.2 : f32} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = onnx.node "LeakyRelu"(%x) opset 6 {} : (tensor<2x3xf32>) -> tensor<*xf32>
  %2 = onnx.node "Elu"(%x) opset 6 {alpha = 0.5 : f32} : (tensor<2x3xf32>) -> tensor<*xf32>
  %3 = onnx.node "Elu"(%x) opset 6 {} : (tensor<2x3xf32>) -> tensor<*xf32>
  return %0, %1, %2, %3 : tensor<2x3xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// -----

// Clip opset 6: min/max are attributes.
// CHECK-LABEL: func.func @clip_opset6
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
// CHECK-DAG: %[[LO:.*]] = kiln.constant dense<-1.000000e+00> : tensor<f32>
// CHECK-DAG: %[[HI:.*]] = kiln.constant dense<6.000000e+00> : tensor<f32>
// CHECK: %[[MIN:.*]] = kiln.min %[[X]], %[[HI]] : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
// CHECK: %[[MAX:.*]] = kiln.max %[[MIN]], %[[LO]] : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
// CHECK: return %[[MAX]]
func.func @clip_opset6(%x: tensor<2x3xf32>) -> tensor<*xf32> {
  %0 = onnx.node "Clip"(%x) opset 6 {min = -1.0 : f32, max = 6.0 : f32} : (tensor<2x3xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

// Clip opset 6 with only a lower bound (max defaults to +inf): only a max.
// CHECK-LABEL: func.func @clip_opset6_min_only
// CHECK-SAME: (%[[X:.*]]: tensor<5xf32>)
// CHECK: %[[LO:.*]] = kiln.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NOT: kiln.min
// CHECK: %[[MAX:.*]] = kiln.max %[[X]], %[[LO]] : (tensor<5xf32>, tensor<f32>) -> tensor<5xf32>
// CHECK: return %[[MAX]]
func.func @clip_opset6_min_only(%x: tensor<5xf32>) -> tensor<*xf32> {
  %0 = onnx.node "Clip"(%x) opset 6 {min = 0.0 : f32} : (tensor<5xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

// Clip opset 13: min/max are optional scalar inputs.
// CHECK-LABEL: func.func @clip_opset13
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>, %[[LO:.*]]: tensor<f32>, %[[HI:.*]]: tensor<f32>)
// CHECK: %[[MIN:.*]] = kiln.min %[[X]], %[[HI]] : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
// CHECK: %[[MAX:.*]] = kiln.max %[[MIN]], %[[LO]] : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
// CHECK: %[[MIN2:.*]] = kiln.min %[[X]], %[[HI]] : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
// CHECK-NOT: kiln.max
// CHECK: return %[[MAX]], %[[MIN2]]
func.func @clip_opset13(%x: tensor<2x3xf32>, %lo: tensor<f32>, %hi: tensor<f32>) -> (tensor<2x3xf32>, tensor<*xf32>) {
  %0 = onnx.node "Clip"(%x, %lo, %hi) opset 13 {} : (tensor<2x3xf32>, tensor<f32>, tensor<f32>) -> tensor<2x3xf32>
  %none = onnx.none
  %1 = onnx.node "Clip"(%x, %none, %hi) opset 13 {} : (tensor<2x3xf32>, none, tensor<f32>) -> tensor<*xf32>
  return %0, %1 : tensor<2x3xf32>, tensor<*xf32>
}

// -----

// Clip opset 13 with no bounds is the identity.
// CHECK-LABEL: func.func @clip_no_bounds
// CHECK-SAME: (%[[X:.*]]: tensor<3xf32>)
// CHECK-NEXT: return %[[X]] : tensor<3xf32>
func.func @clip_no_bounds(%x: tensor<3xf32>) -> tensor<*xf32> {
  %0 = onnx.node "Clip"(%x) opset 13 {} : (tensor<3xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

// Variadic Sum/Max/Min fold left over their inputs, broadcasting; Mean
// divides the sum by the input count.
// CHECK-LABEL: func.func @variadic
// CHECK-SAME: (%[[A:.*]]: tensor<2x3xf32>, %[[B:.*]]: tensor<3xf32>, %[[C:.*]]: tensor<2x1xf32>)
// CHECK: %[[S0:.*]] = kiln.add %[[A]], %[[B]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: %[[S1:.*]] = kiln.add %[[S0]], %[[C]] : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
// CHECK: %[[MX:.*]] = kiln.max %[[A]], %[[B]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: %[[MN0:.*]] = kiln.min %[[C]], %[[B]] : (tensor<2x1xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: %[[MN1:.*]] = kiln.min %[[MN0]], %[[A]] : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: %[[M0:.*]] = kiln.add %[[A]], %[[C]] : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
// CHECK: %[[N:.*]] = kiln.constant dense<2.000000e+00> : tensor<f32>
// CHECK: %[[MEAN:.*]] = kiln.div %[[M0]], %[[N]] : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
// CHECK: return %[[S1]], %[[MX]], %[[MN1]], %[[MEAN]], %[[A]]
func.func @variadic(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %c: tensor<2x1xf32>)
    -> (tensor<2x3xf32>, tensor<*xf32>, tensor<*xf32>, tensor<2x3xf32>, tensor<*xf32>) {
  %0 = onnx.node "Sum"(%a, %b, %c) opset 13 {} : (tensor<2x3xf32>, tensor<3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
  %1 = onnx.node "Max"(%a, %b) opset 13 {} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<*xf32>
  %2 = onnx.node "Min"(%c, %b, %a) opset 13 {} : (tensor<2x1xf32>, tensor<3xf32>, tensor<2x3xf32>) -> tensor<*xf32>
  %3 = onnx.node "Mean"(%a, %c) opset 13 {} : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
  %4 = onnx.node "Sum"(%a) opset 8 {} : (tensor<2x3xf32>) -> tensor<*xf32>
  return %0, %1, %2, %3, %4 : tensor<2x3xf32>, tensor<*xf32>, tensor<*xf32>, tensor<2x3xf32>, tensor<*xf32>
}

// -----

// Comparisons produce i1; Not negates; Where selects, broadcasting all three.
// CHECK-LABEL: func.func @compare_where
// CHECK-SAME: (%[[A:.*]]: tensor<2x3xf32>, %[[B:.*]]: tensor<3xf32>, %[[F:.*]]: tensor<f32>)
// CHECK: %[[EQ:.*]] = kiln.equal %[[A]], %[[B]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
// CHECK: %[[LT:.*]] = kiln.less %[[A]], %[[B]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
// CHECK: %[[GT:.*]] = kiln.greater %[[B]], %[[F]] : (tensor<3xf32>, tensor<f32>) -> tensor<3xi1>
// CHECK: %[[NOT:.*]] = kiln.not %[[GT]] : tensor<3xi1>
// CHECK: %[[SEL:.*]] = kiln.select %[[NOT]], %[[A]], %[[F]] : (tensor<3xi1>, tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
// CHECK: return %[[EQ]], %[[LT]], %[[SEL]]
func.func @compare_where(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %f: tensor<f32>)
    -> (tensor<2x3xi1>, tensor<*xi1>, tensor<2x3xf32>) {
  %0 = onnx.node "Equal"(%a, %b) opset 13 {} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %1 = onnx.node "Less"(%a, %b) opset 13 {} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<*xi1>
  %2 = onnx.node "Greater"(%b, %f) opset 13 {} : (tensor<3xf32>, tensor<f32>) -> tensor<3xi1>
  %3 = onnx.node "Not"(%2) opset 1 {} : (tensor<3xi1>) -> tensor<*xi1>
  %4 = onnx.node "Where"(%3, %a, %f) opset 16 {} : (tensor<*xi1>, tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  return %0, %1, %4 : tensor<2x3xi1>, tensor<*xi1>, tensor<2x3xf32>
}

// -----

// Integer comparisons (Equal on i64 as the exporters emit for masks).
// CHECK-LABEL: func.func @compare_int
// CHECK: kiln.equal %{{.*}}, %{{.*}} : (tensor<4xi64>, tensor<i64>) -> tensor<4xi1>
func.func @compare_int(%a: tensor<4xi64>, %b: tensor<i64>) -> tensor<4xi1> {
  %0 = onnx.node "Equal"(%a, %b) opset 11 {} : (tensor<4xi64>, tensor<i64>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

// Cast by ONNX data type: 7 is INT64, 9 BOOL, 10 FLOAT16, 1 FLOAT (the
// identity for an f32 input).
// CHECK-LABEL: func.func @cast
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
// CHECK: %[[I:.*]] = kiln.cast %[[X]] : tensor<2x3xf32> -> tensor<2x3xi64>
// CHECK: %[[B:.*]] = kiln.cast %[[X]] : tensor<2x3xf32> -> tensor<2x3xi1>
// CHECK: %[[H:.*]] = kiln.cast %[[X]] : tensor<2x3xf32> -> tensor<2x3xf16>
// CHECK: return %[[I]], %[[B]], %[[H]], %[[X]]
func.func @cast(%x: tensor<2x3xf32>) -> (tensor<2x3xi64>, tensor<*xi1>, tensor<*xf16>, tensor<2x3xf32>) {
  %0 = onnx.node "Cast"(%x) opset 13 {to = 7 : i64} : (tensor<2x3xf32>) -> tensor<2x3xi64>
  %1 = onnx.node "Cast"(%x) opset 13 {to = 9 : i64} : (tensor<2x3xf32>) -> tensor<*xi1>
  %2 = onnx.node "Cast"(%x) opset 6 {to = 10 : i64} : (tensor<2x3xf32>) -> tensor<*xf16>
  %3 = onnx.node "Cast"(%x) opset 19 {to = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0, %1, %2, %3 : tensor<2x3xi64>, tensor<*xi1>, tensor<*xf16>, tensor<2x3xf32>
}

// -----

// Cast of a constant folds.
// CHECK-LABEL: func.func @cast_const
// CHECK-NEXT: %[[C:.*]] = kiln.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK-NEXT: return %[[C]]
func.func @cast_const() -> tensor<2xf32> {
  %c = onnx.constant dense<[1, 2]> : tensor<2xi64>
  %0 = onnx.node "Cast"(%c) opset 13 {to = 1 : i64} : (tensor<2xi64>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// Identity forwards its input.
// CHECK-LABEL: func.func @identity
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: return %[[X]] : tensor<2x3xf32>
func.func @identity(%x: tensor<2x3xf32>) -> tensor<*xf32> {
  %0 = onnx.node "Identity"(%x) opset 16 {} : (tensor<2x3xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

// Activations ONNX defines by formula become compositions of kiln ops.
// CHECK-LABEL: func.func @formula_activations
// PRelu: x < 0 ? slope * x : x.
// CHECK: %[[NEG:.*]] = kiln.less %[[X:[^,]*]], %{{.*}} : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xi1>
// CHECK: %[[SX:.*]] = kiln.mul %{{.*}}, %[[X]] : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: kiln.select %[[NEG]], %[[SX]], %[[X]]
// Selu: gamma * elu(x, alpha).
// CHECK: %[[E:.*]] = kiln.elu %[[X]] {alpha = 1.67326319 : f32}
// CHECK: kiln.mul %{{.*}}, %[[E]]
// HardSigmoid: max(min(alpha x + beta, 1), 0).
// CHECK: kiln.min
// CHECK: kiln.max
// ThresholdedRelu, Shrink: selects.
// CHECK: kiln.greater
// CHECK: kiln.select
// Softsign: x / (1 + |x|).
// CHECK: kiln.abs
// CHECK: kiln.div
// CHECK-NOT: onnx.
func.func @formula_activations(%x: tensor<2x3xf32>, %slope: tensor<3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
  %0 = onnx.node "PRelu"(%x, %slope) opset 16 {} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = onnx.node "Selu"(%x) opset 6 {} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = onnx.node "HardSigmoid"(%x) opset 6 {alpha = 0.5 : f32} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %3 = onnx.node "ThresholdedRelu"(%x) opset 10 {alpha = 2.0 : f32} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %4 = onnx.node "Shrink"(%x) opset 9 {lambd = 1.5 : f32} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %5 = onnx.node "Softsign"(%x) opset 1 {} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// Celu, HardSwish, Tan, Sinh, Cosh, CastLike, IsNaN, IsInf.
// CHECK-LABEL: func.func @formula_misc
// CHECK: kiln.elu
// CHECK: kiln.min
// CHECK: kiln.sin
// CHECK: kiln.cos
// CHECK: kiln.exp
// CHECK: kiln.cast %{{.*}} : tensor<4xf32> -> tensor<4xi32>
// CHECK: kiln.equal %[[Y:[^,]*]], %[[Y]]
// CHECK: kiln.not
// CHECK: kiln.or
// CHECK-NOT: onnx.
func.func @formula_misc(%x: tensor<4xf32>, %like: tensor<1xi32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xi32>, tensor<4xi1>, tensor<4xi1>) {
  %0 = onnx.node "Celu"(%x) opset 12 {alpha = 2.0 : f32} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = onnx.node "HardSwish"(%x) opset 14 {} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = onnx.node "Tan"(%x) opset 7 {} : (tensor<4xf32>) -> tensor<4xf32>
  %3 = onnx.node "Sinh"(%x) opset 9 {} : (tensor<4xf32>) -> tensor<4xf32>
  %4 = onnx.node "Cosh"(%x) opset 9 {} : (tensor<4xf32>) -> tensor<4xf32>
  %5 = onnx.node "CastLike"(%x, %like) opset 15 {} : (tensor<4xf32>, tensor<1xi32>) -> tensor<4xi32>
  %6 = onnx.node "IsNaN"(%x) opset 13 {} : (tensor<4xf32>) -> tensor<4xi1>
  %7 = onnx.node "IsInf"(%x) opset 10 {} : (tensor<4xf32>) -> tensor<4xi1>
  return %0, %1, %2, %3, %4, %5, %6, %7 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xi32>, tensor<4xi1>, tensor<4xi1>
}

// -----

// Round half to even: kiln.round (one kernel, std::nearbyint).
// CHECK-LABEL: func.func @round
// CHECK: %[[R:.*]] = kiln.round %[[X:[^ ]*]] : tensor<5xf32>
// CHECK-NEXT: return %[[R]]
func.func @round(%x: tensor<5xf32>) -> tensor<5xf32> {
  %0 = onnx.node "Round"(%x) opset 11 {} : (tensor<5xf32>) -> tensor<5xf32>
  return %0 : tensor<5xf32>
}
