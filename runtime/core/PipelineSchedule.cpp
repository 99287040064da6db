//===- PipelineSchedule.cpp - pipeline-parallel schedule generator --------===//
// SPDX-License-Identifier: Apache-2.0
//
// The generators, the invariant check and the event simulator of
// PipelineSchedule.h. The generators decide only the order of the compute
// instructions on each rank; the transfers follow from the stage layout: a
// Forward of a chunk that is not model stage 0 is preceded by the recv of
// its input activation and, unless it is the last model stage, followed by
// the send of its output; a backward likewise with gradients in the other
// direction. Placing each recv just before its consumer is the loosest
// order there is with asynchronous sends (any earlier recv only adds a
// wait), so a compute order that is deadlock-free stays so.
//===----------------------------------------------------------------------===//
#include "kiln/runtime/PipelineSchedule.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <map>
#include <tuple>

namespace kiln::rt {

namespace {

using Instr = PipelineInstr;

/// Above this many (microbatch, chunk) passes per rank times ranks a
/// schedule is a typo, not a pipeline: refuse before allocating it.
constexpr int64_t kMaxChunkPasses = int64_t(1) << 24;

/// Appends the instructions of one rank, each compute step with the
/// transfers the stage layout gives it.
class RankBuilder {
public:
  RankBuilder(int stages, int virtualStages, int rank, std::vector<Instr> &out)
      : S_(stages), V_(virtualStages), rank_(rank), out_(out) {}

  void forward(int m, int c) {
    int s = pipelineModelStage(rank_, c, S_);
    if (s > 0)
      out_.push_back({Instr::RecvActivation, m, c, (s - 1) % S_});
    out_.push_back({Instr::Forward, m, c, -1});
    if (s < lastStage())
      out_.push_back({Instr::SendActivation, m, c, (s + 1) % S_});
  }
  /// `kind` is Backward or, for zb, BackwardInput: either is what the
  /// previous stage waits for, so the gradient is sent right after it.
  void backward(int m, int c, Instr::Kind kind = Instr::Backward) {
    int s = pipelineModelStage(rank_, c, S_);
    if (s < lastStage())
      out_.push_back({Instr::RecvGradient, m, c, (s + 1) % S_});
    out_.push_back({kind, m, c, -1});
    if (s > 0)
      out_.push_back({Instr::SendGradient, m, c, (s - 1) % S_});
  }
  /// zb's weight gradient: local, nothing to send or receive.
  void weight(int m, int c) {
    out_.push_back({Instr::BackwardWeight, m, c, -1});
  }
  void finish() {
    out_.push_back({Instr::ReduceGradients, -1, 0, -1});
    out_.push_back({Instr::OptimizerStep, -1, 0, -1});
  }

private:
  int lastStage() const { return S_ * V_ - 1; }

