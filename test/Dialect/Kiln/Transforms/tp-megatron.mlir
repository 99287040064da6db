// RUN: kiln-opt %s -split-input-file --kiln-tp-megatron=tp=2 -verify-diagnostics | FileCheck %s
// RUN: kiln-opt %s -split-input-file --kiln-tp-megatron=tp=2 -verify-diagnostics | kiln-opt -split-input-file --kiln-shard="mesh=tp=2 func=forward" --kiln-shard-propagation --kiln-partition | FileCheck %s --check-prefix=PART
// RUN: kiln-opt %s -split-input-file --kiln-tp-megatron="tp=2 sequence-parallel=true" -verify-diagnostics | kiln-opt -split-input-file --kiln-shard="mesh=tp=2 func=forward" --kiln-shard-propagation --kiln-partition | FileCheck %s --check-prefix=SP

// A decoder block, found by structure (the names say nothing): a fused QKV
// projection cut into Q, K, V and reshaped into 2 heads, the output
// projection the heads reach, and an MLP (up, GELU, down). The QKV weight
// [24, 8] becomes [3, 8, 8] (its model shape kept) split along its 8
// output features per part, so each rank holds its head of Q, K and V; the
// bias [24] becomes [3, 8]; the output and down projections are split on
// their input features, the up projection on its output features.
// CHECK: kiln.tp_blocks = [{heads = 2 : i64, kind = "attention", params = ["attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight"]}, {kind = "mlp", params = ["mlp.up.weight", "mlp.up.bias", "mlp.down.weight"]}]
// CHECK-LABEL: func.func @forward
// CHECK-SAME: tensor<3x8x8xf32> {kiln.model_shape = array<i64: 24, 8>, kiln.param, kiln.role = "weight", kiln.sharding = {{\[\[}}], ["tp"], []], onnx.name = "attn.qkv.weight"}
// CHECK-SAME: tensor<3x8xf32> {kiln.model_shape = array<i64: 24>, kiln.param, kiln.role = "weight", kiln.sharding = {{\[\[}}], ["tp"]], onnx.name = "attn.qkv.bias"}
// CHECK-SAME: tensor<8x8xf32> {kiln.param, kiln.role = "weight", kiln.sharding = {{\[\[}}], ["tp"]], onnx.name = "attn.proj.weight"}
// CHECK-SAME: tensor<8xf32> {kiln.param, kiln.role = "weight", onnx.name = "attn.proj.bias"}
// CHECK-SAME: tensor<32x8xf32> {kiln.param, kiln.role = "weight", kiln.sharding = {{\[\[}}"tp"], []], onnx.name = "mlp.up.weight"}
// CHECK-SAME: tensor<32xf32> {kiln.param, kiln.role = "weight", kiln.sharding = {{\[\[}}"tp"]], onnx.name = "mlp.up.bias"}
// CHECK-SAME: tensor<8x32xf32> {kiln.param, kiln.role = "weight", kiln.sharding = {{\[\[}}], ["tp"]], onnx.name = "mlp.down.weight"}
// Q is part 0 of the view: its weight rows and bias.
// CHECK: %[[WQ:.*]] = kiln.slice %arg1 {limits = array<i64: 1, 8, 8>, starts = array<i64: 0, 0, 0>
// CHECK: %[[WQ2:.*]] = kiln.reshape %[[WQ]] : tensor<1x8x8xf32> -> tensor<8x8xf32>
// CHECK: kiln.matmul %arg0, %[[WQ2]] {transpose_rhs = true}
// CHECK: kiln.slice %arg2 {limits = array<i64: 1, 8>, starts = array<i64: 0, 0>
// CHECK: kiln.slice %arg1 {limits = array<i64: 2, 8, 8>, starts = array<i64: 1, 0, 0>
// CHECK: kiln.slice %arg1 {limits = array<i64: 3, 8, 8>, starts = array<i64: 2, 0, 0>
// CHECK-NOT: tensor<2x4x24xf32>

// Partitioned over tp=2: each rank computes one head and a half of the
// MLP's hidden features; exactly one all-reduce per block in forward, of
// the row-parallel projections' partial sums, before their replicated bias.
// PART-LABEL: func.func @forward
// PART-SAME: tensor<3x4x8xf32>
// PART-NOT: shard.
// PART: kiln.matmul %{{.*}} : (tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x1x4x4xf32>
// PART-NOT: shard.
// PART: %[[A:.*]] = kiln.matmul %{{.*}}, %arg3 {transpose_rhs = true} : (tensor<2x4x4xf32>, tensor<8x4xf32>) -> tensor<2x4x8xf32>
// PART-NEXT: %[[AR:.*]] = shard.all_reduce %[[A]] on @kiln_mesh grid_axes = [0] : tensor<2x4x8xf32>
// PART-NEXT: kiln.add %arg4, %[[AR]]
// PART-NOT: shard.
// PART: kiln.gelu %{{.*}} : tensor<2x4x16xf32>
// PART: %[[M:.*]] = kiln.matmul %{{.*}}, %arg7 {transpose_rhs = true} : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32>
// PART-NEXT: shard.all_reduce %[[M]] on @kiln_mesh grid_axes = [0]
// PART-NOT: shard.
// PART: return

