// RUN: kiln-opt %s -split-input-file -verify-diagnostics

func.func @misaligned() {
  // expected-error @+1 {{offset 12 is not a non-negative multiple of 64}}
  %0 = krt.alloc {offset = 12 : i64} : memref<4xf32>
  return
}

// -----

func.func @dynamic() {
  // expected-error @+1 {{result must have a static shape}}
  %0 = krt.alloc : memref<?xf32>
  return
}

// -----

func.func @view_count(%x: memref<4x8xf32>) {
  // expected-error @+1 {{cannot view 'memref<4x8xf32>' as 'memref<30xf32>'}}
  %v = krt.view %x : memref<4x8xf32> -> memref<30xf32>
  return
}

// -----

func.func @constant_type() {
  // expected-error @+1 {{value of type 'tensor<2xi64>' does not match the buffer 'memref<3xi64>'}}
  %c = krt.constant dense<[2, 3]> : tensor<2xi64> : memref<3xi64>
  return
}

// -----

func.func @launch_output(%x: memref<4xf32>, %y: memref<4xf32>) {
  // expected-error @+1 {{output of kernel 'relu' must be a krt.alloc buffer or a parameter}}
  krt.launch "relu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
  return
}

// -----

func.func @launch_name(%x: memref<4xf32>) {
  %0 = krt.alloc : memref<4xf32>
  // expected-error @+1 {{needs a kernel name}}
  krt.launch "" ins(%x : memref<4xf32>) outs(%0 : memref<4xf32>)
  return
}

// -----

func.func @strided(%x: memref<4xf32, strided<[2]>>) {
  %0 = krt.alloc : memref<4xf32>
  // expected-error @+1 {{input must be row-major}}
  krt.launch "relu" ins(%x : memref<4xf32, strided<[2]>>) outs(%0 : memref<4xf32>)
  return
}

// -----

func.func @all_reduce(%x: memref<4xf32>, %y: memref<8xf32>) {
  // expected-error @+1 {{input and output types differ}}
  krt.all_reduce %x, %y {reduction = 0 : i64} : memref<4xf32>, memref<8xf32>
  return
}