  int S_, V_, rank_;
  std::vector<Instr> &out_;
};

void buildGPipe(int S, int M, int r, std::vector<Instr> &out) {
  RankBuilder b(S, 1, r, out);
  for (int m = 0; m < M; ++m)
    b.forward(m, 0);
  for (int m = 0; m < M; ++m)
    b.backward(m, 0);
  b.finish();
}

/// 1F1B (PipeDream-Flush): rank r runs S - r - 1 forwards ahead, the number
/// of microbatches in flight below it when its first gradient can come
/// back, so it holds at most S - r activations instead of gpipe's M.
void buildOneFOneB(int S, int M, int r, std::vector<Instr> &out) {
  RankBuilder b(S, 1, r, out);
  int warmup = std::min(S - r - 1, M);
  for (int m = 0; m < warmup; ++m)
    b.forward(m, 0);
  for (int i = 0; i < M - warmup; ++i) {
    b.forward(warmup + i, 0);
    b.backward(i, 0);
  }
  for (int i = M - warmup; i < M; ++i)
    b.backward(i, 0);
  b.finish();
}

/// ZB-H1 (Qi et al. 2023, "Zero Bubble Pipeline Parallelism", section 3).
/// The forwards and the input-gradient passes (B) run in exactly 1F1B's
/// order, so the gradient chain between ranks is 1F1B's with the shorter B.
/// The weight-gradient passes (W) wait on nothing and nothing waits on them;
/// the rule for them is: on rank r, W(m) runs right after B(m + r), and the
/// last r W's run after the last B.
///
/// Why a lag of r: rank r's last B runs r gradient hops before rank 0's, so
/// each rank has r slots of tail it would otherwise idle in; the lag moves r
/// W's into that tail. Rank 0 defers nothing: its W's fill the cool-down
/// gaps where it waits for gradients. A rank nearer the end that ran its W's
/// early instead would delay the B's the ranks before it wait for (the lag
/// S - r - 1 instead of r leaves 1f1b's bubble as it is). With equal F, B
/// and W times and M >= S this reaches the ZB-H1 bubble, (S-1) * (F + B - W)
/// per rank, a third of 1f1b's (S-1) * (F + B + W).
///
/// Memory: rank r holds at most S - r microbatches between F and B (1f1b's)
/// and at most S between F and W (S - r in flight plus r deferred W's),
/// 1f1b's peak on rank 0: ZB-H1's "no more memory than 1F1B".
void buildZeroBubbleH1(int S, int M, int r, std::vector<Instr> &out) {
  RankBuilder b(S, 1, r, out);
  int warmup = std::min(S - r - 1, M);
  int lag = r;
  auto inputGrad = [&](int m) {
    b.backward(m, 0, Instr::BackwardInput);
    if (m - lag >= 0)
      b.weight(m - lag, 0);
  };
  for (int m = 0; m < warmup; ++m)
    b.forward(m, 0);
  for (int i = 0; i < M - warmup; ++i) {
    b.forward(warmup + i, 0);
    inputGrad(i);
  }
  for (int i = M - warmup; i < M; ++i)
    inputGrad(i);
  for (int m = std::max(0, M - lag); m < M; ++m)
    b.weight(m, 0);
  b.finish();
}

/// Megatron-LM's interleaved 1F1B (forward_backward_pipelining_with_
/// interleaving in megatron/core/pipeline_parallel/schedules.py, with
/// microbatch_group_size_per_vp_stage = S, its default).
///
/// The M*V chunk passes of a rank are numbered k = 0..M*V-1 by
/// get_schedule_table: microbatches in groups of S, each group running
/// through chunk 0, then chunk 1, ..., so k maps to microbatch
/// (k / (S*V)) * S + k % S and forward chunk (k % (S*V)) / S; the backward
/// pass k is the same microbatch in chunk V - 1 - that (get_model_chunk_id
/// with forward=False), since gradients enter at the last chunk.
/// Warm-up: (S - r - 1) * 2 + (V - 1) * S forwards, at most M*V
/// (get_pp_rank_microbatches); then forward k + warm-up, backward k
/// alternately; then the remaining backwards.
void buildInterleaved(int S, int M, int V, int r, std::vector<Instr> &out) {
  RankBuilder b(S, V, r, out);
  int total = M * V;
  auto microbatch = [&](int k) { return (k / (S * V)) * S + k % S; };
  auto forwardChunk = [&](int k) { return (k % (S * V)) / S; };
  auto forward = [&](int k) { b.forward(microbatch(k), forwardChunk(k)); };
  auto backward = [&](int k) {
    b.backward(microbatch(k), V - 1 - forwardChunk(k));
  };
  int warmup = std::min((S - r - 1) * 2 + (V - 1) * S, total);
  for (int k = 0; k < warmup; ++k)
    forward(k);
  for (int k = 0; k < total - warmup; ++k) {
    forward(k + warmup);
    backward(k);
  }
  for (int k = total - warmup; k < total; ++k)
    backward(k);
  b.finish();
}

std::string fmt4(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

std::string describeImpl(const PipelineSchedule &s, bool withComm) {
  std::string text = "schedule ";
  text += pipelineScheduleName(s.kind);
  text += " stages=" + std::to_string(s.stages) +
          " microbatches=" + std::to_string(s.microbatches) +
          " virtual-stages=" + std::to_string(s.virtualStages) + " bubble=" +
          fmt4(theoreticalBubble(s.kind, s.stages, s.microbatches,
                                 s.virtualStages)) +
          "\n";
  bool withChunk = s.virtualStages > 1;
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    text += "rank " + std::to_string(r) + ":";
    for (const Instr &in : s.ranks[r]) {
      if (!withComm && !in.isCompute() && in.kind != Instr::ReduceGradients &&
          in.kind != Instr::OptimizerStep)
        continue;
      text += " " + pipelineInstrName(in, withChunk);
    }
    text += "\n";
  }
  return text;
}

bool isRecv(Instr::Kind k) {
  return k == Instr::RecvActivation || k == Instr::RecvGradient;
}
bool isSend(Instr::Kind k) {
  return k == Instr::SendActivation || k == Instr::SendGradient;
}
bool isGradientTransfer(Instr::Kind k) {
  return k == Instr::SendGradient || k == Instr::RecvGradient;
}

/// Where one (microbatch, chunk) of a rank had each of its instructions.
struct PassPositions {
  int forward = -1, backward = -1, backwardInput = -1, backwardWeight = -1;
  int recvAct = -1, sendAct = -1, recvGrad = -1, sendGrad = -1;

