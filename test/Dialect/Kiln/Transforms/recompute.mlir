// RUN: kiln-opt %s -split-input-file --kiln-recompute=mode=selective | FileCheck %s --check-prefix=SEL
// RUN: kiln-opt %s -split-input-file --kiln-recompute=budget-mb=0.6 | FileCheck %s --check-prefix=BUDGET
// RUN: kiln-opt %s -split-input-file --kiln-recompute=mode=full | FileCheck %s --check-prefix=FULL
// RUN: kiln-opt %s -split-input-file --kiln-recompute=budget-mb=0.1 -verify-diagnostics -o /dev/null

// A three-layer MLP's step (backward after the loss). Saved activations:
// %h1 and %h2 (relu_grad reads them), %a1 and %a2 (the weight gradients)
// and %y (the loss gradient). Without recompute all of them are live when
// backward starts: 0.64 MiB at the peak (in place: the loss gradient takes
// %y's bytes). Selective rebuilds %a2, %a1 (1 FLOP per element) and %h1
// (K = 64: 32 FLOPs per byte) before their first backward readers, the
// originals die in forward: 0.41 MiB.
// SEL-LABEL: func.func @train_step
// SEL-SAME: kiln.recompute = {activations = 3 : i64, flops = 4259840 : i64, peak_after = 425988 : i64, peak_before = 671748 : i64}
// SEL: %[[H1:.*]] = kiln.matmul %arg0, %arg1
// SEL: %[[H2:.*]] = kiln.matmul
// SEL: %[[DY:.*]] = kiln.sub
// SEL-NEXT: %[[A2:.*]] = kiln.relu %[[H2]]
// SEL-NEXT: kiln.matmul %[[A2]], %[[DY]] {transpose_lhs = true}
// SEL: %[[DH2:.*]] = kiln.relu_grad %{{.*}}, %[[H2]]
// SEL-NEXT: %[[H1B:.*]] = kiln.matmul %arg0, %arg1
// SEL-NEXT: %[[A1:.*]] = kiln.relu %[[H1B]]
// SEL-NEXT: kiln.matmul %[[A1]], %[[DH2]] {transpose_lhs = true}
// SEL: kiln.relu_grad %{{.*}}, %[[H1B]]

// A budget of 0.6 MiB: the cheapest per byte first (%a1, the longest
// lived) meets it.
// BUDGET-LABEL: func.func @train_step
// BUDGET-SAME: kiln.recompute = {activations = 1 : i64, flops = 32768 : i64, peak_after = 540676 : i64, peak_before = 671748 : i64}
// BUDGET: %[[H1:.*]] = kiln.matmul %arg0, %arg1
// BUDGET: %[[DH2:.*]] = kiln.relu_grad
// BUDGET-NEXT: %[[A1:.*]] = kiln.relu %[[H1]]
// BUDGET-NEXT: kiln.matmul %[[A1]], %[[DH2]] {transpose_lhs = true}

// Full: %y and %h2 too, but their copies would be live where the originals
// were (backward reads them first), so they stay.
// FULL-LABEL: func.func @train_step
// FULL-SAME: activations = 3 : i64
// FULL-COUNT-2: kiln.matmul %arg0, %arg1
// FULL-NOT: %arg3 :

