//===- PipelineSchedule.h - pipeline-parallel schedules ---------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The order in which each pipeline rank runs the forward and backward passes
// of the microbatches of one training step, and the point-to-point transfers
// between ranks that order implies: GPipe, 1F1B (PipeDream-Flush, Megatron's
// non-interleaved schedule), Megatron's interleaved 1F1B (several model
// chunks per rank) and ZB-H1 (Zero Bubble Pipeline Parallelism, Qi et al.
// 2023: the backward split into its input and weight parts).
//
// The compiler orders a stage's code by the compute instructions of its rank
// (computeOrder), kiln-compile --emit schedule prints describe(), and the
// simulator (simulatePipelineSchedule) replays the lists against each other
// to check they cannot deadlock and to measure the bubble a schedule leaves.
//
// Layout: rank r of S holds model chunks c = 0..V-1; chunk c of rank r is
// model stage c * S + r (Megatron's interleaved layout), so with V = 1 rank r
// is stage r. Activations flow from stage s to s + 1, gradients back.
//
// Standard C++17 only and exception-free like the rest of runtime/core:
// errors come back as false plus a one-line message.
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_PIPELINESCHEDULE_H
#define KILN_RUNTIME_PIPELINESCHEDULE_H

#include <string>
#include <vector>

namespace kiln::rt {

enum class PipelineScheduleKind { GPipe, OneFOneB, Interleaved, ZeroBubble };

/// "gpipe", "1f1b", "interleaved", "zb": the spelling of --pipeline-schedule.
const char *pipelineScheduleName(PipelineScheduleKind kind);
/// The inverse of pipelineScheduleName; false (and `kind` untouched) for any
/// other string.
bool parsePipelineSchedule(const std::string &name,
                           PipelineScheduleKind &kind);

struct PipelineInstr {
  enum Kind {
    Forward,
    /// The whole backward of a chunk (gpipe, 1f1b, interleaved).
    Backward,
    /// zb: the gradient with respect to the chunk's input, what the previous
    /// stage waits for.
    BackwardInput,
    /// zb: the gradient with respect to the chunk's weights, which nothing
    /// downstream waits for and so can be deferred into bubbles.
    BackwardWeight,
    SendActivation,
    RecvActivation,
    SendGradient,
    RecvGradient,
    /// The data-parallel reduction of the step's gradients, then the update.
    ReduceGradients,
    OptimizerStep
  };
  Kind kind = Forward;
  int microbatch = -1;
  /// The model chunk (virtual stage) on this rank; 0 unless interleaved. For
  /// a send or recv: the local chunk that produces or consumes the tensor.
  int chunk = 0;
  /// The other rank of a send or recv.
  int peer = -1;

  bool isCompute() const {
    return kind == Forward || kind == Backward || kind == BackwardInput ||
           kind == BackwardWeight;
  }
};

/// The model stage of chunk `chunk` on rank `rank`.
inline int pipelineModelStage(int rank, int chunk, int stages) {
  return chunk * stages + rank;
}

struct PipelineSchedule {
  PipelineScheduleKind kind = PipelineScheduleKind::OneFOneB;
  int stages = 1;        ///< S, the pipeline ranks
  int microbatches = 1;  ///< M
  int virtualStages = 1; ///< V, model chunks per rank
  /// One instruction list per pipeline rank, in execution order.
  std::vector<std::vector<PipelineInstr>> ranks;

