// RUN: kiln-opt %s -split-input-file --kiln-shard="mesh=tp=2 shard=w1=-,tp;h=tp,-" | FileCheck %s
// RUN: kiln-opt %s -split-input-file --kiln-shard="mesh=tp=2 shard=w1=-,tp;h=tp,-" --kiln-shard-propagation --kiln-partition | FileCheck %s --check-prefix=PART
// RUN: not kiln-opt %s -split-input-file --kiln-shard="mesh=tp=2 shard=h=tp;w1=-,tp" 2>&1 | FileCheck %s --check-prefix=RANK
// RUN: not kiln-opt %s -split-input-file --kiln-shard="mesh=tp=2 shard=h=tp,-;h|x=-,tp" 2>&1 | FileCheck %s --check-prefix=BOTH

// An activation annotated by its ONNX value name (kiln.onnx_names, kept by
// the import for kiln-compile --shard): the annotation pins the op's
// result. The weight w1 is split on its output features, so x @ w1 comes
// out split on features; the user wants h (its ReLU) split on the batch:
// the partition reshards between the two with one all-to-all, and the
// second matmul runs on the batch split.
// CHECK-LABEL: func.func @f
// CHECK: kiln.relu {{.*}}kiln.shardings = {{\[\[\[}}"tp"], []]]
// PART-LABEL: func.func @f
// PART: %[[M:.*]] = kiln.matmul %arg0, %arg1 {{.*}}: (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
// PART: %[[A:.*]] = shard.all_to_all %[[M]] on @kiln_mesh grid_axes = [0] split_axis = 0 concat_axis = 1 : tensor<8x4xf32> -> tensor<4x8xf32>
// PART: kiln.relu %[[A]] {{.*}}: tensor<4x8xf32>
// PART: kiln.matmul %{{.*}}, %arg2 {{.*}}: (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
// RANK: error: --kiln-shard: 'h' gives 1 dimensions to value 'h' of type 'tensor<8x8xf32>'
// BOTH: error: --kiln-shard: 'h' and 'h|x' both match value 'h' and shard it differently
func.func @f(%x: tensor<8x4xf32> {onnx.name = "x"},
             %w1: tensor<4x8xf32> {kiln.param, onnx.name = "w1"},
             %w2: tensor<8x2xf32> {kiln.param, onnx.name = "w2"})
    -> (tensor<8x2xf32> {onnx.name = "y", kiln.sharding = [["tp"], []]}) {
  %m = kiln.matmul %x, %w1 {kiln.onnx_names = ["m"]} : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %h = kiln.relu %m {kiln.onnx_names = ["h"]} : tensor<8x8xf32>
  %y = kiln.matmul %h, %w2 {kiln.onnx_names = ["y"]} : (tensor<8x8xf32>, tensor<8x2xf32>) -> tensor<8x2xf32>
  return %y : tensor<8x2xf32>
}
