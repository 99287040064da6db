// RUN: kiln-opt %s --kiln-data-parallel="dp=2 compression=int8" | FileCheck %s
// RUN: kiln-opt %s --kiln-data-parallel="dp=2 compression=bf16" | FileCheck %s --check-prefix=BF16
// RUN: kiln-opt %s --kiln-data-parallel="dp=2" | FileCheck %s --check-prefix=NONE
// RUN: not kiln-opt %s --kiln-data-parallel="dp=2 compression=int4" 2>&1 | FileCheck %s --check-prefix=BAD

// With a wire format, the gradients' all-reduces carry it
// (kiln.compression): the runtime sends them compressed, with error
// feedback. The loss's all-reduce stays exact, and so do gradients that are
// not f32.
// CHECK-LABEL: func.func @train_step
// CHECK: shard.all_reduce %{{.*}} reduction = average : tensor<f32>
// CHECK: shard.all_reduce %{{.*}} grid_axes = [0] {kiln.compression = "int8"} : tensor<4xf32>
// CHECK: shard.all_reduce %{{.*}} grid_axes = [0] : tensor<4xf64>
// BF16: shard.all_reduce %{{.*}} grid_axes = [0] {kiln.compression = "bf16"} : tensor<4xf32>
// NONE-NOT: kiln.compression
// BAD: error: --kiln-data-parallel: compression must be none, bf16, fp16 or int8, got 'int4'
func.func @train_step(%w: tensor<4xf32> {kiln.param, kiln.role = "weight", onnx.name = "w"},
                      %v: tensor<4xf64> {kiln.param, kiln.role = "weight", onnx.name = "v"},
                      %x: tensor<8x4xf32> {onnx.name = "x"},
                      %z: tensor<8x4xf64> {onnx.name = "z"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"}, tensor<4xf32> {kiln.grad_of = 0 : i64},
        tensor<4xf64> {kiln.grad_of = 1 : i64}) {
  %s = kiln.reduce_mean %x {axes = array<i64: 0, 1>, keepdims = false} : (tensor<8x4xf32>) -> tensor<f32>
  %gw = kiln.reduce_sum %x {axes = array<i64: 0>, keepdims = false} : (tensor<8x4xf32>) -> tensor<4xf32>
  %gv = kiln.reduce_sum %z {axes = array<i64: 0>, keepdims = false} : (tensor<8x4xf64>) -> tensor<4xf64>
  return %s, %gw, %gv : tensor<f32>, tensor<4xf32>, tensor<4xf64>
}
