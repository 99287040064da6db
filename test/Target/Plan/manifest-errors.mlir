// RUN: kiln-translate --export-plan --split-input-file --verify-diagnostics %s -o /dev/null

// The plan writer checks every launch against the kernel manifest; a launch
// the manifest does not allow is the compiler's bug, reported at the op.

func.func @forward(%x: memref<2x3xf32>) -> memref<2x3xf32> attributes {krt.arena_bytes = 64 : i64} {
  %0 = krt.alloc {offset = 0 : i64} : memref<2x3xf32>
  // expected-error @+1 {{'krt.launch' op internal error: kernel 'frobnicate' is not in the kernel manifest}}
  krt.launch "frobnicate" ins(%x : memref<2x3xf32>) outs(%0 : memref<2x3xf32>)
  return %0 : memref<2x3xf32>
}

// -----

func.func @forward(%x: memref<2x3xf32>) -> memref<2x3xf32> attributes {krt.arena_bytes = 64 : i64} {
  %0 = krt.alloc {offset = 0 : i64} : memref<2x3xf32>
  // expected-error @+1 {{internal error: kernel 'leaky_relu' has parameter 'beta', which the kernel manifest does not declare}}
  krt.launch "leaky_relu" ins(%x : memref<2x3xf32>) outs(%0 : memref<2x3xf32>) {params = {alpha = 0.1 : f32, beta = 2 : i64}}
  return %0 : memref<2x3xf32>
}

// -----

func.func @forward(%x: memref<2x3xf32>) -> memref<2x3xf32> attributes {krt.arena_bytes = 64 : i64} {
  %0 = krt.alloc {offset = 0 : i64} : memref<2x3xf32>
  // expected-error @+1 {{internal error: kernel 'leaky_relu' has parameter 'alpha' = "x", the kernel manifest declares a float}}
  krt.launch "leaky_relu" ins(%x : memref<2x3xf32>) outs(%0 : memref<2x3xf32>) {params = {alpha = "x"}}
  return %0 : memref<2x3xf32>
}

// -----

func.func @forward(%x: memref<2x3xf32>) -> memref<2x3xf32> attributes {krt.arena_bytes = 64 : i64} {
  %0 = krt.alloc {offset = 0 : i64} : memref<2x3xf32>
  // expected-error @+1 {{internal error: kernel 'leaky_relu' lacks parameter 'alpha', which the kernel manifest requires}}
  krt.launch "leaky_relu" ins(%x : memref<2x3xf32>) outs(%0 : memref<2x3xf32>)
  return %0 : memref<2x3xf32>
}

// -----

func.func @forward(%x: memref<2x3xf32>) -> memref<2x3xf32> attributes {krt.arena_bytes = 64 : i64} {
  %0 = krt.alloc {offset = 0 : i64} : memref<2x3xf32>
  // expected-error @+1 {{internal error: kernel 'add' has 1 inputs and 1 outputs, which its manifest entry (2 operands, 1 results) does not allow}}
  krt.launch "add" ins(%x : memref<2x3xf32>) outs(%0 : memref<2x3xf32>)
  return %0 : memref<2x3xf32>
}

// -----

func.func @forward(%x: memref<2x3xf32>) -> memref<6xf32> attributes {krt.arena_bytes = 64 : i64} {
  %0 = krt.alloc {offset = 0 : i64} : memref<6xf32>
  // expected-error @+1 {{internal error: kernel 'reshape' is never launched (the manifest's kiln.reshape lowers to another krt op)}}
  krt.launch "reshape" ins(%x : memref<2x3xf32>) outs(%0 : memref<6xf32>)
  return %0 : memref<6xf32>
}