// Sequence parallelism: each row projection's partial sums become one
// reduce-scatter along the sequence (its bias and the residual add on this
// rank's 2 of 4 positions), and the MLP's input is all-gathered along the
// sequence before the column-parallel up projection.
// SP-LABEL: func.func @forward
// SP-NOT: shard.all_reduce
// SP: %[[A:.*]] = kiln.matmul %{{.*}}, %arg3 {transpose_rhs = true} : (tensor<2x4x4xf32>, tensor<8x4xf32>) -> tensor<2x4x8xf32>
// SP-NEXT: shard.reduce_scatter %[[A]] on @kiln_mesh grid_axes = [0] scatter_axis = 1 : tensor<2x4x8xf32> -> tensor<2x2x8xf32>
// SP: %[[G:.*]] = shard.all_gather %{{.*}} on @kiln_mesh grid_axes = [0] gather_axis = 1 : tensor<2x2x8xf32> -> tensor<2x4x8xf32>
// SP-NEXT: kiln.matmul %[[G]], %arg5 {transpose_rhs = true} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
// SP: %[[M:.*]] = kiln.matmul %{{.*}}, %arg7 {transpose_rhs = true} : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32>
// SP-NEXT: shard.reduce_scatter %[[M]] on @kiln_mesh grid_axes = [0] scatter_axis = 1
// SP: shard.all_reduce %{{.*}} reduction = average : tensor<f32>
// SP-NEXT: return
func.func @forward(%x: tensor<2x4x8xf32> {onnx.name = "x"},
                   %wqkv: tensor<24x8xf32> {kiln.param, kiln.role = "weight", onnx.name = "attn.qkv.weight"},
                   %bqkv: tensor<24xf32> {kiln.param, kiln.role = "weight", onnx.name = "attn.qkv.bias"},
                   %wo: tensor<8x8xf32> {kiln.param, kiln.role = "weight", onnx.name = "attn.proj.weight"},
                   %bo: tensor<8xf32> {kiln.param, kiln.role = "weight", onnx.name = "attn.proj.bias"},
                   %w1: tensor<32x8xf32> {kiln.param, kiln.role = "weight", onnx.name = "mlp.up.weight"},
                   %b1: tensor<32xf32> {kiln.param, kiln.role = "weight", onnx.name = "mlp.up.bias"},
                   %w2: tensor<8x32xf32> {kiln.param, kiln.role = "weight", onnx.name = "mlp.down.weight"},
                   %b2: tensor<8xf32> {kiln.param, kiln.role = "weight", onnx.name = "mlp.down.bias"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"}) {
  %qkv0 = kiln.matmul %x, %wqkv {transpose_rhs = true} : (tensor<2x4x8xf32>, tensor<24x8xf32>) -> tensor<2x4x24xf32>
  %qkv = kiln.add %bqkv, %qkv0 : (tensor<24xf32>, tensor<2x4x24xf32>) -> tensor<2x4x24xf32>
  %q0 = kiln.slice %qkv {limits = array<i64: 2, 4, 8>, starts = array<i64: 0, 0, 0>, strides = array<i64: 1, 1, 1>} : (tensor<2x4x24xf32>) -> tensor<2x4x8xf32>
  %k0 = kiln.slice %qkv {limits = array<i64: 2, 4, 16>, starts = array<i64: 0, 0, 8>, strides = array<i64: 1, 1, 1>} : (tensor<2x4x24xf32>) -> tensor<2x4x8xf32>
  %v0 = kiln.slice %qkv {limits = array<i64: 2, 4, 24>, starts = array<i64: 0, 0, 16>, strides = array<i64: 1, 1, 1>} : (tensor<2x4x24xf32>) -> tensor<2x4x8xf32>
  %q1 = kiln.reshape %q0 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %k1 = kiln.reshape %k0 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %v1 = kiln.reshape %v0 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %q = kiln.transpose %q1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
  %k = kiln.transpose %k1 {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
  %v = kiln.transpose %v1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
  %s = kiln.matmul %q, %k : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %p = kiln.softmax %s {axis = 3 : i64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %y0 = kiln.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %y1 = kiln.transpose %y0 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x2x4x4xf32>) -> tensor<2x4x2x4xf32>
  %y = kiln.reshape %y1 : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
  %o0 = kiln.matmul %y, %wo {transpose_rhs = true} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %o = kiln.add %bo, %o0 : (tensor<8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %r = kiln.add %x, %o : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %h0 = kiln.matmul %r, %w1 {transpose_rhs = true} : (tensor<2x4x8xf32>, tensor<32x8xf32>) -> tensor<2x4x32xf32>
  %h1 = kiln.add %b1, %h0 : (tensor<32xf32>, tensor<2x4x32xf32>) -> tensor<2x4x32xf32>
  %h = kiln.gelu %h1 : tensor<2x4x32xf32>
  %d0 = kiln.matmul %h, %w2 {transpose_rhs = true} : (tensor<2x4x32xf32>, tensor<8x32xf32>) -> tensor<2x4x8xf32>
  %d = kiln.add %b2, %d0 : (tensor<8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %z = kiln.add %r, %d : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %l = kiln.reduce_mean %z {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<2x4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Heads that tp does not divide: the block stays whole, and says so.
// CHECK: kiln.tp_blocks = []
// expected-warning @+1 {{--tp megatron: an attention block of 3 heads (2 ranks do not divide them) stays whole}}
module {
func.func @forward(%x: tensor<2x4x6xf32> {onnx.name = "x"},
                   %wqkv: tensor<18x6xf32> {kiln.param, kiln.role = "weight", onnx.name = "qkv"},
                   %wo: tensor<6x6xf32> {kiln.param, kiln.role = "weight", onnx.name = "proj"})
    -> (tensor<2x4x6xf32> {onnx.name = "y"}) {
  %qkv = kiln.matmul %x, %wqkv {transpose_rhs = true} : (tensor<2x4x6xf32>, tensor<18x6xf32>) -> tensor<2x4x18xf32>
  %q0 = kiln.slice %qkv {limits = array<i64: 2, 4, 6>, starts = array<i64: 0, 0, 0>, strides = array<i64: 1, 1, 1>} : (tensor<2x4x18xf32>) -> tensor<2x4x6xf32>
  %k0 = kiln.slice %qkv {limits = array<i64: 2, 4, 12>, starts = array<i64: 0, 0, 6>, strides = array<i64: 1, 1, 1>} : (tensor<2x4x18xf32>) -> tensor<2x4x6xf32>
  %v0 = kiln.slice %qkv {limits = array<i64: 2, 4, 18>, starts = array<i64: 0, 0, 12>, strides = array<i64: 1, 1, 1>} : (tensor<2x4x18xf32>) -> tensor<2x4x6xf32>
  %q1 = kiln.reshape %q0 : tensor<2x4x6xf32> -> tensor<2x4x3x2xf32>
  %k1 = kiln.reshape %k0 : tensor<2x4x6xf32> -> tensor<2x4x3x2xf32>
  %v1 = kiln.reshape %v0 : tensor<2x4x6xf32> -> tensor<2x4x3x2xf32>
  %s = kiln.add %q1, %k1 : (tensor<2x4x3x2xf32>, tensor<2x4x3x2xf32>) -> tensor<2x4x3x2xf32>
  %t = kiln.add %s, %v1 : (tensor<2x4x3x2xf32>, tensor<2x4x3x2xf32>) -> tensor<2x4x3x2xf32>
  %y = kiln.reshape %t : tensor<2x4x3x2xf32> -> tensor<2x4x6xf32>
  %o = kiln.matmul %y, %wo {transpose_rhs = true} : (tensor<2x4x6xf32>, tensor<6x6xf32>) -> tensor<2x4x6xf32>
  return %o : tensor<2x4x6xf32>
}
}

// -----

// A tied weight (used twice) is not split, and a chain through a
// non-elementwise op is not an MLP block: nothing is found.
// CHECK: kiln.tp_blocks = []
// CHECK-NOT: kiln.sharding
module {
func.func @forward(%x: tensor<4x8xf32> {onnx.name = "x"},
                   %w: tensor<8x8xf32> {kiln.param, kiln.role = "weight", onnx.name = "w"},
                   %w2: tensor<8x8xf32> {kiln.param, kiln.role = "weight", onnx.name = "w2"})
    -> (tensor<4x8xf32> {onnx.name = "y"}) {
  %a = kiln.matmul %x, %w {transpose_rhs = true} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r = kiln.relu %a : tensor<4x8xf32>
  %b = kiln.matmul %r, %w {transpose_rhs = true} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %c = kiln.softmax %b {axis = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %d = kiln.matmul %c, %w2 {transpose_rhs = true} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %d : tensor<4x8xf32>
}
}
