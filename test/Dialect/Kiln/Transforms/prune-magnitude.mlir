// RUN: kiln-opt %s --kiln-attach-optimizer=optimizer=adam --kiln-prune-magnitude="sparsity=0.75 start=2 end=10 every=4" | FileCheck %s --check-prefix=ADAM
// RUN: kiln-opt %s --kiln-attach-optimizer=optimizer=sgd --kiln-prune-magnitude=sparsity=0.5 | FileCheck %s --check-prefix=SGD
// RUN: not kiln-opt %s --kiln-attach-optimizer=optimizer=sgd --kiln-prune-magnitude=sparsity=1.0 2>&1 | FileCheck %s --check-prefix=RATIO
// RUN: not kiln-opt %s --kiln-attach-optimizer=optimizer=sgd --kiln-prune-magnitude="start=5 end=4" 2>&1 | FileCheck %s --check-prefix=ORDER
// RUN: not kiln-opt %s --kiln-prune-magnitude 2>&1 | FileCheck %s --check-prefix=NOSTEP

// Adam: the weight (rank 2) gets a zero-initialised `w/pruned` state, a
// magnitude_prune after its update, and its moments masked by 1 - pruned;
// the bias (rank 1) is not pruned. The mask is returned as its update.
// ADAM-LABEL: func.func @train_step
// ADAM-SAME: %[[T:[^:]*]]: tensor<i64> {onnx.name = "kiln.step"}
// ADAM-SAME: %[[Q:[^:]*]]: tensor<4x2xf32> {kiln.init = "zeros", kiln.param, kiln.role = "optimizer", onnx.name = "w/pruned"}
// ADAM-NOT: b/pruned
// ADAM-SAME: tensor<4x2xf32> {kiln.update = [[QARG:[0-9]+]] : i64, onnx.name = "w/pruned"})
// ADAM: %[[P:.*]], %[[NM:.*]], %[[NV:.*]] = kiln.adam_update %arg0,
// ADAM: %[[PP:.*]], %[[NQ:.*]] = kiln.magnitude_prune %[[P]], %[[Q]], %[[T]] {end = 10 : i64, every = 4 : i64, sparsity = 7.500000e-01 : f32, start = 2 : i64}
// ADAM: %[[KEEP:.*]] = kiln.sub %{{.*}}, %[[NQ]] : (tensor<f32>, tensor<4x2xf32>) -> tensor<4x2xf32>
// ADAM-DAG: %[[MM:.*]] = kiln.mul %[[NM]], %[[KEEP]]
// ADAM-DAG: %[[MV:.*]] = kiln.mul %[[NV]], %[[KEEP]]
// ADAM: kiln.adam_update %arg1,
// ADAM-NOT: kiln.magnitude_prune
// ADAM: return %{{.*}}, %{{.*}}, %[[PP]], %[[MM]], %[[MV]], %{{.*}}, %{{.*}}, %{{.*}}, %[[NQ]]

// SGD has no state to mask; --kiln-prune-magnitude's defaults prune at
// once at step 0.
// SGD-LABEL: func.func @train_step
// SGD: %[[P:.*]] = kiln.sgd_update %arg0
// SGD: %[[PP:.*]], %[[NQ:.*]] = kiln.magnitude_prune %[[P]], %{{.*}}, %{{.*}} {end = 0 : i64, sparsity = 5.000000e-01 : f32, start = 0 : i64}
// SGD-NOT: kiln.sub
// SGD: return %{{.*}}, %{{.*}}, %[[PP]], %{{.*}}, %[[NQ]]

// RATIO: --kiln-prune-magnitude: sparsity must be in [0, 1), got 1
// ORDER: --kiln-prune-magnitude: needs 0 <= start <= end, got start 5, end 4
// NOSTEP: --kiln-prune-magnitude: @train_step has no 'kiln.step' argument; run --kiln-attach-optimizer first
func.func @train_step(%w: tensor<4x2xf32> {kiln.param, kiln.role = "weight", onnx.name = "w"},
                      %b: tensor<2xf32> {kiln.param, kiln.role = "weight", onnx.name = "b"},
                      %x: tensor<3x4xf32> {onnx.name = "x"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"}, tensor<4x2xf32> {kiln.grad_of = 0 : i64},
        tensor<2xf32> {kiln.grad_of = 1 : i64}) {
  %y = kiln.matmul %x, %w : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
  %z = kiln.add %y, %b : (tensor<3x2xf32>, tensor<2xf32>) -> tensor<3x2xf32>
  %s = kiln.reduce_sum %z {axes = array<i64: 0, 1>, keepdims = false} : (tensor<3x2xf32>) -> tensor<f32>
  %g = kiln.matmul %x, %z {transpose_lhs = true} : (tensor<3x4xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
  %gb = kiln.reduce_sum %z {axes = array<i64: 0>, keepdims = false} : (tensor<3x2xf32>) -> tensor<2xf32>
  return %s, %g, %gb : tensor<f32>, tensor<4x2xf32>, tensor<2xf32>
}
