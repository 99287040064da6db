// RUN: kiln-opt %s --split-input-file --kiln-shard=mesh=dp=2 --kiln-shard-propagation --kiln-partition --verify-diagnostics
// RUN: not kiln-opt %s --split-input-file --kiln-shard="mesh=dp=2 shard=nothing=dp" 2>&1 | FileCheck %s --check-prefix=NOMATCH
// RUN: not kiln-opt %s --split-input-file --kiln-shard="mesh=dp=2 shard=x=tp,-" 2>&1 | FileCheck %s --check-prefix=NOAXIS
// RUN: not kiln-opt %s --split-input-file --kiln-shard="mesh=dp=0" 2>&1 | FileCheck %s --check-prefix=BADMESH

// NOMATCH: error: --kiln-shard: 'nothing' matches no argument's onnx.name
// NOAXIS: error: --kiln-shard: 'x=tp,-' names mesh axis 'tp', which the mesh (dp=2) does not have
// BADMESH: error: --kiln-shard: mesh axis 'dp=0' is not NAME=SIZE with SIZE >= 1

// An op without a sharding rule.
func.func @train_step(%x: tensor<8x4xf32> {onnx.name = "x"}) -> tensor<8x4xf32> {
  // expected-error @below {{'arith.addf' op has no sharding rule (ShardingRuleOpInterface): the sharding passes cannot tell how its dimensions split}}
  %y = arith.addf %x, %x : tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

// An axis that does not divide the dimension it splits: the batch of 3.
// expected-error @below {{argument 'x': dimension 0 (3) does not divide over 2 ranks of mesh axes ["dp"]}}
func.func @train_step(%x: tensor<3x4xf32> {onnx.name = "x"}) -> tensor<3x4xf32> {
  %y = kiln.relu %x : tensor<3x4xf32>
  return %y : tensor<3x4xf32>
}

// -----

// A sharding over an axis the mesh lacks.
// expected-error @below {{argument 'x' is sharded over mesh axis 'tp', which @kiln_mesh (dp=2) does not have}}
func.func @train_step(%x: tensor<8x4xf32> {onnx.name = "x", kiln.sharding = [["tp"], []]}) -> tensor<8x4xf32> {
  %y = kiln.relu %x : tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

// An op's written sharding that does not divide its result.
func.func @train_step(%x: tensor<8x3xf32> {onnx.name = "x"}) -> tensor<8x3xf32> {
  // expected-error @below {{result 0: dimension 1 (3) does not divide over 2 ranks of mesh axes ["dp"]}}
  %y = kiln.relu %x {kiln.shardings = [[[], ["dp"]]]} : tensor<8x3xf32>
  return %y : tensor<8x3xf32>
}

// -----

// A mesh that does not match.
// expected-error @below {{'shard.grid' op is the mesh dp=4, which does not match --kiln-shard mesh=dp=2}}
shard.grid @kiln_mesh(shape = 4) {kiln.axis_names = ["dp"]}
func.func @train_step(%x: tensor<8x4xf32> {onnx.name = "x"}) -> tensor<8x4xf32> {
  %y = kiln.relu %x : tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}
