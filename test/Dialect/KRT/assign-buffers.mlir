// RUN: kiln-opt %s -split-input-file --kiln-assign-buffers=statistics 2>%t.stats | FileCheck %s
// RUN: FileCheck %s --check-prefix=STATS < %t.stats

// A chain of elementwise launches runs in place: one buffer for all three.
// STATS: kiln-assign-buffers: @chain peak-bytes 4096 naive-bytes 12288 buffers 1 in-place 2
// CHECK-LABEL: func.func @chain
// CHECK-SAME: krt.arena_bytes = 4096
func.func @chain(%x: memref<1024xf32>) -> memref<1024xf32> {
  // CHECK: krt.alloc {offset = 0 : i64}
  %0 = krt.alloc : memref<1024xf32>
  krt.launch "exp" ins(%x : memref<1024xf32>) outs(%0 : memref<1024xf32>) {in_place}
  // CHECK: krt.alloc {offset = 0 : i64}
  %1 = krt.alloc : memref<1024xf32>
  krt.launch "tanh" ins(%0 : memref<1024xf32>) outs(%1 : memref<1024xf32>) {in_place}
  // CHECK: krt.alloc {offset = 0 : i64}
  %2 = krt.alloc : memref<1024xf32>
  krt.launch "neg" ins(%1 : memref<1024xf32>) outs(%2 : memref<1024xf32>) {in_place}
  return %2 : memref<1024xf32>
}

// -----

// Lifetimes that do not overlap share bytes; a buffer still read later does
// not. %a dies at the second launch, so %c (written by the third) reuses it;
// %d is written while %b and %c are still read, so it needs a third slot.
// STATS: kiln-assign-buffers: @reuse peak-bytes 12288 naive-bytes 16384 buffers 4 in-place 0
// CHECK-LABEL: func.func @reuse
func.func @reuse(%x: memref<1024xf32>) -> memref<1024xf32> {
  // CHECK: %[[A:.*]] = krt.alloc {offset = [[OA:[0-9]+]] : i64}
  %a = krt.alloc : memref<1024xf32>
  krt.launch "exp" ins(%x : memref<1024xf32>) outs(%a : memref<1024xf32>)
  // CHECK: %[[B:.*]] = krt.alloc {offset = [[OB:[0-9]+]] : i64}
  %b = krt.alloc : memref<1024xf32>
  krt.launch "exp" ins(%a : memref<1024xf32>) outs(%b : memref<1024xf32>)
  // CHECK: %[[C:.*]] = krt.alloc {offset = [[OA]] : i64}
  %c = krt.alloc : memref<1024xf32>
  krt.launch "exp" ins(%b : memref<1024xf32>) outs(%c : memref<1024xf32>)
  // CHECK: krt.alloc {offset = 8192 : i64}
  %d = krt.alloc : memref<1024xf32>
  krt.launch "add" ins(%b, %c : memref<1024xf32>, memref<1024xf32>) outs(%d : memref<1024xf32>)
  return %d : memref<1024xf32>
}

// -----

// No in-place write over a buffer another input reads through a view (it
// would see overwritten elements), nor over a function argument.
// STATS: kiln-assign-buffers: @no_alias peak-bytes 512 naive-bytes 512 buffers 2 in-place 0
// CHECK-LABEL: func.func @no_alias
func.func @no_alias(%x: memref<8x8xf32>) -> memref<8x8xf32> {
  // CHECK: krt.alloc {offset = 0 : i64}
  %a = krt.alloc : memref<8x8xf32>
  krt.launch "exp" ins(%x : memref<8x8xf32>) outs(%a : memref<8x8xf32>) {in_place}
  %t = krt.view %a : memref<8x8xf32> -> memref<64xf32>
  %u = krt.view %t : memref<64xf32> -> memref<8x8xf32>
  // CHECK: krt.alloc {offset = 256 : i64}
  %b = krt.alloc : memref<8x8xf32>
  krt.launch "add" ins(%a, %u : memref<8x8xf32>, memref<8x8xf32>) outs(%b : memref<8x8xf32>) {in_place}
  return %b : memref<8x8xf32>
}

// -----

// Best fit: the small buffers go into the space the dead %a left, below the
// live %b, not above it. Sizes round up to 64 bytes.
// STATS: kiln-assign-buffers: @best_fit peak-bytes 8192 naive-bytes 8320 buffers 4 in-place 0
// CHECK-LABEL: func.func @best_fit
func.func @best_fit(%x: memref<1024xf32>) -> (memref<1024xf32>, memref<3xf32>) {
  // CHECK: krt.alloc {offset = 0 : i64} : memref<1024xf32>
  %a = krt.alloc : memref<1024xf32>
  krt.launch "exp" ins(%x : memref<1024xf32>) outs(%a : memref<1024xf32>)
  // CHECK: krt.alloc {offset = 4096 : i64} : memref<1024xf32>
  %b = krt.alloc : memref<1024xf32>
  krt.launch "exp" ins(%a : memref<1024xf32>) outs(%b : memref<1024xf32>)
  // CHECK: krt.alloc {offset = 0 : i64} : memref<3xf32>
  %s = krt.alloc : memref<3xf32>
  krt.launch "reduce_sum" ins(%b : memref<1024xf32>) outs(%s : memref<3xf32>)
  // CHECK: krt.alloc {offset = 64 : i64} : memref<4xf32>
  %t = krt.alloc : memref<4xf32>
  krt.launch "neg" ins(%s : memref<3xf32>) outs(%t : memref<4xf32>)
  return %b, %s : memref<1024xf32>, memref<3xf32>
}
