// RUN: kiln-opt %s -split-input-file --pass-pipeline="builtin.module(func.func(kiln-bucket-all-reduce{bucket-mb=0.0001}))" | FileCheck %s
// RUN: kiln-opt %s -split-input-file --pass-pipeline="builtin.module(func.func(kiln-bucket-all-reduce{bucket-mb=25}))" | FileCheck %s --check-prefix=ONE
// RUN: kiln-opt %s -split-input-file --pass-pipeline="builtin.module(func.func(kiln-bucket-all-reduce{bucket-mb=0}))" | FileCheck %s --check-prefix=NONE
// RUN: not kiln-opt %s -split-input-file --pass-pipeline="builtin.module(func.func(kiln-bucket-all-reduce{bucket-mb=-1}))" 2>&1 | FileCheck %s --check-prefix=BAD

// Backward computes the last layer's gradient first (%g2, then %g1, then
// %g0), 32 bytes each, after the loss (4 bytes). A 0.0001 MiB cap (104
// bytes) holds all four (100 bytes), in the order they are computed. The
// start comes right after the last of them is computed, the wait right
// before the first update.
// CHECK-LABEL: func.func @backward
// CHECK: %[[L:.*]] = kiln.reduce_sum
// CHECK: %[[G2:.*]] = kiln.mul %arg2
// CHECK: %[[G1:.*]] = kiln.mul %arg1
// CHECK: %[[G0:.*]] = kiln.mul %arg0
// CHECK: %[[B:.*]] = dist.all_reduce_start %[[L]], %[[G2]], %[[G1]], %[[G0]] on @kiln_mesh grid_axes = [0] reduction = average : tensor<f32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32> -> !dist.bucket<25 x f32>
// CHECK: %[[W:.*]]:4 = dist.all_reduce_wait %[[B]]
// CHECK: kiln.sub %arg0, %[[W]]#3
// CHECK: return %[[W]]#0
// With 25 MiB: the same single bucket.
// ONE-LABEL: func.func @backward
// ONE: dist.all_reduce_start %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} on
// ONE-NOT: dist.all_reduce_start
// ONE-LABEL: func.func @overlap
// bucket-mb = 0: nothing changes.
// NONE-NOT: dist.
// BAD: error: --kiln-bucket-all-reduce: bucket-mb must be in [0, 1e6], got -1
shard.grid @kiln_mesh(shape = 2) {kiln.axis_names = ["dp"]}
func.func @backward(%w0: tensor<8xf32>, %w1: tensor<8xf32>, %w2: tensor<8xf32>)
    -> (tensor<f32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %l = kiln.reduce_sum %w2 {axes = array<i64: 0>, keepdims = false} : (tensor<8xf32>) -> tensor<f32>
  %g2 = kiln.mul %w2, %w2 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %g1 = kiln.mul %w1, %w2 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %g0 = kiln.mul %w0, %w1 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %al = shard.all_reduce %l on @kiln_mesh grid_axes = [0] reduction = average : tensor<f32> -> tensor<f32>
  %a0 = shard.all_reduce %g0 on @kiln_mesh grid_axes = [0] reduction = average : tensor<8xf32> -> tensor<8xf32>
  %a1 = shard.all_reduce %g1 on @kiln_mesh grid_axes = [0] reduction = average : tensor<8xf32> -> tensor<8xf32>
  %a2 = shard.all_reduce %g2 on @kiln_mesh grid_axes = [0] reduction = average : tensor<8xf32> -> tensor<8xf32>
  %u0 = kiln.sub %w0, %a0 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %u1 = kiln.sub %w1, %a1 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %u2 = kiln.sub %w2, %a2 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %al, %u0, %u1, %u2 : tensor<f32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// Larger gradients (16 f32, 64 bytes): two do not fit in 104 bytes, so each
// is its own bucket, started while backward still computes the next one:
// the first bucket is in flight before backward ends (the overlap).
// CHECK-LABEL: func.func @overlap
// CHECK: %[[G2:.*]] = kiln.mul %arg2
// CHECK-NEXT: %[[B2:.*]] = dist.all_reduce_start %[[G2]] on @kiln_mesh grid_axes = [0] reduction = average : tensor<16xf32> -> !dist.bucket<16 x f32>
// CHECK-NEXT: %[[G1:.*]] = kiln.mul %arg1
// CHECK-NEXT: %[[B1:.*]] = dist.all_reduce_start %[[G1]]
// CHECK-NEXT: %[[G0:.*]] = kiln.mul %arg0
// CHECK-NEXT: %[[B0:.*]] = dist.all_reduce_start %[[G0]]
// Each update waits for its own bucket only.
// CHECK-NEXT: %[[W0:.*]] = dist.all_reduce_wait %[[B0]]
// CHECK-NEXT: kiln.sub %arg0, %[[W0]]
// CHECK-NEXT: %[[W1:.*]] = dist.all_reduce_wait %[[B1]]
// CHECK-NEXT: kiln.sub %arg1, %[[W1]]
// CHECK-NEXT: %[[W2:.*]] = dist.all_reduce_wait %[[B2]]
// CHECK-NEXT: kiln.sub %arg2, %[[W2]]
shard.grid @kiln_mesh(shape = 2) {kiln.axis_names = ["dp"]}
func.func @overlap(%w0: tensor<16xf32>, %w1: tensor<16xf32>, %w2: tensor<16xf32>)
    -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %g2 = kiln.mul %w2, %w2 : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %g1 = kiln.mul %w1, %w2 : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %g0 = kiln.mul %w0, %w1 : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %a0 = shard.all_reduce %g0 on @kiln_mesh grid_axes = [0] reduction = average : tensor<16xf32> -> tensor<16xf32>
  %a1 = shard.all_reduce %g1 on @kiln_mesh grid_axes = [0] reduction = average : tensor<16xf32> -> tensor<16xf32>
  %a2 = shard.all_reduce %g2 on @kiln_mesh grid_axes = [0] reduction = average : tensor<16xf32> -> tensor<16xf32>
  %u0 = kiln.sub %w0, %a0 : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %u1 = kiln.sub %w1, %a1 : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %u2 = kiln.sub %w2, %a2 : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  return %u0, %u1, %u2 : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
}

