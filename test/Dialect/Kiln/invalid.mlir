// RUN: kiln-opt %s -split-input-file -verify-diagnostics

func.func @add_no_broadcast(%a: tensor<4x3xf32>, %b: tensor<4xf32>) -> tensor<4x3xf32> {
  // expected-error @+2 {{shapes [4,3] and [4] do not broadcast}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.add %a, %b : (tensor<4x3xf32>, tensor<4xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @add_mixed_types(%a: tensor<4xf32>, %b: tensor<4xf16>) -> tensor<4xf32> {
  // expected-error @+2 {{operands have different element types}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.add %a, %b : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @wrong_result(%a: tensor<4x3xf32>, %b: tensor<3xf32>) -> tensor<4x4xf32> {
  // expected-error @+2 {{inferred type(s) 'tensor<4x3xf32>' are incompatible with return type(s) of operation 'tensor<4x4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.mul %a, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

func.func @dynamic(%a: tensor<?x3xf32>) -> tensor<?x3xf32> {
  // expected-error @+1 {{must be statically shaped tensor}}
  %0 = kiln.exp %a : tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// -----

func.func @exp_int(%a: tensor<3xi64>) -> tensor<3xi64> {
  // expected-error @+1 {{floating-point values}}
  %0 = kiln.exp %a : tensor<3xi64>
  return %0 : tensor<3xi64>
}

// -----

func.func @gelu_mode(%a: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{approximate must be "none" or "tanh", got "fast"}}
  %0 = kiln.gelu %a {approximate = "fast"} : tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @matmul_k(%a: tensor<4x8xf32>, %b: tensor<7x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+2 {{contracting dimensions differ: 8 vs 7}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.matmul %a, %b : (tensor<4x8xf32>, tensor<7x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

func.func @matmul_rank(%a: tensor<8xf32>, %b: tensor<8x16xf32>) -> tensor<16xf32> {
  // expected-error @+2 {{operands need rank >= 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.matmul %a, %b : (tensor<8xf32>, tensor<8x16xf32>) -> tensor<16xf32>
  return %0 : tensor<16xf32>
}

// -----

func.func @conv_channels(%x: tensor<1x3x8x8xf32>, %w: tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+2 {{channels do not match: input has 3, weight expects 2 x 1 groups}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.conv %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, groups = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv_attrs(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+2 {{expected 2 strides, 2 dilations and 4 pads, got 1, 2 and 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.conv %x, %w {strides = array<i64: 1>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, groups = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @pool_window(%x: tensor<1x3x2x2xf32>) -> tensor<1x3x1x1xf32> {
  // expected-error @+2 {{window larger than padded input in spatial dim 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.max_pool %x {kernel = array<i64: 3, 3>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>} : (tensor<1x3x2x2xf32>) -> tensor<1x3x1x1xf32>
  return %0 : tensor<1x3x1x1xf32>
}

// -----

func.func @bn_params(%x: tensor<2x3x4x4xf32>, %c: tensor<4xf32>) -> tensor<2x3x4x4xf32> {
  // expected-error @+2 {{expected a 'tensor<3xf32>' per-channel parameter, got 'tensor<4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.batch_norm %x, %c, %c, %c, %c {epsilon = 1.0e-05 : f32} : (tensor<2x3x4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x3x4x4xf32>
  return %0 : tensor<2x3x4x4xf32>
}

// -----

func.func @ln_scale(%x: tensor<2x8x32xf32>, %g: tensor<16xf32>) -> tensor<2x8x32xf32> {
  // expected-error @+2 {{scale and bias must have the normalised shape [32], got 'tensor<16xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:3 = kiln.layer_norm %x, %g, %g {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x8x32xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x8x32xf32>, tensor<2x8x1xf32>, tensor<2x8x1xf32>)
  return %0#0 : tensor<2x8x32xf32>
}

// -----

func.func @softmax_axis(%x: tensor<4x10xf32>) -> tensor<4x10xf32> {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.softmax %x {axis = 2 : i64} : (tensor<4x10xf32>) -> tensor<4x10xf32>
  return %0 : tensor<4x10xf32>
}

// -----

func.func @dropout_ratio(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{ratio must be in [0, 1), got 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = kiln.dropout %x {ratio = 1.0 : f32} : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi1>)
  return %0#0 : tensor<4xf32>
}

// -----

func.func @reduce_axes(%x: tensor<4x10xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{axes must be sorted and unique}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.reduce_sum %x {axes = array<i64: 1, 1>, keepdims = false} : (tensor<4x10xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @reshape_count(%x: tensor<2x3xf32>) -> tensor<7xf32> {
  // expected-error @+1 {{cannot reshape 'tensor<2x3xf32>' (6 elements) to 'tensor<7xf32>' (7 elements)}}
  %0 = kiln.reshape %x : tensor<2x3xf32> -> tensor<7xf32>
  return %0 : tensor<7xf32>
}

// -----

func.func @broadcast_bad(%x: tensor<2x3xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{cannot broadcast 'tensor<2x3xf32>' to 'tensor<2x4xf32>'}}
  %0 = kiln.broadcast %x : tensor<2x3xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @transpose_perm(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  // expected-error @+2 {{perm is not a permutation of 0..1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.transpose %x {perm = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

func.func @slice_bounds(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+2 {{slice bounds [0, 5) of dim 1 are out of range for size 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.slice %x {starts = array<i64: 0, 0>, limits = array<i64: 2, 5>, strides = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @concat_dims(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) -> tensor<4x3xf32> {
  // expected-error @+2 {{inputs differ in dim 1: 3 vs 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.concat %a, %b {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @pad_mode(%x: tensor<2x3xf32>) -> tensor<2x5xf32> {
  // expected-error @+2 {{mode must be constant, reflect or edge, got wrap}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.pad %x {low = array<i64: 0, 1>, high = array<i64: 0, 1>, mode = "wrap"} : (tensor<2x3xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

func.func @gather_indices(%x: tensor<10x4xf32>, %i: tensor<3xf32>) -> tensor<3x4xf32> {
  // expected-error @+1 {{must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = kiln.gather %x, %i {axis = 0 : i64} : (tensor<10x4xf32>, tensor<3xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

func.func @ce_labels(%l: tensor<4x10xf32>, %y: tensor<5xi64>) -> tensor<f32> {
  // expected-error @+2 {{labels must have shape [4] for logits 'tensor<4x10xf32>', got 'tensor<5xi64>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.softmax_cross_entropy %l, %y : (tensor<4x10xf32>, tensor<5xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @ce_reduction(%l: tensor<4x10xf32>, %y: tensor<4xi64>) -> tensor<f32> {
  // expected-error @+2 {{reduction must be mean, sum or none, got avg}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.nll_loss %l, %y {reduction = "avg"} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @mse_shapes(%a: tensor<4x3xf32>, %b: tensor<4x2xf32>) -> tensor<f32> {
  // expected-error @+2 {{input 'tensor<4x3xf32>' and target 'tensor<4x2xf32>' differ}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.mse_loss %a, %b : (tensor<4x3xf32>, tensor<4x2xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @conv_input_grad_mismatch(%dy: tensor<2x16x8x8xf32>, %w: tensor<16x3x3x3xf32>) -> tensor<2x3x9x9xf32> {
  // expected-error @+1 {{dy 'tensor<2x16x8x8xf32>' is not the conv result of 'tensor<2x3x9x9xf32>'}}
  %0 = kiln.conv_input_grad %dy, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>,
                                     padding = array<i64: 1, 1, 1, 1>, groups = 1 : i64}
      : (tensor<2x16x8x8xf32>, tensor<16x3x3x3xf32>) -> tensor<2x3x9x9xf32>
  return %0 : tensor<2x3x9x9xf32>
}

// -----

func.func @gather_grad_mismatch(%dy: tensor<2x4x7xf32>, %ids: tensor<2x4xi64>) -> tensor<100x8xf32> {
  // expected-error @+1 {{dy 'tensor<2x4x7xf32>' is not the gather result of 'tensor<100x8xf32>'}}
  %0 = kiln.gather_grad %dy, %ids {axis = 0 : i64} : (tensor<2x4x7xf32>, tensor<2x4xi64>) -> tensor<100x8xf32>
  return %0 : tensor<100x8xf32>
}

// -----

func.func @slice_grad_mismatch(%dy: tensor<4x3xf32>) -> tensor<4x20xf32> {
  // expected-error @+1 {{dy 'tensor<4x3xf32>' is not the slice result of 'tensor<4x20xf32>'}}
  %0 = kiln.slice_grad %dy {starts = array<i64: 0, 0>, limits = array<i64: 4, 20>, strides = array<i64: 1, 2>}
      : (tensor<4x3xf32>) -> tensor<4x20xf32>
  return %0 : tensor<4x20xf32>
}

// -----

func.func @adam_types(%p: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<8xf32>,
                      %lr: tensor<f32>, %t: tensor<i64>) {
  // expected-error @+1 {{all of {param, grad, m, v, new_param, new_m, new_v} have same type}}
  %0:3 = kiln.adam_update %p, %g, %m, %v, %lr, %t {beta1 = 0.9 : f32, beta2 = 0.999 : f32, eps = 1.0e-08 : f32}
      : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<8xf32>, tensor<f32>, tensor<i64>)
      -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @prune_sparsity(%p: tensor<4x4xf32>, %q: tensor<4x4xf32>, %t: tensor<i64>) {
  // expected-error @+1 {{sparsity must be in [0, 1), got 1.5}}
  %0:2 = kiln.magnitude_prune %p, %q, %t {sparsity = 1.5 : f32, start = 0 : i64, end = 0 : i64}
      : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<i64>) -> (tensor<4x4xf32>, tensor<4x4xf32>)
  return
}

// -----

func.func @prune_schedule(%p: tensor<4x4xf32>, %q: tensor<4x4xf32>, %t: tensor<i64>) {
  // expected-error @+1 {{needs 0 <= start <= end, got start 9, end 3}}
  %0:2 = kiln.magnitude_prune %p, %q, %t {sparsity = 0.5 : f32, start = 9 : i64, end = 3 : i64}
      : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<i64>) -> (tensor<4x4xf32>, tensor<4x4xf32>)
  return
}

// -----

func.func @prune_types(%p: tensor<4x4xf32>, %q: tensor<4x2xf32>, %t: tensor<i64>) {
  // expected-error @+1 {{all of {param, pruned, new_param, new_pruned} have same type}}
  %0:2 = kiln.magnitude_prune %p, %q, %t {sparsity = 0.5 : f32, start = 0 : i64, end = 0 : i64}
      : (tensor<4x4xf32>, tensor<4x2xf32>, tensor<i64>) -> (tensor<4x4xf32>, tensor<4x4xf32>)
  return
}

// -----

func.func @fake_quant_scale(%x: tensor<4x3xf32>, %s: tensor<4xf32>) {
  // expected-error @+1 {{scale 'tensor<4xf32>' must have the input's size 3 along axis 1}}
  %0 = kiln.fake_quant %x, %s, %s {axis = 1 : i64, quant_min = -127 : i64, quant_max = 127 : i64}
      : (tensor<4x3xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @fake_quant_range(%x: tensor<4x3xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{needs quant_min < quant_max, got 255 and 0}}
  %0 = kiln.fake_quant %x, %s, %s {quant_min = 255 : i64, quant_max = 0 : i64}
      : (tensor<4x3xf32>, tensor<f32>, tensor<f32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @observer_shape(%lo: tensor<f32>, %hi: tensor<f32>, %o: tensor<2xf32>) {
  // expected-error @+1 {{observer must be tensor<3xf32> ([min, max, n]), got 'tensor<2xf32>'}}
  %0:3 = kiln.minmax_observe %lo, %hi, %o {averaging = 0.01 : f32, freeze = 5 : i64, quant_min = 0 : i64, quant_max = 255 : i64}
      : (tensor<f32>, tensor<f32>, tensor<2xf32>) -> (tensor<f32>, tensor<f32>, tensor<2xf32>)
  return
}

// -----

func.func @absmax_axis(%w: tensor<4x3xf32>) {
  // expected-error @+1 {{result must be [3] of the input's element type}}
  %0 = kiln.absmax_scale %w {axis = 1 : i64, quant_max = 127 : i64} : (tensor<4x3xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @channel_prune_result(%w1: tensor<8x4xf32>, %w2: tensor<8x4xf32>, %q: tensor<4xf32>, %t: tensor<i64>) {
  // expected-error @+1 {{new_pruned must be pruned's type 'tensor<4xf32>', got 'tensor<8x4xf32>'}}
  %0 = kiln.channel_prune %w1, %w2, %q, %t {at = 2 : i64, axes = array<i64: 1, 1>, blocks = array<i64: 1, 1>, keep = 2 : i64}
      : (tensor<8x4xf32>, tensor<8x4xf32>, tensor<4xf32>, tensor<i64>) -> tensor<8x4xf32>
  return
}

// -----

func.func @channel_prune_producer(%w1: tensor<8x4xf32>, %w2: tensor<8x5xf32>, %q: tensor<4xf32>, %t: tensor<i64>) {
  // expected-error @+1 {{producer 1 'tensor<8x5xf32>' has no 4 channels of 1 along axis 1}}
  %0 = kiln.channel_prune %w1, %w2, %q, %t {at = 2 : i64, axes = array<i64: 1, 1>, blocks = array<i64: 1, 1>, keep = 2 : i64}
      : (tensor<8x4xf32>, tensor<8x5xf32>, tensor<4xf32>, tensor<i64>) -> tensor<4xf32>
  return
}

// -----

func.func @topk_k_too_large(%x: tensor<2x4xf32>) -> tensor<2x5xf32> {
  // expected-error @+2 {{k (5) must be in [0, 4], the size of axis 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %v, %i = kiln.topk %x {axis = 1 : i64, k = 5 : i64} : (tensor<2x4xf32>) -> (tensor<2x5xf32>, tensor<2x5xi64>)
  return %v : tensor<2x5xf32>
}

// -----

func.func @cumsum_axis(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %c = kiln.cumsum %x {axis = 2 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %c : tensor<2x4xf32>
}

// -----

func.func @scatter_elements_shapes(%x: tensor<3x5xf32>, %i: tensor<3x2xi64>, %u: tensor<3x3xf32>) -> tensor<3x5xf32> {
  // expected-error @+2 {{indices and updates must have one shape}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = kiln.scatter_elements %x, %i, %u {axis = 1 : i64} : (tensor<3x5xf32>, tensor<3x2xi64>, tensor<3x3xf32>) -> tensor<3x5xf32>
  return %y : tensor<3x5xf32>
}

// -----

func.func @scatter_elements_reduction(%x: tensor<3x5xf32>, %i: tensor<3x2xi64>, %u: tensor<3x2xf32>) -> tensor<3x5xf32> {
  // expected-error @+2 {{reduction must be none, add, mul, max or min, got 'sum'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = kiln.scatter_elements %x, %i, %u {axis = 1 : i64, reduction = "sum"} : (tensor<3x5xf32>, tensor<3x2xi64>, tensor<3x2xf32>) -> tensor<3x5xf32>
  return %y : tensor<3x5xf32>
}

// -----

func.func @scatter_nd_updates(%x: tensor<4x4xf32>, %i: tensor<2x1xi64>, %u: tensor<2x3xf32>) -> tensor<4x4xf32> {
  // expected-error @+2 {{updates must have shape [2,4]}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = kiln.scatter_nd %x, %i, %u : (tensor<4x4xf32>, tensor<2x1xi64>, tensor<2x3xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

func.func @gather_elements_grad_dy(%dy: tensor<2x3xf32>, %i: tensor<2x2xi64>) -> tensor<2x4xf32> {
  // expected-error @+1 {{dy 'tensor<2x3xf32>' does not have the indices' shape}}
  %g = kiln.gather_elements_grad %dy, %i {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x2xi64>) -> tensor<2x4xf32>
  return %g : tensor<2x4xf32>
}
