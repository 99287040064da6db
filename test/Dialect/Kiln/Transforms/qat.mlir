// RUN: kiln-opt %s --kiln-qat=freeze=50 | FileCheck %s
// RUN: kiln-opt %s --kiln-qat --kiln-autodiff | FileCheck %s --check-prefix=AD
// RUN: kiln-opt %s --kiln-qat --kiln-eval-mode | FileCheck %s --check-prefix=EVAL
// RUN: not kiln-opt %s --kiln-qat=freeze=0 2>&1 | FileCheck %s --check-prefix=FREEZE
// RUN: not kiln-opt %s --kiln-qat=averaging=0 2>&1 | FileCheck %s --check-prefix=AVG

// The Gemm (transposed weight [N, K]: channel axis 0) and the MatMul
// (weight [K, N]: axis 1) compute on fake-quantized weights (int8,
// symmetric, per channel) and inputs (uint8, per tensor, an observer each);
// the bias is not quantized. The module lists the sites.
// CHECK: module attributes {kiln.qat_sites = [{axis = 0 : i64, name = "fc1", node = 0 : i64, observer = "fc1/observer", weight = "w1"}, {axis = 1 : i64, name = "fc2", node = 2 : i64, observer = "fc2/observer", weight = "w2"}]}
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[W1:[^:]*]]: tensor<8x4xf32> {kiln.param, onnx.name = "w1"}
// CHECK-SAME: %[[W2:[^:]*]]: tensor<8x2xf32> {kiln.param, onnx.name = "w2"}
// CHECK-SAME: %[[O1:[^:]*]]: tensor<3xf32> {kiln.init = "zeros", kiln.param, kiln.role = "state", onnx.name = "fc1/observer"}
// CHECK-SAME: %[[O2:[^:]*]]: tensor<3xf32> {kiln.init = "zeros", kiln.param, kiln.role = "state", onnx.name = "fc2/observer"}
// CHECK-DAG: %[[S2:.*]] = kiln.absmax_scale %[[W2]] {axis = 1 : i64, quant_max = 127 : i64} : (tensor<8x2xf32>) -> tensor<2xf32>
// CHECK-DAG: %[[Q2:.*]] = kiln.fake_quant %[[W2]], %[[S2]], %{{.*}} {axis = 1 : i64, quant_max = 127 : i64, quant_min = -127 : i64}
// CHECK-DAG: %[[S1:.*]] = kiln.absmax_scale %[[W1]] {axis = 0 : i64, quant_max = 127 : i64} : (tensor<8x4xf32>) -> tensor<8xf32>
// CHECK-DAG: %[[Q1:.*]] = kiln.fake_quant %[[W1]], %[[S1]], %{{.*}} {axis = 0 : i64, quant_max = 127 : i64, quant_min = -127 : i64}
// CHECK-DAG: %[[LO:.*]] = kiln.reduce_min %arg0 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x4xf32>) -> tensor<f32>
// CHECK-DAG: %[[HI:.*]] = kiln.reduce_max %arg0 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x4xf32>) -> tensor<f32>
// CHECK-DAG: %[[SC:.*]], %[[ZP:.*]], %{{.*}} = kiln.minmax_observe %[[LO]], %[[HI]], %[[O1]] {averaging = 0.00999999977 : f32, freeze = 50 : i64, quant_max = 255 : i64, quant_min = 0 : i64}
// CHECK-DAG: %[[XQ:.*]] = kiln.fake_quant %arg0, %[[SC]], %[[ZP]] {quant_max = 255 : i64, quant_min = 0 : i64} : (tensor<2x4xf32>, tensor<f32>, tensor<f32>) -> tensor<2x4xf32>
// CHECK: kiln.matmul %[[XQ]], %[[Q1]] {transpose_rhs = true}
// CHECK: %[[H:.*]] = kiln.add
// CHECK: kiln.reduce_min %[[H]]
// CHECK: kiln.reduce_max %[[H]]
// CHECK: kiln.minmax_observe %{{.*}}, %{{.*}}, %[[O2]]
// CHECK: kiln.matmul %{{.*}}, %[[Q2]]

// Autodiff: the observers are state, updated by minmax_observe; the weights
// get their gradient straight through fake_quant.
// AD-LABEL: func.func @train_step
// AD-SAME: kiln.role = "state", onnx.name = "fc1/observer"
// AD-SAME: {kiln.update = {{[0-9]+}} : i64, onnx.name = "fc1/observer"}
// AD: kiln.fake_quant_grad %{{.*}}, %arg1, {{.*}} {axis = 0 : i64, quant_max = 127 : i64, quant_min = -127 : i64}
// AD: return

// Evaluation reads the observers and leaves them (freeze = 0).
// EVAL: kiln.minmax_observe %{{.*}}, %{{.*}}, %{{.*}} {averaging = 0.00999999977 : f32, freeze = 0 : i64

// FREEZE: --kiln-qat: freeze must be at least 1
// AVG: --kiln-qat: averaging must be in (0, 1], got 0
module {
func.func @forward(%x: tensor<2x4xf32> {onnx.name = "x"},
                   %w1: tensor<8x4xf32> {kiln.param, onnx.name = "w1"},
                   %b1: tensor<8xf32> {kiln.param, onnx.name = "b1"},
                   %w2: tensor<8x2xf32> {kiln.param, onnx.name = "w2"},
                   %t: tensor<2x2xf32> {onnx.name = "t"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"}) {
  %a = kiln.matmul %x, %w1 {transpose_rhs = true} : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32> loc(#fc1)
  %h = kiln.add %a, %b1 : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32> loc(#add)
  %y = kiln.matmul %h, %w2 : (tensor<2x8xf32>, tensor<8x2xf32>) -> tensor<2x2xf32> loc(#fc2)
  %l = kiln.mse_loss %y, %t : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
}
#f0 = loc("m.onnx":1:0)
#f1 = loc("m.onnx":2:0)
#f2 = loc("m.onnx":3:0)
#fc1 = loc("fc1"(#f0))
#add = loc("add"(#f1))
#fc2 = loc("fc2"(#f2))