// expected-error @+1 {{--memory-budget 0.10 MiB is below the smallest peak recompute reaches: 0.41 MiB of live intermediates (without recompute 0.64 MiB)}}
func.func @train_step(%x: tensor<512x64xf32> {onnx.name = "x"},
                      %w1: tensor<64x64xf32> {kiln.param, kiln.role = "weight", onnx.name = "w1"},
                      %w2: tensor<64x64xf32> {kiln.param, kiln.role = "weight", onnx.name = "w2"},
                      %w3: tensor<64x64xf32> {kiln.param, kiln.role = "weight", onnx.name = "w3"},
                      %t: tensor<512x64xf32> {onnx.name = "labels"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"},
        tensor<64x64xf32> {kiln.grad_of = 1 : i64, onnx.name = "w1/grad"},
        tensor<64x64xf32> {kiln.grad_of = 2 : i64, onnx.name = "w2/grad"},
        tensor<64x64xf32> {kiln.grad_of = 3 : i64, onnx.name = "w3/grad"}) {
  %h1 = kiln.matmul %x, %w1 : (tensor<512x64xf32>, tensor<64x64xf32>) -> tensor<512x64xf32>
  %a1 = kiln.relu %h1 : tensor<512x64xf32>
  %h2 = kiln.matmul %a1, %w2 : (tensor<512x64xf32>, tensor<64x64xf32>) -> tensor<512x64xf32>
  %a2 = kiln.relu %h2 : tensor<512x64xf32>
  %y = kiln.matmul %a2, %w3 : (tensor<512x64xf32>, tensor<64x64xf32>) -> tensor<512x64xf32>
  %l = kiln.mse_loss %y, %t : (tensor<512x64xf32>, tensor<512x64xf32>) -> tensor<f32>
  %dy = kiln.sub %y, %t : (tensor<512x64xf32>, tensor<512x64xf32>) -> tensor<512x64xf32>
  %gw3 = kiln.matmul %a2, %dy {transpose_lhs = true} : (tensor<512x64xf32>, tensor<512x64xf32>) -> tensor<64x64xf32>
  %da2 = kiln.matmul %dy, %w3 {transpose_rhs = true} : (tensor<512x64xf32>, tensor<64x64xf32>) -> tensor<512x64xf32>
  %dh2 = kiln.relu_grad %da2, %h2 : tensor<512x64xf32>
  %gw2 = kiln.matmul %a1, %dh2 {transpose_lhs = true} : (tensor<512x64xf32>, tensor<512x64xf32>) -> tensor<64x64xf32>
  %da1 = kiln.matmul %dh2, %w2 {transpose_rhs = true} : (tensor<512x64xf32>, tensor<64x64xf32>) -> tensor<512x64xf32>
  %dh1 = kiln.relu_grad %da1, %h1 : tensor<512x64xf32>
  %gw1 = kiln.matmul %x, %dh1 {transpose_lhs = true} : (tensor<512x64xf32>, tensor<512x64xf32>) -> tensor<64x64xf32>
  return %l, %gw1, %gw2, %gw3 : tensor<f32>, tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>
}

// -----

// A pipeline rank's program (tags: stage, backward; no loss slice): the
// forward relu is rebuilt in the backward part, tagged backward, with its
// stage and microbatch.
// SEL-LABEL: func.func @train_step_pp1
// SEL: %[[R:.*]] = kiln.relu %[[IN:.*]] {kiln.microbatch = 0 : i64, kiln.stage = 1 : i64}
// SEL: kiln.reduce_sum %[[R]]
// SEL: %[[R2:.*]] = kiln.relu %[[IN]] {kiln.backward, kiln.microbatch = 0 : i64, kiln.stage = 1 : i64}
// SEL-NEXT: kiln.relu_grad %{{.*}}, %[[R2]] {kiln.backward
// expected-error @+1 {{--memory-budget 0.10 MiB is below the smallest peak recompute reaches: 0.25 MiB of live intermediates (without recompute 0.25 MiB)}}
func.func @train_step_pp1(%x: tensor<512x64xf32> {onnx.name = "x"}, %g: tensor<512x64xf32> {onnx.name = "g"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"}, tensor<512x64xf32> {onnx.name = "dx"}) {
  %r = kiln.relu %x {kiln.stage = 1 : i64, kiln.microbatch = 0 : i64} : tensor<512x64xf32>
  %l = kiln.reduce_sum %r {axes = array<i64: 0, 1>, keepdims = false, kiln.stage = 1 : i64, kiln.microbatch = 0 : i64} : (tensor<512x64xf32>) -> tensor<f32>
  %e = kiln.exp %g {kiln.stage = 1 : i64, kiln.microbatch = 0 : i64, kiln.backward} : tensor<512x64xf32>
  %d = kiln.relu_grad %e, %r {kiln.stage = 1 : i64, kiln.microbatch = 0 : i64, kiln.backward} : tensor<512x64xf32>
  return %l, %d : tensor<f32>, tensor<512x64xf32>
}
