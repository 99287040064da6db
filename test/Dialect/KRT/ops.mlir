// RUN: kiln-opt %s | kiln-opt | FileCheck %s
// Every krt op parses, verifies and prints back.

// CHECK-LABEL: func.func @ops
func.func @ops(%x: memref<4x8xf32>) -> memref<32xf32> {
  // CHECK: krt.constant dense<[2, 3]> : tensor<2xi64> : memref<2xi64>
  %c = krt.constant dense<[2, 3]> : tensor<2xi64> : memref<2xi64>
  // CHECK: krt.alloc {offset = 64 : i64} : memref<4x8xf32>
  %0 = krt.alloc {offset = 64 : i64} : memref<4x8xf32>
  // CHECK: krt.launch "relu" ins(%{{.*}} : memref<4x8xf32>) outs(%{{.*}} : memref<4x8xf32>) {in_place}
  krt.launch "relu" ins(%x : memref<4x8xf32>) outs(%0 : memref<4x8xf32>) {in_place}
  // CHECK: krt.view %{{.*}} : memref<4x8xf32> -> memref<32xf32>
  %v = krt.view %0 : memref<4x8xf32> -> memref<32xf32>
  // CHECK: krt.all_reduce %{{.*}}, %{{.*}} {reduction = 0 : i64} : memref<32xf32>, memref<32xf32>
  krt.all_reduce %v, %v {reduction = 0 : i64} : memref<32xf32>, memref<32xf32>
  %g = krt.alloc : memref<128xf32>
  // CHECK: krt.all_gather
  krt.all_gather %v, %g : memref<32xf32>, memref<128xf32>
  %s = krt.alloc : memref<8xf32>
  // CHECK: krt.reduce_scatter
  krt.reduce_scatter %v, %s {reduction = 3 : i64} : memref<32xf32>, memref<8xf32>
  // CHECK: krt.record_event {event = 1 : i64, stream = 1 : i64}
  krt.record_event {event = 1 : i64, stream = 1 : i64}
  // CHECK: krt.wait_event {event = 1 : i64}
  krt.wait_event {event = 1 : i64}
  return %v : memref<32xf32>
}
