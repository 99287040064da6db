// RUN: kiln-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// The discardable kiln.* attributes of the training contract, checked by the
// dialect verifier (KilnAttrs.cpp): a well-formed @train_step round-trips
// unchanged, each malformed attribute is refused with one line naming it.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: {kiln.param, kiln.role = "weight", onnx.name = "w"}
// CHECK-SAME: {kiln.init = "zeros", kiln.param, kiln.role = "optimizer", onnx.name = "w/momentum_buffer"}
// CHECK-SAME: {kiln.labels, onnx.name = "labels"}
// CHECK-SAME: -> (tensor<f32> {kiln.loss}, tensor<4xf32> {kiln.update = 0 : i64}, tensor<4xf32> {kiln.grad_of = 0 : i64})
// CHECK-SAME: attributes {kiln.optimizer = "momentum"}
module attributes {kiln.weights = "/models/m.onnx"} {
func.func @train_step(%w: tensor<4xf32> {kiln.param, kiln.role = "weight", onnx.name = "w"},
                      %m: tensor<4xf32> {kiln.param, kiln.role = "optimizer", kiln.init = "zeros", onnx.name = "w/momentum_buffer"},
                      %y: tensor<4xf32> {kiln.labels, onnx.name = "labels"})
    -> (tensor<f32> {kiln.loss}, tensor<4xf32> {kiln.update = 0 : i64}, tensor<4xf32> {kiln.grad_of = 0 : i64})
    attributes {kiln.optimizer = "momentum"} {
  %l = kiln.reduce_sum %w {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
  return %l, %w, %y : tensor<f32>, tensor<4xf32>, tensor<4xf32>
}
}

// -----

// expected-error @+1 {{kiln.role must be one of weight, state, frozen or optimizer, got "wieght"}}
func.func @role_name(%w: tensor<4xf32> {kiln.param, kiln.role = "wieght"}) -> tensor<4xf32> {
  %0 = kiln.relu %w : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{kiln.role must be one of weight, state, frozen or optimizer, got 1 : i64}}
func.func @role_type(%w: tensor<4xf32> {kiln.param, kiln.role = 1}) -> tensor<4xf32> {
  %0 = kiln.relu %w : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{kiln.role on argument 0, which is not a kiln.param}}
func.func @role_not_param(%x: tensor<4xf32> {kiln.role = "weight"}) -> tensor<4xf32> {
  %0 = kiln.relu %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{kiln.init must be one of zeros, got "ones"}}
func.func @init_name(%w: tensor<4xf32> {kiln.param, kiln.init = "ones"}) -> tensor<4xf32> {
  %0 = kiln.relu %w : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{kiln.init on argument 0, which is not a kiln.param}}
func.func @init_not_param(%x: tensor<4xf32> {kiln.init = "zeros"}) -> tensor<4xf32> {
  %0 = kiln.relu %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{kiln.param is a unit attribute, got true}}
func.func @param_type(%w: tensor<4xf32> {kiln.param = true}) -> tensor<4xf32> {
  %0 = kiln.relu %w : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{kiln.labels is a unit attribute, got "labels"}}
func.func @labels_type(%y: tensor<4xf32> {kiln.labels = "labels"}) -> tensor<4xf32> {
  %0 = kiln.relu %y : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{unknown kiln argument attribute 'kiln.parm'}}
func.func @arg_typo(%w: tensor<4xf32> {kiln.parm}) -> tensor<4xf32> {
  %0 = kiln.relu %w : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{kiln.loss is a unit attribute, got 0 : i64}}
func.func @loss_type(%x: tensor<4xf32>) -> (tensor<4xf32> {kiln.loss = 0}) {
  %0 = kiln.relu %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{kiln.update = 3 is not an argument number (the function has 1 arguments)}}
func.func @update_range(%w: tensor<4xf32> {kiln.param}) -> (tensor<4xf32> {kiln.update = 3 : i64}) {
  %0 = kiln.relu %w : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{kiln.update = -1 is not an argument number (the function has 1 arguments)}}
func.func @update_negative(%w: tensor<4xf32> {kiln.param}) -> (tensor<4xf32> {kiln.update = -1 : i64}) {
  %0 = kiln.relu %w : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{kiln.update must be an i64 argument number, got "w"}}
func.func @update_type(%w: tensor<4xf32> {kiln.param}) -> (tensor<4xf32> {kiln.update = "w"}) {
  %0 = kiln.relu %w : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{kiln.update = 0 names an argument that is not a kiln.param}}
func.func @update_not_param(%x: tensor<4xf32>) -> (tensor<4xf32> {kiln.update = 0 : i64}) {
  %0 = kiln.relu %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{kiln.grad_of = 1 is not an argument number (the function has 1 arguments)}}
func.func @grad_of_range(%w: tensor<4xf32> {kiln.param}) -> (tensor<4xf32> {kiln.grad_of = 1 : i64}) {
  %0 = kiln.relu %w : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{kiln.grad_of must be an i64 argument number, got 0 : i32}}
func.func @grad_of_type(%w: tensor<4xf32> {kiln.param}) -> (tensor<4xf32> {kiln.grad_of = 0 : i32}) {
  %0 = kiln.relu %w : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{unknown kiln result attribute 'kiln.updates'}}
func.func @result_typo(%w: tensor<4xf32> {kiln.param}) -> (tensor<4xf32> {kiln.updates = 0 : i64}) {
  %0 = kiln.relu %w : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{kiln.optimizer must be one of sgd, momentum, adam or adamw, got "lion"}}
func.func @optimizer_name(%x: tensor<4xf32>) -> tensor<4xf32> attributes {kiln.optimizer = "lion"} {
  %0 = kiln.relu %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @optimizer_place(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{kiln.optimizer belongs on a function}}
  %0 = kiln.relu %x {kiln.optimizer = "sgd"} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{kiln.weights must be a string (the model's path), got 1 : i64}}
module attributes {kiln.weights = 1} {
func.func @weights_type(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = kiln.relu %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}
}

// -----

// expected-error @+1 {{kiln.weights belongs on a module}}
func.func @weights_place(%x: tensor<4xf32>) -> tensor<4xf32> attributes {kiln.weights = "m.onnx"} {
  %0 = kiln.relu %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{unknown kiln attribute 'kiln.optimiser'}}
func.func @op_typo(%x: tensor<4xf32>) -> tensor<4xf32> attributes {kiln.optimiser = "sgd"} {
  %0 = kiln.relu %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A mesh names each of its axes; the runtime's collectives use the names.
// CHECK: shard.grid @mesh(shape = 2x4) {kiln.axis_names = ["dp", "tp"]}
shard.grid @mesh(shape = 2x4) {kiln.axis_names = ["dp", "tp"]}

// -----

// expected-error @+1 {{kiln.axis_names must name each of the grid's 2 axes, got ["dp"]}}
shard.grid @mesh(shape = 2x4) {kiln.axis_names = ["dp"]}

// -----

// expected-error @+1 {{kiln.axis_names belongs on a shard.grid}}
func.func @axes_place(%x: tensor<4xf32>) -> tensor<4xf32> attributes {kiln.axis_names = ["dp"]} {
  %0 = kiln.relu %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A gradient all-reduce's wire format (--kiln-data-parallel compression=...).
// CHECK-LABEL: func.func @wire
// CHECK: shard.all_reduce %{{.*}} on @mesh grid_axes = [0] reduction = average {kiln.compression = "int8"}
shard.grid @mesh(shape = 2) {kiln.axis_names = ["dp"]}
func.func @wire(%g: tensor<4xf32>) -> tensor<4xf32> {
  %a = shard.all_reduce %g on @mesh grid_axes = [0] reduction = average {kiln.compression = "int8"} : tensor<4xf32> -> tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

shard.grid @mesh(shape = 2) {kiln.axis_names = ["dp"]}
func.func @wire_name(%g: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{kiln.compression must be "bf16", "fp16" or "int8", got "int4"}}
  %a = shard.all_reduce %g on @mesh grid_axes = [0] reduction = average {kiln.compression = "int4"} : tensor<4xf32> -> tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

shard.grid @mesh(shape = 2) {kiln.axis_names = ["dp"]}
func.func @wire_max(%g: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{kiln.compression compresses sums and averages of f32 only}}
  %a = shard.all_reduce %g on @mesh grid_axes = [0] reduction = max {kiln.compression = "bf16"} : tensor<4xf32> -> tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

shard.grid @mesh(shape = 2) {kiln.axis_names = ["dp"]}
func.func @wire_f64(%g: tensor<4xf64>) -> tensor<4xf64> {
  // expected-error @+1 {{kiln.compression compresses sums and averages of f32 only}}
  %a = shard.all_reduce %g on @mesh grid_axes = [0] reduction = sum {kiln.compression = "fp16"} : tensor<4xf64> -> tensor<4xf64>
  return %a : tensor<4xf64>
}

// -----

// expected-error @+1 {{kiln.compression belongs on a shard.all_reduce}}
func.func @wire_place(%x: tensor<4xf32>) -> tensor<4xf32> attributes {kiln.compression = "int8"} {
  %0 = kiln.relu %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}
