// The runtime refuses, at load, a plan step that breaks the kernel manifest,
// naming the step and its node. The bad plans are the compiler's plan with
// one name or value changed in place (same length, so the container's sizes
// still hold).
// RUN: kiln-opt %s --kiln-lower-to-runtime --kiln-assign-buffers --mlir-print-debuginfo | kiln-translate --export-plan -o %t.plan
// RUN: not %kiln_bin/kiln-exec %t.plan 2>&1 | FileCheck %s --check-prefix=GOOD
// GOOD: kiln-exec: missing --input for 'x'

// A kernel the runtime lacks.
// RUN: LC_ALL=C sed 's/"kernel":"leaky_relu"/"kernel":"leaky_relx"/' %t.plan > %t.kernel.plan
// RUN: not %kiln_bin/kiln-exec %t.kernel.plan 2>&1 | FileCheck %s --check-prefix=KERNEL
// KERNEL: kiln-exec: {{.*}}.plan: step 1 ('leaky_relx' at {{.+}}): no CPU kernel 'leaky_relx'

// An attribute the manifest does not declare for the kernel.
// RUN: LC_ALL=C sed 's/"alpha":/"alphx":/' %t.plan > %t.attr.plan
// RUN: not %kiln_bin/kiln-exec %t.attr.plan 2>&1 | FileCheck %s --check-prefix=ATTR
// ATTR: kiln-exec: {{.*}}.plan: step 1 ('leaky_relu' at relu_node): attribute 'alphx' is not declared for kernel 'leaky_relu' by the kernel manifest

// An attribute of the wrong type.
// RUN: LC_ALL=C sed 's/"alpha":0.5/"alpha":"x"/' %t.plan > %t.type.plan
// RUN: not %kiln_bin/kiln-exec %t.type.plan 2>&1 | FileCheck %s --check-prefix=TYPE
// TYPE: kiln-exec: {{.*}}.plan: step 1 ('leaky_relu' at relu_node): attribute 'alpha' is of JSON type string, the kernel manifest declares a float

func.func @forward(%x: tensor<2x3xf32> {onnx.name = "x"}) -> tensor<2x3xf32> {
  %0 = kiln.add %x, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32> loc("add_node")
  %1 = kiln.leaky_relu %0 {alpha = 0.5 : f32} : tensor<2x3xf32> loc("relu_node")
  return %1 : tensor<2x3xf32>
}