  int *slot(Instr::Kind k) {
    switch (k) {
    case Instr::Forward: return &forward;
    case Instr::Backward: return &backward;
    case Instr::BackwardInput: return &backwardInput;
    case Instr::BackwardWeight: return &backwardWeight;
    case Instr::RecvActivation: return &recvAct;
    case Instr::SendActivation: return &sendAct;
    case Instr::RecvGradient: return &recvGrad;
    case Instr::SendGradient: return &sendGrad;
    default: return nullptr;
    }
  }
};

} // namespace

const char *pipelineScheduleName(PipelineScheduleKind kind) {
  switch (kind) {
  case PipelineScheduleKind::GPipe: return "gpipe";
  case PipelineScheduleKind::OneFOneB: return "1f1b";
  case PipelineScheduleKind::Interleaved: return "interleaved";
  case PipelineScheduleKind::ZeroBubble: return "zb";
  }
  return "?";
}

bool parsePipelineSchedule(const std::string &name,
                           PipelineScheduleKind &kind) {
  for (PipelineScheduleKind k :
       {PipelineScheduleKind::GPipe, PipelineScheduleKind::OneFOneB,
        PipelineScheduleKind::Interleaved, PipelineScheduleKind::ZeroBubble})
    if (name == pipelineScheduleName(k)) {
      kind = k;
      return true;
    }
  return false;
}

std::string pipelineInstrName(const PipelineInstr &in, bool withChunk) {
  std::string mc = std::to_string(in.microbatch);
  if (withChunk)
    mc += "." + std::to_string(in.chunk);
  std::string at = "@" + std::to_string(in.peer);
  switch (in.kind) {
  case Instr::Forward: return "F" + mc;
  case Instr::Backward:
  case Instr::BackwardInput: return "B" + mc;
  case Instr::BackwardWeight: return "W" + mc;
  case Instr::SendActivation: return "send-act" + mc + at;
  case Instr::RecvActivation: return "recv-act" + mc + at;
  case Instr::SendGradient: return "send-grad" + mc + at;
  case Instr::RecvGradient: return "recv-grad" + mc + at;
  case Instr::ReduceGradients: return "reduce";
  case Instr::OptimizerStep: return "step";
  }
  return "?";
}

std::string PipelineSchedule::describe() const {
  return describeImpl(*this, false);
}

std::string PipelineSchedule::describeWithComm() const {
  return describeImpl(*this, true);
}

std::vector<PipelineInstr> PipelineSchedule::computeOrder(int rank) const {
  std::vector<PipelineInstr> order;
  if (rank < 0 || rank >= (int)ranks.size())
    return order;
  for (const Instr &in : ranks[rank])
    if (in.isCompute())
      order.push_back(in);
  return order;
}

bool buildPipelineSchedule(PipelineScheduleKind kind, int stages,
                           int microbatches, int virtualStages,
                           PipelineSchedule &out, std::string &err) {
  const char *name = pipelineScheduleName(kind);
  bool interleaved = kind == PipelineScheduleKind::Interleaved;
  if (stages < 1) {
    err = "--stages " + std::to_string(stages) + " must be at least 1";
    return false;
  }
  if (microbatches < 1) {
    err = "--microbatches " + std::to_string(microbatches) +
          " must be at least 1";
    return false;
  }
  if (virtualStages < 1) {
    err = "--virtual-stages " + std::to_string(virtualStages) +
          " must be at least 1";
    return false;
  }
  if (!interleaved && virtualStages > 1) {
    err = "--virtual-stages " + std::to_string(virtualStages) +
          " needs the interleaved schedule; " + name +
          " runs one model chunk per rank";
    return false;
  }
  if (interleaved) {
    if (virtualStages < 2) {
      err = "--virtual-stages " + std::to_string(virtualStages) +
            " must be at least 2 for the interleaved schedule";
      return false;
    }
    if (stages < 2) {
      err = "--stages " + std::to_string(stages) +
            " must be at least 2 for the interleaved schedule";
      return false;
    }
    // Megatron's grouping runs S microbatches through each chunk in turn; a
    // short last group would leave the last rank waiting on the first.
    if (microbatches % stages != 0) {
      err = "--microbatches " + std::to_string(microbatches) +
            " must be a multiple of the " + std::to_string(stages) +
            " pipeline stages for the interleaved schedule";
      return false;
    }
  }
  if (int64_t(stages) * microbatches * virtualStages > kMaxChunkPasses) {
    err = "--stages " + std::to_string(stages) + " x --microbatches " +
          std::to_string(microbatches) + " x --virtual-stages " +
          std::to_string(virtualStages) + " is more than " +
          std::to_string(kMaxChunkPasses) + " chunk passes";
    return false;
  }

  PipelineSchedule s;
  s.kind = kind;
  s.stages = stages;
  s.microbatches = microbatches;
  s.virtualStages = virtualStages;
  s.ranks.resize(stages);
  for (int r = 0; r < stages; ++r) {
    std::vector<Instr> &list = s.ranks[r];
    switch (kind) {
    case PipelineScheduleKind::GPipe:
      buildGPipe(stages, microbatches, r, list);
      break;
    case PipelineScheduleKind::OneFOneB:
      buildOneFOneB(stages, microbatches, r, list);
      break;
    case PipelineScheduleKind::Interleaved:
      buildInterleaved(stages, microbatches, virtualStages, r, list);
      break;
    case PipelineScheduleKind::ZeroBubble:
      buildZeroBubbleH1(stages, microbatches, r, list);
      break;
    }
  }
  out = std::move(s);
  return true;
}

bool validatePipelineSchedule(const PipelineSchedule &s, std::string &err) {
  const int S = s.stages, M = s.microbatches, V = s.virtualStages;
  if (S < 1 || M < 1 || V < 1) {
    err = "stages, microbatches and virtual stages must be at least 1";
    return false;
  }
  if ((int)s.ranks.size() != S) {
    err = std::to_string(s.ranks.size()) + " instruction lists for " +
          std::to_string(S) + " stages";
    return false;
  }
  const int lastStage = S * V - 1;
  const bool withChunk = V > 1;
  for (int r = 0; r < S; ++r) {
    const std::vector<Instr> &list = s.ranks[r];
    std::string at = "rank " + std::to_string(r) + ": ";
    const int n = (int)list.size();
    if (n < 2 || list[n - 2].kind != Instr::ReduceGradients ||
        list[n - 1].kind != Instr::OptimizerStep) {
      err = at + "does not end with reduce, step";
      return false;
    }
    std::vector<PassPositions> pos(size_t(M) * V);
    for (int i = 0; i < n - 2; ++i) {
      const Instr &in = list[i];
      if (in.kind == Instr::ReduceGradients ||
          in.kind == Instr::OptimizerStep) {
        err = at + pipelineInstrName(in, withChunk) +
              " before the end of the list";
        return false;
      }
      std::string name = pipelineInstrName(in, withChunk);
      if (in.microbatch < 0 || in.microbatch >= M || in.chunk < 0 ||
          in.chunk >= V) {
        err = at + name + " is outside microbatches 0.." +
              std::to_string(M - 1) + ", chunks 0.." + std::to_string(V - 1);
        return false;
      }
      int *slot = pos[size_t(in.microbatch) * V + in.chunk].slot(in.kind);
      if (*slot >= 0) {
        err = at + name + " appears twice";
        return false;
      }
      *slot = i;
      if (isSend(in.kind) || isRecv(in.kind)) {
        int stage = pipelineModelStage(r, in.chunk, S);
        // Activations come from stage - 1 and go to stage + 1; gradients
        // the other way.
        bool towardsEnd = in.kind == Instr::SendActivation ||
                          in.kind == Instr::RecvGradient;
        int other = towardsEnd ? stage + 1 : stage - 1;
        if (other < 0 || other > lastStage) {
          err = at + name + ": model stage " + std::to_string(stage) +
                " has no " + (towardsEnd ? "next" : "previous") + " stage";
          return false;
        }
        if (in.peer != other % S) {
          err = at + name + ": model stage " + std::to_string(other) +
                " is on rank " + std::to_string(other % S);
          return false;
        }
      }
    }
    for (int m = 0; m < M; ++m)
      for (int c = 0; c < V; ++c) {
        const PassPositions &p = pos[size_t(m) * V + c];
        Instr probe{Instr::Forward, m, c, -1};
        std::string fwd = pipelineInstrName(probe, withChunk);
        std::string mc = fwd.substr(1);
        if (p.forward < 0) {
          err = at + fwd + " is missing";
          return false;
        }
        bool split = p.backwardInput >= 0 || p.backwardWeight >= 0;
        if (split && p.backward >= 0) {
          err = at + "microbatch " + mc +
                " has both a whole and a split backward";
          return false;
        }
        if (split && (p.backwardInput < 0 || p.backwardWeight < 0)) {
          err = at + (p.backwardInput < 0 ? "B" : "W") + mc + " is missing";
          return false;
        }
        if (!split && p.backward < 0) {
          err = at + "B" + mc + " is missing";
          return false;
        }
        int back = split ? p.backwardInput : p.backward;
        if (back < p.forward) {
          err = at + "B" + mc + " runs before " + fwd;
          return false;
        }
        if (split && p.backwardWeight < p.backwardInput) {
          err = at + "W" + mc + " runs before B" + mc;
          return false;
        }
        int stage = pipelineModelStage(r, c, S);
        if (stage > 0 && !(p.recvAct >= 0 && p.recvAct < p.forward)) {
          err = at + fwd + " needs a recv-act before it";
          return false;
        }
        if (stage < lastStage && !(p.sendAct > p.forward)) {
          err = at + fwd + " needs a send-act after it";
          return false;
        }
        if (stage < lastStage && !(p.recvGrad >= 0 && p.recvGrad < back)) {
          err = at + "B" + mc + " needs a recv-grad before it";
          return false;
        }
        if (stage > 0 && !(p.sendGrad > back)) {
          err = at + "B" + mc + " needs a send-grad after it";
          return false;
        }
      }
  }
  return true;
}

bool simulatePipelineSchedule(const PipelineSchedule &s,
                              const PipelineTimes &times,
                              PipelineSimulation &out, std::string &err) {
  const int S = s.stages, M = s.microbatches, V = s.virtualStages;
  if (S < 1 || M < 1 || V < 1 || (int)s.ranks.size() != S) {
    err = "a schedule of " + std::to_string(s.ranks.size()) +
          " instruction lists for stages=" + std::to_string(S) +
          " microbatches=" + std::to_string(M) +
          " virtual-stages=" + std::to_string(V);
    return false;
  }
  for (double t : {times.forward, times.backward, times.backwardInput,
                   times.backwardWeight, times.transfer})
    if (!std::isfinite(t) || t < 0) {
      err = "pipeline times must be finite and not negative";
      return false;
    }
  const bool withChunk = V > 1;
  auto duration = [&](Instr::Kind k) {
    switch (k) {
    case Instr::Forward: return times.forward / V;
    case Instr::Backward: return times.backward / V;
    case Instr::BackwardInput: return times.backwardInput / V;
    case Instr::BackwardWeight: return times.backwardWeight / V;
    default: return 0.0;
    }
  };

  // A transfer is (gradient?, microbatch, from rank, to rank, receiving
  // chunk); the sender's receiving chunk follows from the stage layout.
  // Times queue per key so that a malformed schedule that repeats a send
  // still pairs first with first.
  using Key = std::tuple<bool, int, int, int, int>;
  std::map<Key, std::deque<double>> sent;
  auto sendKey = [&](int r, const Instr &in) {
    int stage = pipelineModelStage(r, in.chunk, S);
    int to = in.kind == Instr::SendActivation ? stage + 1 : stage - 1;
    int toChunk = to >= 0 ? to / S : -1;
    return Key(isGradientTransfer(in.kind), in.microbatch, r, in.peer, toChunk);
  };
  auto recvKey = [&](int r, const Instr &in) {
    return Key(isGradientTransfer(in.kind), in.microbatch, in.peer, r,
               in.chunk);
  };

  std::vector<size_t> pc(S, 0);
  std::vector<double> clock(S, 0.0), busy(S, 0.0);
  std::vector<int> peak(S, 0);
  std::vector<std::vector<char>> live(S, std::vector<char>(size_t(M) * V, 0));
  std::vector<int> liveCount(S, 0);
  for (;;) {
    bool progress = false, done = true;
    for (int r = 0; r < S; ++r) {
      const std::vector<Instr> &list = s.ranks[r];
      while (pc[r] < list.size()) {
        const Instr &in = list[pc[r]];
        if (isRecv(in.kind)) {
          auto it = sent.find(recvKey(r, in));
          if (it == sent.end() || it->second.empty())
            break;
          clock[r] = std::max(clock[r], it->second.front() + times.transfer);
          it->second.pop_front();
        } else if (isSend(in.kind)) {
          sent[sendKey(r, in)].push_back(clock[r]);
        } else if (in.isCompute()) {
          if (in.microbatch < 0 || in.microbatch >= M || in.chunk < 0 ||
              in.chunk >= V) {
            err = "rank " + std::to_string(r) + ": " +
                  pipelineInstrName(in, withChunk) +
                  " is outside the schedule's microbatches or chunks";
            return false;
          }
          double d = duration(in.kind);
          clock[r] += d;
          busy[r] += d;
          char &l = live[r][size_t(in.microbatch) * V + in.chunk];
          if (in.kind == Instr::Forward && !l) {
            l = 1;
            peak[r] = std::max(peak[r], ++liveCount[r]);
          } else if ((in.kind == Instr::Backward ||
                      in.kind == Instr::BackwardInput) &&
                     l) {
            l = 0;
            --liveCount[r];
          }
        }
        ++pc[r];
        progress = true;
      }
      if (pc[r] < list.size())
        done = false;
    }
    if (done)
      break;
    if (!progress) {
      // Name the first blocked rank and what its peer is doing instead.
      for (int r = 0; r < S; ++r) {
        if (pc[r] == s.ranks[r].size())
          continue;
        const Instr &in = s.ranks[r][pc[r]];
        err = "deadlock: rank " + std::to_string(r) + " waits for " +
              pipelineInstrName(in, withChunk);
        int p = in.peer;
        if (p < 0 || p >= S)
          err += ", from no rank";
        else if (pc[p] == s.ranks[p].size())
          err += ", which rank " + std::to_string(p) +
                 " finished without sending";
        else
          err += ", while rank " + std::to_string(p) + " waits for " +
                 pipelineInstrName(s.ranks[p][pc[p]], withChunk);
        return false;
      }
    }
  }

  PipelineSimulation sim;
  sim.makespan = *std::max_element(clock.begin(), clock.end());
  sim.busy = busy;
  sim.idle.resize(S);
  double idle = 0;
  for (int r = 0; r < S; ++r) {
    sim.idle[r] = sim.makespan - busy[r];
    idle += sim.idle[r];
  }
  sim.bubbleFraction = sim.makespan > 0 ? idle / (S * sim.makespan) : 0.0;
  sim.peakLiveMicrobatches = peak;
  out = std::move(sim);
  return true;
}

double theoreticalBubble(PipelineScheduleKind kind, int stages,
                         int microbatches, int virtualStages) {
  if (stages <= 1 || microbatches <= 0)
    return 0.0;
  double S = stages, M = microbatches, V = std::max(virtualStages, 1);
  switch (kind) {
  case PipelineScheduleKind::GPipe:
  case PipelineScheduleKind::OneFOneB: return (S - 1) / (M + S - 1);
  case PipelineScheduleKind::Interleaved: return (S - 1) / (V * M + S - 1);
  case PipelineScheduleKind::ZeroBubble: return 0.0;
  }
  return 0.0;
}

} // namespace kiln::rt
