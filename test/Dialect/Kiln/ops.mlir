// RUN: kiln-opt %s | kiln-opt | FileCheck %s
// RUN: kiln-opt %s --mlir-print-op-generic | kiln-opt | FileCheck %s

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%x: tensor<4x8xf32>, %y: tensor<8xf32>, %m: tensor<4x8xi1>) -> tensor<4x8xf32> {
  // CHECK: kiln.exp %{{.*}} : tensor<4x8xf32>
  %0 = kiln.exp %x : tensor<4x8xf32>
  // CHECK: kiln.leaky_relu %{{.*}} {alpha = 1.000000e-01 : f32} : tensor<4x8xf32>
  %1 = kiln.leaky_relu %0 {alpha = 0.1 : f32} : tensor<4x8xf32>
  // CHECK: kiln.gelu %{{.*}} {approximate = "tanh"} : tensor<4x8xf32>
  %2 = kiln.gelu %1 {approximate = "tanh"} : tensor<4x8xf32>
  // CHECK: kiln.add %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %3 = kiln.add %2, %y : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  // CHECK: kiln.less %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xi1>
  %4 = kiln.less %3, %y : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xi1>
  %5 = kiln.and %4, %m : (tensor<4x8xi1>, tensor<4x8xi1>) -> tensor<4x8xi1>
  // CHECK: kiln.select %{{.*}}, %{{.*}}, %{{.*}} : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %6 = kiln.select %5, %3, %y : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  // CHECK: kiln.cast %{{.*}} : tensor<4x8xf32> -> tensor<4x8xbf16>
  %7 = kiln.cast %6 : tensor<4x8xf32> -> tensor<4x8xbf16>
  %8 = kiln.cast %7 : tensor<4x8xbf16> -> tensor<4x8xf32>
  return %8 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @linalg
func.func @linalg(%a: tensor<2x4x8xf32>, %b: tensor<16x8xf32>, %x: tensor<2x3x8x8xf32>, %w: tensor<6x1x3x3xf32>) -> (tensor<2x4x16xf32>, tensor<2x6x4x4xf32>) {
  // CHECK: kiln.matmul %{{.*}}, %{{.*}} {transpose_rhs = true} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %0 = kiln.matmul %a, %b {transpose_rhs = true} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  // CHECK: kiln.conv %{{.*}}, %{{.*}} {dilations = array<i64: 1, 1>, groups = 3 : i64, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>}
  %1 = kiln.conv %x, %w {strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, groups = 3 : i64} : (tensor<2x3x8x8xf32>, tensor<6x1x3x3xf32>) -> tensor<2x6x4x4xf32>
  return %0, %1 : tensor<2x4x16xf32>, tensor<2x6x4x4xf32>
}

// CHECK-LABEL: func.func @nn
func.func @nn(%x: tensor<2x3x8x8xf32>, %c: tensor<3xf32>, %t: tensor<2x8x32xf32>, %g: tensor<32xf32>) -> (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>) {
  // CHECK: kiln.max_pool
  %0 = kiln.max_pool %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>} : (tensor<2x3x8x8xf32>) -> tensor<2x3x4x4xf32>
  // CHECK: kiln.avg_pool {{.*}}count_include_pad = true
  %1 = kiln.avg_pool %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>, padding = array<i64: 1, 1, 0, 0>, count_include_pad = true} : (tensor<2x3x8x8xf32>) -> tensor<2x3x4x4xf32>
  // CHECK: kiln.batch_norm_train
  %2:3 = kiln.batch_norm_train %0, %c, %c, %c, %c {epsilon = 1.0e-05 : f32, momentum = 0.9 : f32} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
  // CHECK: kiln.layer_norm {{.*}} -> (tensor<2x8x32xf32>, tensor<2x8x1xf32>, tensor<2x8x1xf32>)
  %3:3 = kiln.layer_norm %t, %g, %g {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x8x32xf32>, tensor<32xf32>, tensor<32xf32>) -> (tensor<2x8x32xf32>, tensor<2x8x1xf32>, tensor<2x8x1xf32>)
  // CHECK: kiln.softmax {{.*}} {axis = 2 : i64}
  %4 = kiln.softmax %3#0 {axis = 2 : i64} : (tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  // CHECK: kiln.dropout {{.*}} -> (tensor<2x8x32xf32>, tensor<2x8x32xi1>)
  %5:2 = kiln.dropout %4 {ratio = 0.1 : f32, seed = 7 : i64} : (tensor<2x8x32xf32>) -> (tensor<2x8x32xf32>, tensor<2x8x32xi1>)
  return %1, %2#0, %2#1, %3#0, %5#0 : tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>
}

