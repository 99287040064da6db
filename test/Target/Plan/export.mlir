// RUN: kiln-opt %s --kiln-lower-to-runtime --kiln-assign-buffers --mlir-print-debuginfo | kiln-translate --export-plan -o %t.plan
// RUN: FileCheck %s < %t.plan
// RUN: kiln-opt %s --kiln-lower-to-runtime | not kiln-translate --export-plan -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNASSIGNED

// The container starts with the magic and version 1; the header lists the
// values (input, constant, arena, view), outputs with their ONNX names, and
// the steps with their attributes, the node they came from and their FLOPs
// (the op's cost interface).
// CHECK: KILNPLAN
// CHECK-SAME: "alignment":64,"arena_bytes":128
// CHECK-SAME: "inputs":[0],"output_names":["y","z"],"outputs":[2,4]
// CHECK-SAME: "steps":[{"attrs":{},"flops":6,"inputs":[0,1],"kernel":"add","loc":"add_node","outputs":[2]},{"attrs":{"alpha":0.10000000149011612},"flops":6,"inputs":[3],"kernel":"leaky_relu","loc":"{{.*}}export.mlir:{{[0-9]+}}:{{[0-9]+}}","outputs":[4]}]
// CHECK-SAME: "values":[{"dtype":"f32","index":0,"kind":"input","name":"x","shape":[2,3]},{"data_bytes":12,"data_offset":0,"dtype":"f32","kind":"constant","shape":[1,3]},{"dtype":"f32","kind":"arena","offset":0,"shape":[2,3]},{"dtype":"f32","kind":"view","shape":[6],"source":2},{"dtype":"f32","kind":"arena","offset":64,"shape":[6]}],"version":1}

// UNASSIGNED: error: 'func.func' op has no krt.arena_bytes; run --kiln-assign-buffers first

func.func @forward(%x: tensor<2x3xf32> {onnx.name = "x"}) -> (tensor<2x3xf32> {onnx.name = "y"}, tensor<6xf32> {onnx.name = "z"}) {
  %c = kiln.constant dense<[[1.0, 2.0, 3.0]]> : tensor<1x3xf32>
  %0 = kiln.add %x, %c : (tensor<2x3xf32>, tensor<1x3xf32>) -> tensor<2x3xf32> loc("add_node")
  %1 = kiln.reshape %0 : tensor<2x3xf32> -> tensor<6xf32>
  %2 = kiln.leaky_relu %1 {alpha = 0.1 : f32} : tensor<6xf32>
  return %0, %2 : tensor<2x3xf32>, tensor<6xf32>
}