  /// The text of `kiln-compile --emit schedule`, lit tests check it:
  ///   schedule 1f1b stages=2 microbatches=4 virtual-stages=1 bubble=0.2000
  ///   rank 0: F0 F1 B0 F2 B1 F3 B2 B3 reduce step
  ///   rank 1: F0 B0 F1 B1 F2 B2 F3 B3 reduce step
  /// Compute and step instructions only: F<m>, B<m> (zb: B<m> is the input
  /// part, W<m> the weight part), with V > 1 F<m>.<c> and B<m>.<c>; bubble
  /// is theoreticalBubble.
  std::string describe() const;
  /// describe() with the transfers too, for debugging: recv-act<m>@<peer>,
  /// send-act<m>@<peer>, recv-grad<m>@<peer>, send-grad<m>@<peer> (with V > 1
  /// recv-act<m>.<c>@<peer>, c the local chunk).
  std::string describeWithComm() const;
  /// The Forward/Backward/BackwardInput/BackwardWeight instructions of one
  /// rank, in order: what the compiler needs to order that stage's code.
  std::vector<PipelineInstr> computeOrder(int rank) const;
};

/// The instruction as describe() and describeWithComm() spell it.
std::string pipelineInstrName(const PipelineInstr &instr, bool withChunk);

/// Builds the schedule of `kind` for S = `stages` ranks, M = `microbatches`
/// and V = `virtualStages` chunks per rank (1 unless interleaved). Rejects,
/// with a one-line message naming the flag and its value: S, M or V below 1;
/// V > 1 for a schedule other than interleaved; interleaved with V < 2, with
/// S < 2 or with M not a multiple of S.
///
/// Per rank r (microbatches m in 0..M-1), each compute instruction preceded
/// by the recv it needs and followed by the send it feeds:
///  - gpipe: all forwards, then all backwards, m = 0..M-1.
///  - 1f1b: min(S - r - 1, M) warm-up forwards; then one forward, one
///    backward until the forwards run out; then the remaining backwards.
///  - interleaved: Megatron-LM's forward_backward_pipelining_with_interleaving
///    (see PipelineSchedule.cpp).
///  - zb: ZB-H1 (see PipelineSchedule.cpp).
/// Every list ends with ReduceGradients, OptimizerStep.
bool buildPipelineSchedule(PipelineScheduleKind kind, int stages,
                           int microbatches, int virtualStages,
                           PipelineSchedule &out, std::string &err);

/// Checks the invariants every generated schedule keeps, for a schedule
/// built by hand or edited: one Forward and one Backward (or BackwardInput,
/// then BackwardWeight) per (microbatch, chunk) on each rank, the backward
/// after the forward; exactly the transfers the stage layout implies, each
/// recv before the compute that consumes it and each send after the compute
/// that produces it, to the right peer; ReduceGradients then OptimizerStep
/// last and nowhere else. Deadlock freedom is the simulator's to check.
bool validatePipelineSchedule(const PipelineSchedule &schedule,
                              std::string &err);

/// The cost of each instruction in the simulation. A Forward of one chunk
/// costs forward / V, Backward backward / V, BackwardInput backwardInput / V,
/// BackwardWeight backwardWeight / V: with V chunks per rank each chunk is
/// 1/V of the rank's layers, so that the schedules of one model compare at
/// the same total work. A recv is ready `transfer` after its send ran;
/// sends, ReduceGradients and OptimizerStep take no time (sends are
/// asynchronous, and the reduction and the update are the same on every
/// schedule).
struct PipelineTimes {
  double forward = 1, backward = 2, backwardInput = 1, backwardWeight = 1,
         transfer = 0;
};

struct PipelineSimulation {
  /// When the last rank finishes.
  double makespan = 0;
  /// Per rank: time spent computing, and makespan minus that.
  std::vector<double> busy, idle;
  /// Total idle / (S * makespan).
  double bubbleFraction = 0;
  /// Per rank: the most (microbatch, chunk) pairs whose Forward has run and
  /// whose Backward (or BackwardInput) has not, i.e. the activations held.
  /// With V > 1 each pair is one chunk's activations, 1/V of a rank's.
  std::vector<int> peakLiveMicrobatches;
};

/// Replays the ranks' lists against each other: each rank runs its list in
/// order, a compute instruction for its cost, a send without blocking, a
/// recv blocking until the matching send (same kind and microbatch, from
/// its peer, for this chunk) has run plus `transfer`. Fails with "deadlock:
/// rank R waits for <instr> ..." when no rank can go on before all are done.
bool simulatePipelineSchedule(const PipelineSchedule &schedule,
                              const PipelineTimes &times,
                              PipelineSimulation &out, std::string &err);

/// The bubble fraction (idle / (S * makespan), as the simulator measures it)
/// with uniform per-microbatch times and no transfer cost:
///  - gpipe, 1f1b: (S-1) / (M+S-1).
///  - interleaved: (S-1) / (V*M + S-1). The warm-up and cool-down shrink to
///    (S-1) chunk passes of 1/V the cost; this is that exactly, where
///    Megatron's "bubble divided by V" ((S-1)/(V*(M+S-1))) is the large-M
///    approximation of it.
///  - zb: 0, the zero-bubble family's limit. ZB-H1 itself, as generated
///    here, leaves (S-1) * (F + B - W) idle per rank: with the default times
///    (F = B = W = 1) and M >= S that is (S-1) / (3M + S-1), a third of
///    1f1b's; the simulator measures it.
/// 0 for S <= 1 or M <= 0.
double theoreticalBubble(PipelineScheduleKind kind, int stages,
                         int microbatches, int virtualStages);

} // namespace kiln::rt

#endif // KILN_RUNTIME_PIPELINESCHEDULE_H
