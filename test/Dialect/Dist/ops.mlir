// RUN: kiln-opt %s -split-input-file -verify-diagnostics | FileCheck %s
// RUN: kiln-opt %s -split-input-file -verify-diagnostics | kiln-opt -split-input-file | FileCheck %s

// A bucket round-trips: start packs, wait unpacks the same types.
// CHECK-LABEL: func.func @bucket
// CHECK: %[[B:.*]] = dist.all_reduce_start %{{.*}}, %{{.*}} on @mesh grid_axes = [0] reduction = average : tensor<4x2xf32>, tensor<8xf32> -> !dist.bucket<16 x f32>
// CHECK: %{{.*}}:2 = dist.all_reduce_wait %[[B]] : !dist.bucket<16 x f32> -> tensor<4x2xf32>, tensor<8xf32>
// CHECK: dist.all_reduce_start %{{.*}} on @mesh grid_axes = [0] {compression = "int8"} : tensor<8xf32> -> !dist.bucket<8 x f32>
shard.grid @mesh(shape = 2) {kiln.axis_names = ["dp"]}
func.func @bucket(%a: tensor<4x2xf32>, %b: tensor<8xf32>) -> (tensor<4x2xf32>, tensor<8xf32>, tensor<8xf32>) {
  %t = dist.all_reduce_start %a, %b on @mesh grid_axes = [0] reduction = average : tensor<4x2xf32>, tensor<8xf32> -> !dist.bucket<16 x f32>
  %r:2 = dist.all_reduce_wait %t : !dist.bucket<16 x f32> -> tensor<4x2xf32>, tensor<8xf32>
  %u = dist.all_reduce_start %b on @mesh grid_axes = [0] reduction = sum {compression = "int8"} : tensor<8xf32> -> !dist.bucket<8 x f32>
  %v = dist.all_reduce_wait %u : !dist.bucket<8 x f32> -> tensor<8xf32>
  return %r#0, %r#1, %v : tensor<4x2xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

shard.grid @mesh(shape = 2) {kiln.axis_names = ["dp"]}
func.func @size(%a: tensor<4x2xf32>) -> !dist.bucket<10 x f32> {
  // expected-error @+1 {{packs 8 elements into a bucket of 10}}
  %t = dist.all_reduce_start %a on @mesh grid_axes = [0] reduction = sum : tensor<4x2xf32> -> !dist.bucket<10 x f32>
  return %t : !dist.bucket<10 x f32>
}

// -----

shard.grid @mesh(shape = 2) {kiln.axis_names = ["dp"]}
func.func @element(%a: tensor<4xf32>, %b: tensor<4xf64>) -> !dist.bucket<8 x f32> {
  // expected-error @+1 {{input #1 has element type 'f64', the bucket's is 'f32'}}
  %t = dist.all_reduce_start %a, %b on @mesh grid_axes = [0] reduction = sum : tensor<4xf32>, tensor<4xf64> -> !dist.bucket<8 x f32>
  return %t : !dist.bucket<8 x f32>
}

// -----

func.func @grid(%a: tensor<4xf32>) -> !dist.bucket<4 x f32> {
  // expected-error @+1 {{names the grid @nowhere, which the module does not declare}}
  %t = dist.all_reduce_start %a on @nowhere grid_axes = [0] reduction = sum : tensor<4xf32> -> !dist.bucket<4 x f32>
  return %t : !dist.bucket<4 x f32>
}

// -----

shard.grid @mesh(shape = 2) {kiln.axis_names = ["dp"]}
func.func @axis(%a: tensor<4xf32>) -> !dist.bucket<4 x f32> {
  // expected-error @+1 {{grid axis 1 is not an axis of @mesh (rank 1)}}
  %t = dist.all_reduce_start %a on @mesh grid_axes = [1] reduction = sum : tensor<4xf32> -> !dist.bucket<4 x f32>
  return %t : !dist.bucket<4 x f32>
}

// -----

shard.grid @mesh(shape = 2) {kiln.axis_names = ["dp"]}
func.func @int_average(%a: tensor<4xi32>) -> !dist.bucket<4 x i32> {
  // expected-error @+1 {{an average needs floating-point values}}
  %t = dist.all_reduce_start %a on @mesh grid_axes = [0] reduction = average : tensor<4xi32> -> !dist.bucket<4 x i32>
  return %t : !dist.bucket<4 x i32>
}

// -----

shard.grid @mesh(shape = 2) {kiln.axis_names = ["dp"]}
func.func @wire(%a: tensor<4xf32>) -> !dist.bucket<4 x f32> {
  // expected-error @+1 {{compression applies to sums and averages of f32}}
  %t = dist.all_reduce_start %a on @mesh grid_axes = [0] reduction = max {compression = "int8"} : tensor<4xf32> -> !dist.bucket<4 x f32>
  return %t : !dist.bucket<4 x f32>
}

// -----

shard.grid @mesh(shape = 2) {kiln.axis_names = ["dp"]}
func.func @wire_name(%a: tensor<4xf32>) -> !dist.bucket<4 x f32> {
  // expected-error @+1 {{compression must be bf16, fp16 or int8, got 'int4'}}
  %t = dist.all_reduce_start %a on @mesh grid_axes = [0] reduction = sum {compression = "int4"} : tensor<4xf32> -> !dist.bucket<4 x f32>
  return %t : !dist.bucket<4 x f32>
}

// -----

shard.grid @mesh(shape = 2) {kiln.axis_names = ["dp"]}
func.func @unpack(%a: tensor<4x2xf32>) -> tensor<2x4xf32> {
  %t = dist.all_reduce_start %a on @mesh grid_axes = [0] reduction = sum : tensor<4x2xf32> -> !dist.bucket<8 x f32>
  // expected-error @+1 {{must unpack the types its start packed}}
  %r = dist.all_reduce_wait %t : !dist.bucket<8 x f32> -> tensor<2x4xf32>
  return %r : tensor<2x4xf32>
}

// -----

shard.grid @mesh(shape = 2) {kiln.axis_names = ["dp"]}
func.func @twice(%a: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %t = dist.all_reduce_start %a on @mesh grid_axes = [0] reduction = sum : tensor<4xf32> -> !dist.bucket<4 x f32>
  // expected-error @+1 {{a bucket is waited for once}}
  %r = dist.all_reduce_wait %t : !dist.bucket<4 x f32> -> tensor<4xf32>
  %s = dist.all_reduce_wait %t : !dist.bucket<4 x f32> -> tensor<4xf32>
  return %r, %s : tensor<4xf32>, tensor<4xf32>
}

// -----

// expected-error @+1 {{a bucket holds at least one element, got 0}}
func.func @empty(%t: !dist.bucket<0 x f32>)
