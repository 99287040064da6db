// RUN: kiln-opt %s -split-input-file -verify-diagnostics --kiln-assign-buffers=statistics
//
// Buffer sizes are checked (kiln/runtime/CheckedMath.h), never wrapped: a
// buffer of 2^62 f32 elements is 2^64 bytes, which is 0 in 64 bits, and used
// to be assigned as an empty buffer (peak-bytes 0). The krt verifier refuses
// any buffer over 2^60 bytes, and buffer assignment refuses an arena over
// 2^60 bytes, the largest the runtime loads.

func.func @wraps() -> memref<4611686018427387904xf32> {
  // expected-error @+1 {{'krt.alloc' op result f32[4611686018427387904] would take 1.84e+19 bytes (16 EiB), more than the 2^60 bytes a tensor may hold}}
  %0 = krt.alloc : memref<4611686018427387904xf32>
  return %0 : memref<4611686018427387904xf32>
}

// -----

func.func @overflows_int64() -> memref<4294967296x4294967296xf32> {
  // expected-error @+1 {{'krt.alloc' op result f32[4294967296, 4294967296] would take 7.38e+19 bytes (64 EiB)}}
  %0 = krt.alloc : memref<4294967296x4294967296xf32>
  return %0 : memref<4294967296x4294967296xf32>
}

// -----

func.func @empty_but_huge() -> memref<0x1099511627776x1099511627776xi8> {
  // expected-error @+1 {{'krt.alloc' op result i8[0, 1099511627776, 1099511627776] is empty, but its other dimensions multiply past the 2^60 bytes a tensor may hold}}
  %0 = krt.alloc : memref<0x1099511627776x1099511627776xi8>
  return %0 : memref<0x1099511627776x1099511627776xi8>
}

// -----

func.func @constant_wraps() -> memref<4611686018427387904xf32> {
  // expected-error @+1 {{'krt.constant' op result f32[4611686018427387904] would take}}
  %0 = krt.constant dense<0.0> : tensor<4611686018427387904xf32> : memref<4611686018427387904xf32>
  return %0 : memref<4611686018427387904xf32>
}

// -----

// Three buffers of 2^59 bytes, all alive at once: each is allowed, but
// together they need an arena of 1.5 x 2^60 bytes.
func.func @arena(%x: memref<144115188075855872xf32>) -> (memref<144115188075855872xf32>, memref<144115188075855872xf32>, memref<144115188075855872xf32>) {
  %a = krt.alloc : memref<144115188075855872xf32>
  krt.launch "exp" ins(%x : memref<144115188075855872xf32>) outs(%a : memref<144115188075855872xf32>)
  %b = krt.alloc : memref<144115188075855872xf32>
  krt.launch "exp" ins(%x : memref<144115188075855872xf32>) outs(%b : memref<144115188075855872xf32>)
  // expected-error @+1 {{@arena needs an arena of more than 2^60 bytes, the largest arena the runtime accepts}}
  %c = krt.alloc : memref<144115188075855872xf32>
  krt.launch "exp" ins(%x : memref<144115188075855872xf32>) outs(%c : memref<144115188075855872xf32>)
  return %a, %b, %c : memref<144115188075855872xf32>, memref<144115188075855872xf32>, memref<144115188075855872xf32>
}