// CHECK-LABEL: func.func @shapes
func.func @shapes(%x: tensor<2x3x4xf32>, %ids: tensor<5xi64>) -> (tensor<4x3x2xf32>, tensor<2x2x4xf32>, tensor<2x6x4xf32>, tensor<2x5x6xf32>, tensor<5x3x4xf32>, tensor<3x2x3x4xf32>, tensor<24xf32>, tensor<2x4xi64>) {
  %0 = kiln.transpose %x {perm = array<i64: 2, 1, 0>} : (tensor<2x3x4xf32>) -> tensor<4x3x2xf32>
  // CHECK: kiln.slice {{.*}} : (tensor<2x3x4xf32>) -> tensor<2x2x4xf32>
  %1 = kiln.slice %x {starts = array<i64: 0, 2, 0>, limits = array<i64: 2, 0, 4>, strides = array<i64: 1, -1, 1>} : (tensor<2x3x4xf32>) -> tensor<2x2x4xf32>
  %2 = kiln.concat %x, %x {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x6x4xf32>
  // CHECK: kiln.pad {{.*}}mode = "reflect"
  %3 = kiln.pad %x {low = array<i64: 0, 1, 1>, high = array<i64: 0, 1, 1>, mode = "reflect"} : (tensor<2x3x4xf32>) -> tensor<2x5x6xf32>
  // CHECK: kiln.gather {{.*}} : (tensor<2x3x4xf32>, tensor<5xi64>) -> tensor<5x3x4xf32>
  %4 = kiln.gather %x, %ids {axis = 0 : i64} : (tensor<2x3x4xf32>, tensor<5xi64>) -> tensor<5x3x4xf32>
  %5 = kiln.broadcast %x : tensor<2x3x4xf32> -> tensor<3x2x3x4xf32>
  %6 = kiln.reshape %x : tensor<2x3x4xf32> -> tensor<24xf32>
  // CHECK: kiln.argmax {{.*}} -> tensor<2x4xi64>
  %7 = kiln.argmax %x {axis = 1 : i64, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<2x4xi64>
  return %0, %1, %2, %3, %4, %5, %6, %7 : tensor<4x3x2xf32>, tensor<2x2x4xf32>, tensor<2x6x4xf32>, tensor<2x5x6xf32>, tensor<5x3x4xf32>, tensor<3x2x3x4xf32>, tensor<24xf32>, tensor<2x4xi64>
}

// CHECK-LABEL: func.func @losses
func.func @losses(%logits: tensor<4x10xf32>, %labels: tensor<4xi64>, %w: tensor<10xf32>, %p: tensor<4x3xf32>) -> (tensor<f32>, tensor<4xf32>, tensor<f32>) {
  // CHECK: kiln.softmax_cross_entropy {{.*}}ignore_index = -100 : i64
  %0 = kiln.softmax_cross_entropy %logits, %labels, %w {reduction = "mean", ignore_index = -100 : i64} : (tensor<4x10xf32>, tensor<4xi64>, tensor<10xf32>) -> tensor<f32>
  // CHECK: kiln.nll_loss {{.*}} -> tensor<4xf32>
  %1 = kiln.nll_loss %logits, %labels {reduction = "none"} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<4xf32>
  // CHECK: kiln.mse_loss
  %2 = kiln.mse_loss %p, %p : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<f32>
  return %0, %1, %2 : tensor<f32>, tensor<4xf32>, tensor<f32>
}

// CHECK-LABEL: func.func @magnitude_prune
// CHECK: kiln.magnitude_prune %{{.*}}, %{{.*}}, %{{.*}} {end = 100 : i64, every = 10 : i64, sparsity = 5.000000e-01 : f32, start = 0 : i64}
func.func @magnitude_prune(%p: tensor<16x8xf32>, %q: tensor<16x8xf32>, %t: tensor<i64>) -> tensor<16x8xf32> {
  %p1, %q1 = kiln.magnitude_prune %p, %q, %t {sparsity = 0.5 : f32, start = 0 : i64, end = 100 : i64, every = 10 : i64}
      : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<i64>) -> (tensor<16x8xf32>, tensor<16x8xf32>)
  return %p1 : tensor<16x8xf32>
}

// CHECK-LABEL: func.func @indexing
func.func @indexing(%x: tensor<2x16x4xf32>, %i: tensor<2x16x2xi64>, %u: tensor<2x16x2xf32>, %n: tensor<2x1xi64>, %s: tensor<2x16x4xf32>) -> (tensor<2x16x2xf32>, tensor<2x16x2xi64>, tensor<2x16x4xf32>, tensor<2x16x4xf32>, tensor<2x16x4xf32>, tensor<2x16x4xf32>) {
  // CHECK: kiln.topk %{{.*}} {axis = 2 : i64, k = 2 : i64} : (tensor<2x16x4xf32>) -> (tensor<2x16x2xf32>, tensor<2x16x2xi64>)
  %v, %vi = kiln.topk %x {axis = 2 : i64, k = 2 : i64} : (tensor<2x16x4xf32>) -> (tensor<2x16x2xf32>, tensor<2x16x2xi64>)
  // CHECK: kiln.cumsum %{{.*}} {axis = 1 : i64, reverse = true}
  %c = kiln.cumsum %x {axis = 1 : i64, reverse = true} : (tensor<2x16x4xf32>) -> tensor<2x16x4xf32>
  // CHECK: kiln.scatter_elements %{{.*}} {axis = 2 : i64, reduction = "add"}
  %se = kiln.scatter_elements %x, %i, %u {axis = 2 : i64, reduction = "add"} : (tensor<2x16x4xf32>, tensor<2x16x2xi64>, tensor<2x16x2xf32>) -> tensor<2x16x4xf32>
  // CHECK: kiln.gather_elements_grad %{{.*}}, %{{.*}} {axis = 2 : i64}
  %g = kiln.gather_elements_grad %u, %i {axis = 2 : i64} : (tensor<2x16x2xf32>, tensor<2x16x2xi64>) -> tensor<2x16x4xf32>
  // CHECK: kiln.scatter_nd
  %nd = kiln.scatter_nd %x, %n, %s {reduction = "none"} : (tensor<2x16x4xf32>, tensor<2x1xi64>, tensor<2x16x4xf32>) -> tensor<2x16x4xf32>
  return %v, %vi, %c, %se, %g, %nd : tensor<2x16x2xf32>, tensor<2x16x2xi64>, tensor<2x16x4xf32>, tensor<2x16x4xf32>, tensor<2x16x4xf32>, tensor<2x16x4xf32>
}
