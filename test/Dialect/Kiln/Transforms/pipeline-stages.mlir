// RUN: kiln-opt %s -split-input-file --kiln-pipeline-stages=stages=2 | FileCheck %s --check-prefix=EST
// RUN: kiln-opt %s -split-input-file --kiln-pipeline-stages="stages=2 costs=%S/Inputs/stage-costs.json" | FileCheck %s --check-prefix=MEASURED
// RUN: not kiln-opt %s --kiln-pipeline-stages="stages=2 costs=%S/Inputs/none.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not kiln-opt %s --kiln-pipeline-stages="stages=2 costs=%S/Inputs/not-a-trace.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOTRACE

// Four matmuls of one size: by the estimates (FLOPs and bytes) the cut
// falls in the middle. The trace measured m1 at 300x m2's and m3's time
// per step (m4 is not in it: its estimate, scaled as the others' are), so
// m1 alone is stage 0.
// EST: kiln.matmul %{{.*}}, %arg1 {kiln.stage = 0 : i64}
// EST: kiln.matmul %{{.*}}, %arg2 {kiln.stage = 0 : i64}
// EST: kiln.matmul %{{.*}}, %arg3 {kiln.stage = 1 : i64}
// EST: kiln.matmul %{{.*}}, %arg4 {kiln.stage = 1 : i64}
// MEASURED: kiln.matmul %{{.*}}, %arg1 {kiln.stage = 0 : i64}
// MEASURED: kiln.matmul %{{.*}}, %arg2 {kiln.stage = 1 : i64}
// MEASURED: kiln.matmul %{{.*}}, %arg3 {kiln.stage = 1 : i64}
// MEASURED: kiln.matmul %{{.*}}, %arg4 {kiln.stage = 1 : i64}
// MISSING: error: 'func.func' op --kiln-pipeline-stages: costs: cannot read '{{.*}}none.json'
// NOTRACE: error: 'func.func' op --kiln-pipeline-stages: costs: '{{.*}}not-a-trace.json' is not a kiln-train --profile trace (no traceEvents)
func.func @forward(%x: tensor<64x64xf32> {onnx.name = "x"},
                   %w1: tensor<64x64xf32> {kiln.param, kiln.role = "weight", onnx.name = "w1"},
                   %w2: tensor<64x64xf32> {kiln.param, kiln.role = "weight", onnx.name = "w2"},
                   %w3: tensor<64x64xf32> {kiln.param, kiln.role = "weight", onnx.name = "w3"},
                   %w4: tensor<64x64xf32> {kiln.param, kiln.role = "weight", onnx.name = "w4"})
    -> (tensor<64x64xf32> {onnx.name = "y"}) {
  %a = kiln.matmul %x, %w1 : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32> loc("m1")
  %b = kiln.matmul %a, %w2 : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32> loc("m2")
  %c = kiln.matmul %b, %w3 : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32> loc("m3")
  %d = kiln.matmul %c, %w4 : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32> loc("m4")
  return %d : tensor<64x64xf32>
}
