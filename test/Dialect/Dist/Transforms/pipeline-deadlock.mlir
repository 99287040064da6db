// RUN: kiln-opt %s --kiln-pipeline=stages=2 -verify-diagnostics -o /dev/null

// The split runs the rank programs symbolically (a send never waits, a
// receive waits for its send) and refuses an order in which every rank
// waits on a receive, naming each one's. Here stage 0's backward computes
// what stage 1's forward needs, and stage 0's forward needs that: in the
// 1f1b order rank 0 receives in its forward before it sends in its
// backward, and rank 1 receives first too.
func.func @train_step(%x: tensor<4xf32> {onnx.name = "x"})
    -> (tensor<f32> {kiln.loss, onnx.name = "loss"}) {
  %v0 = kiln.exp %x {kiln.stage = 0 : i64, kiln.backward} : tensor<4xf32>
  // expected-error @+1 {{--kiln-pipeline: the 1f1b order deadlocks, each rank waiting on a receive: rank 0 on tag 1 from rank 1 ('dist.recv'), rank 1 on tag 0 from rank 0 ('dist.recv')}}
  %v1 = kiln.exp %v0 {kiln.stage = 1 : i64} : tensor<4xf32>
  %v2 = kiln.exp %v1 {kiln.stage = 0 : i64} : tensor<4xf32>
  %l = kiln.reduce_sum %v2 {axes = array<i64: 0>, keepdims = false, kiln.stage = 0 : i64} : (tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