// -----

// A tensor computed from a reduced one cannot share its bucket: the bucket
// closes and is waited for first. Different wire formats and element types
// never share one.
// CHECK-LABEL: func.func @dependent
// CHECK: %[[BA:.*]] = dist.all_reduce_start %{{.*}} on @kiln_mesh grid_axes = [0] reduction = average : tensor<4xf32>
// CHECK: %[[WA:.*]] = dist.all_reduce_wait %[[BA]]
// CHECK: %[[D:.*]] = kiln.mul %[[WA]], %[[WA]]
// CHECK: dist.all_reduce_start %[[D]] on
// CHECK-LABEL: func.func @kinds
// CHECK-DAG: dist.all_reduce_start %{{.*}} on @kiln_mesh grid_axes = [0] reduction = average : tensor<4xf32> -> !dist.bucket<4 x f32>
// CHECK-DAG: dist.all_reduce_start %{{.*}} on @kiln_mesh grid_axes = [0] reduction = average {compression = "int8"} : tensor<4xf32> -> !dist.bucket<4 x f32>
// CHECK-DAG: dist.all_reduce_start %{{.*}} on @kiln_mesh grid_axes = [0] reduction = average : tensor<4xf64> -> !dist.bucket<4 x f64>
shard.grid @kiln_mesh(shape = 2) {kiln.axis_names = ["dp"]}
func.func @dependent(%w: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a = shard.all_reduce %w on @kiln_mesh grid_axes = [0] reduction = average : tensor<4xf32> -> tensor<4xf32>
  %d = kiln.mul %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %b = shard.all_reduce %d on @kiln_mesh grid_axes = [0] reduction = average : tensor<4xf32> -> tensor<4xf32>
  return %a, %b : tensor<4xf32>, tensor<4xf32>
}
func.func @kinds(%x: tensor<4xf32>, %y: tensor<4xf32>, %z: tensor<4xf64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf64>) {
  %a = shard.all_reduce %x on @kiln_mesh grid_axes = [0] reduction = average : tensor<4xf32> -> tensor<4xf32>
  %b = shard.all_reduce %y on @kiln_mesh grid_axes = [0] reduction = average {kiln.compression = "int8"} : tensor<4xf32> -> tensor<4xf32>
  %c = shard.all_reduce %z on @kiln_mesh grid_axes = [0] reduction = average : tensor<4xf64> -> tensor<4xf64>
  return %a, %b, %c : tensor<4xf32>, tensor<4xf32>, tensor<4xf64>
}
