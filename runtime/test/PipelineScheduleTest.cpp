//===- PipelineScheduleTest.cpp - schedules, simulation ---------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Hand-checked orders for small pipelines, then the invariants (one pass of
// each kind per microbatch and chunk, paired transfers, no deadlock) and the
// simulated bubble and activation memory over every small configuration.
//===----------------------------------------------------------------------===//
#include "kiln/runtime/PipelineSchedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <tuple>

using namespace kiln::rt;

namespace {

using Kind = PipelineScheduleKind;
using Instr = PipelineInstr;

const Kind kAllKinds[] = {Kind::GPipe, Kind::OneFOneB, Kind::Interleaved,
                          Kind::ZeroBubble};

PipelineSchedule build(Kind kind, int S, int M, int V = 1) {
  PipelineSchedule s;
  std::string err;
  EXPECT_TRUE(buildPipelineSchedule(kind, S, M, V, s, err))
      << pipelineScheduleName(kind) << " S=" << S << " M=" << M << " V=" << V
      << ": " << err;
  return s;
}

PipelineSimulation simulate(const PipelineSchedule &s,
                            const PipelineTimes &times = {}) {
  PipelineSimulation sim;
  std::string err;
  EXPECT_TRUE(simulatePipelineSchedule(s, times, sim, err)) << err;
  return sim;
}

/// The line of describe() for one rank, without the "rank r: " prefix.
std::string rankLine(const PipelineSchedule &s, int rank,
                     bool withComm = false) {
  std::istringstream text(withComm ? s.describeWithComm() : s.describe());
  std::string line, prefix = "rank " + std::to_string(rank) + ": ";
  while (std::getline(text, line))
    if (line.compare(0, prefix.size(), prefix) == 0)
      return line.substr(prefix.size());
  return "<no line for rank " + std::to_string(rank) + ">";
}

/// Whether the configuration is one buildPipelineSchedule must accept.
bool validConfig(Kind kind, int S, int M, int V) {
  if (S < 1 || M < 1 || V < 1)
    return false;
  if (kind != Kind::Interleaved)
    return V == 1;
  return V >= 2 && S >= 2 && M % S == 0;
}

std::string buildError(Kind kind, int S, int M, int V) {
  PipelineSchedule s;
  std::string err;
  EXPECT_FALSE(buildPipelineSchedule(kind, S, M, V, s, err));
  EXPECT_TRUE(s.ranks.empty()) << "a failed build must leave `out` alone";
  return err;
}

/// Sends and recvs as (gradient?, microbatch, from rank, to rank, receiving
/// chunk), worked out here from the stage layout independently of the
/// library, so that pairing is checked against the documented layout.
using Transfer = std::tuple<bool, int, int, int, int>;

void collectTransfers(const PipelineSchedule &s, std::vector<Transfer> &sends,
                      std::vector<Transfer> &recvs) {
  const int S = s.stages;
  for (int r = 0; r < S; ++r)
    for (const Instr &in : s.ranks[r]) {
      int stage = in.chunk * S + r;
      switch (in.kind) {
      case Instr::SendActivation:
      case Instr::SendGradient: {
        bool grad = in.kind == Instr::SendGradient;
        int to = grad ? stage - 1 : stage + 1;
        ASSERT_GE(to, 0);
        ASSERT_LT(to, S * s.virtualStages);
        EXPECT_EQ(in.peer, to % S)
            << "rank " << r << " sends to the wrong rank";
        sends.emplace_back(grad, in.microbatch, r, in.peer, to / S);
        break;
      }
      case Instr::RecvActivation:
      case Instr::RecvGradient: {
        bool grad = in.kind == Instr::RecvGradient;
        int from = grad ? stage + 1 : stage - 1;
        EXPECT_EQ(in.peer, from % S) << "rank " << r << " hears the wrong rank";
        recvs.emplace_back(grad, in.microbatch, in.peer, r, in.chunk);
        break;
      }
      default:
        break;
      }
    }
  std::sort(sends.begin(), sends.end());
  std::sort(recvs.begin(), recvs.end());
}

} // namespace

TEST(PipelineSchedule, NamesRoundTrip) {
  for (Kind k : kAllKinds) {
    Kind parsed = Kind::GPipe;
    EXPECT_TRUE(parsePipelineSchedule(pipelineScheduleName(k), parsed));
    EXPECT_EQ(parsed, k);
  }
  EXPECT_STREQ(pipelineScheduleName(Kind::GPipe), "gpipe");
  EXPECT_STREQ(pipelineScheduleName(Kind::OneFOneB), "1f1b");
  EXPECT_STREQ(pipelineScheduleName(Kind::Interleaved), "interleaved");
  EXPECT_STREQ(pipelineScheduleName(Kind::ZeroBubble), "zb");
  Kind untouched = Kind::ZeroBubble;
  EXPECT_FALSE(parsePipelineSchedule("1F1B", untouched));
  EXPECT_FALSE(parsePipelineSchedule("", untouched));
  EXPECT_FALSE(parsePipelineSchedule("zb-v", untouched));
  EXPECT_EQ(untouched, Kind::ZeroBubble);
}

TEST(PipelineSchedule, GPipeRunsAllForwardsThenAllBackwards) {
  PipelineSchedule s = build(Kind::GPipe, 2, 3);
  EXPECT_EQ(s.describe(),
            "schedule gpipe stages=2 microbatches=3 virtual-stages=1 "
            "bubble=0.2500\n"
            "rank 0: F0 F1 F2 B0 B1 B2 reduce step\n"
            "rank 1: F0 F1 F2 B0 B1 B2 reduce step\n");
  EXPECT_EQ(rankLine(s, 0, true),
            "F0 send-act0@1 F1 send-act1@1 F2 send-act2@1 recv-grad0@1 B0 "
            "recv-grad1@1 B1 recv-grad2@1 B2 reduce step");
  EXPECT_EQ(rankLine(s, 1, true),
            "recv-act0@0 F0 recv-act1@0 F1 recv-act2@0 F2 B0 send-grad0@0 B1 "
            "send-grad1@0 B2 send-grad2@0 reduce step");
}

TEST(PipelineSchedule, OneFOneBTwoStages) {
  EXPECT_EQ(build(Kind::OneFOneB, 2, 4).describe(),
            "schedule 1f1b stages=2 microbatches=4 virtual-stages=1 "
            "bubble=0.2000\n"
            "rank 0: F0 F1 B0 F2 B1 F3 B2 B3 reduce step\n"
            "rank 1: F0 B0 F1 B1 F2 B2 F3 B3 reduce step\n");
}

TEST(PipelineSchedule, OneFOneBFourStagesWarmsUpThenAlternates) {
  const int S = 4, M = 8;
  PipelineSchedule s = build(Kind::OneFOneB, S, M);
  EXPECT_EQ(rankLine(s, 0),
            "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7 reduce step");
  EXPECT_EQ(rankLine(s, 1),
            "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7 reduce step");
  EXPECT_EQ(rankLine(s, 2),
            "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7 reduce step");
  EXPECT_EQ(rankLine(s, 3),
            "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7 reduce step");
  for (int r = 0; r < S; ++r) {
    std::vector<Instr> order = s.computeOrder(r);
    ASSERT_EQ(order.size(), size_t(2 * M));
    // Warm-up: the forwards before the steady state's first forward.
    int warmup = S - r - 1, i = 0;
    for (; i < warmup; ++i) {
      EXPECT_EQ(order[i].kind, Instr::Forward);
      EXPECT_EQ(order[i].microbatch, i);
    }
    // Steady state: forward warmup + j, then backward j.
    for (int j = 0; j < M - warmup; ++j, i += 2) {
      EXPECT_EQ(order[i].kind, Instr::Forward);
      EXPECT_EQ(order[i].microbatch, warmup + j);
      EXPECT_EQ(order[i + 1].kind, Instr::Backward);
      EXPECT_EQ(order[i + 1].microbatch, j);
    }
    // Cool-down: the backwards left, in order.
    for (int j = M - warmup; j < M; ++j, ++i) {
      EXPECT_EQ(order[i].kind, Instr::Backward);
      EXPECT_EQ(order[i].microbatch, j);
    }
  }
}

TEST(PipelineSchedule, OneStageHasNoTransfers) {
  PipelineSchedule s = build(Kind::OneFOneB, 1, 3);
  EXPECT_EQ(s.describeWithComm(),
            "schedule 1f1b stages=1 microbatches=3 virtual-stages=1 "
            "bubble=0.0000\n"
            "rank 0: F0 B0 F1 B1 F2 B2 reduce step\n");
  EXPECT_EQ(rankLine(build(Kind::ZeroBubble, 1, 2), 0, true),
            "F0 B0 W0 F1 B1 W1 reduce step");
  EXPECT_EQ(rankLine(build(Kind::GPipe, 1, 2), 0, true),
            "F0 F1 B0 B1 reduce step");
}

// Derived by hand from Megatron-LM's schedule table (S=2, V=2: passes
// k = 0..7 are (microbatch, chunk) (0,0) (1,0) (0,1) (1,1) (2,0) (3,0) (2,1)
// (3,1); a backward pass k is that microbatch in chunk 1 - chunk).
// Rank 0 warms up (2-0-1)*2 + (2-1)*2 = 4 forwards, rank 1 2.
TEST(PipelineSchedule, InterleavedFollowsMegatron) {
  PipelineSchedule s = build(Kind::Interleaved, 2, 4, 2);
  EXPECT_EQ(s.describe(),
            "schedule interleaved stages=2 microbatches=4 virtual-stages=2 "
            "bubble=0.1111\n"
            "rank 0: F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 "
            "B1.0 B2.1 B3.1 B2.0 B3.0 reduce step\n"
            "rank 1: F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 "
            "B2.1 F3.1 B3.1 B2.0 B3.0 reduce step\n");
  // Chunk 0 of the last rank feeds chunk 1 of rank 0; chunk 1 of the last
  // rank is the last model stage and sends nothing on.
  std::string rank0 = rankLine(s, 0, true), rank1 = rankLine(s, 1, true);
  EXPECT_NE(rank1.find("F0.0 send-act0.0@0"), std::string::npos) << rank1;
  EXPECT_NE(rank0.find("recv-act0.1@1 F0.1 send-act0.1@1"), std::string::npos)
      << rank0;
  EXPECT_NE(rank1.find("recv-act0.1@0 F0.1 B0.1 send-grad0.1@0"),
            std::string::npos)
      << rank1;
  EXPECT_NE(rank0.find("recv-grad0.1@1 B0.1 send-grad0.1@1"),
            std::string::npos)
      << rank0;
  EXPECT_NE(rank1.find("recv-grad0.0@0 B0.0 send-grad0.0@0"),
            std::string::npos)
      << rank1;
  // Rank 0's chunk 0 is model stage 0: nothing to receive, no gradient out.
  EXPECT_EQ(rank0.find("recv-act0.0"), std::string::npos) << rank0;
  EXPECT_NE(rank0.find("recv-grad0.0@1 B0.0 recv-act3.1@1 F3.1"),
            std::string::npos)
      << rank0;
}

TEST(PipelineSchedule, InterleavedWarmupCounts) {
  const int S = 4, M = 8, V = 3;
  PipelineSchedule s = build(Kind::Interleaved, S, M, V);
  for (int r = 0; r < S; ++r) {
    std::vector<Instr> order = s.computeOrder(r);
    int leading = 0;
    while (order[leading].kind == Instr::Forward)
      ++leading;
    // The warm-up forwards, then the steady state's first forward.
    EXPECT_EQ(leading, std::min((S - r - 1) * 2 + (V - 1) * S, M * V) + 1)
        << "rank " << r;
  }
}

TEST(PipelineSchedule, ZeroBubbleTwoStages) {
  PipelineSchedule s = build(Kind::ZeroBubble, 2, 4);
  EXPECT_EQ(s.describe(),
            "schedule zb stages=2 microbatches=4 virtual-stages=1 "
            "bubble=0.0000\n"
            "rank 0: F0 F1 B0 W0 F2 B1 W1 F3 B2 W2 B3 W3 reduce step\n"
            "rank 1: F0 B0 F1 B1 W0 F2 B2 W1 F3 B3 W2 W3 reduce step\n");
  // The gradient goes to the previous stage right after the input part.
  EXPECT_EQ(rankLine(s, 1, true),
            "recv-act0@0 F0 B0 send-grad0@0 recv-act1@0 F1 B1 send-grad1@0 W0 "
            "recv-act2@0 F2 B2 send-grad2@0 W1 recv-act3@0 F3 B3 "
            "send-grad3@0 W2 W3 reduce step");
}

TEST(PipelineSchedule, ZeroBubbleFourStagesDefersWeightsByRank) {
  const int S = 4, M = 8;
  PipelineSchedule s = build(Kind::ZeroBubble, S, M);
  EXPECT_EQ(rankLine(s, 0), "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 F6 B3 W3 F7 "
                            "B4 W4 B5 W5 B6 W6 B7 W7 reduce step");
  EXPECT_EQ(rankLine(s, 1), "F0 F1 F2 B0 F3 B1 W0 F4 B2 W1 F5 B3 W2 F6 B4 W3 "
                            "F7 B5 W4 B6 W5 B7 W6 W7 reduce step");
  EXPECT_EQ(rankLine(s, 2), "F0 F1 B0 F2 B1 F3 B2 W0 F4 B3 W1 F5 B4 W2 F6 B5 "
                            "W3 F7 B6 W4 B7 W5 W6 W7 reduce step");
  EXPECT_EQ(rankLine(s, 3), "F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 F6 "
                            "B6 W3 F7 B7 W4 W5 W6 W7 reduce step");
  PipelineSchedule oneF = build(Kind::OneFOneB, S, M);
  for (int r = 0; r < S; ++r) {
    std::vector<Instr> order = s.computeOrder(r);
    std::vector<int> b(M, -1), w(M, -1);
    std::vector<std::pair<int, int>> forwardAndInput;
    for (int i = 0; i < (int)order.size(); ++i) {
      const Instr &in = order[i];
      ASSERT_NE(in.kind, Instr::Backward) << "zb splits every backward";
      if (in.kind == Instr::BackwardInput) {
        EXPECT_EQ(b[in.microbatch], -1);
        b[in.microbatch] = i;
      } else if (in.kind == Instr::BackwardWeight) {
        EXPECT_EQ(w[in.microbatch], -1);
        w[in.microbatch] = i;
      }
      if (in.kind != Instr::BackwardWeight)
        forwardAndInput.emplace_back(in.kind == Instr::Forward,
                                     in.microbatch);
    }
    for (int m = 0; m < M; ++m) {
      ASSERT_GE(b[m], 0);
      EXPECT_GT(w[m], b[m]) << "rank " << r << " W" << m << " before B" << m;
    }
    // Without the W's, zb's order is 1f1b's.
    std::vector<std::pair<int, int>> expected;
    for (const Instr &in : oneF.computeOrder(r))
      expected.emplace_back(in.kind == Instr::Forward, in.microbatch);
    EXPECT_EQ(forwardAndInput, expected) << "rank " << r;
  }
}

TEST(PipelineSchedule, EveryValidConfigurationIsConsistentAndDeadlockFree) {
  int built = 0;
  for (Kind kind : kAllKinds)
    for (int S = 1; S <= 6; ++S)
      for (int M = 1; M <= 16; ++M)
        for (int V = 1; V <= 3; ++V) {
          SCOPED_TRACE(std::string(pipelineScheduleName(kind)) +
                       " S=" + std::to_string(S) + " M=" + std::to_string(M) +
                       " V=" + std::to_string(V));
          PipelineSchedule s;
          std::string err;
          bool ok = buildPipelineSchedule(kind, S, M, V, s, err);
          ASSERT_EQ(ok, validConfig(kind, S, M, V)) << err;
          if (!ok) {
            EXPECT_FALSE(err.empty());
            continue;
          }
          ++built;
          EXPECT_EQ(s.kind, kind);
          EXPECT_EQ(s.stages, S);
          EXPECT_EQ(s.microbatches, M);
          EXPECT_EQ(s.virtualStages, V);
          ASSERT_EQ((int)s.ranks.size(), S);
          EXPECT_TRUE(validatePipelineSchedule(s, err)) << err;

          bool split = kind == Kind::ZeroBubble;
          for (int r = 0; r < S; ++r) {
            const std::vector<Instr> &list = s.ranks[r];
            ASSERT_GE(list.size(), 2u);
            EXPECT_EQ(list[list.size() - 2].kind, Instr::ReduceGradients);
            EXPECT_EQ(list.back().kind, Instr::OptimizerStep);
            std::vector<int> f(M * V, 0), b(M * V, 0), bi(M * V, 0),
                w(M * V, 0);
            for (const Instr &in : s.computeOrder(r)) {
              int at = in.microbatch * V + in.chunk;
              switch (in.kind) {
              case Instr::Forward: ++f[at]; break;
              case Instr::Backward:
                EXPECT_EQ(f[at], 1) << "backward before forward";
                ++b[at];
                break;
              case Instr::BackwardInput:
                EXPECT_EQ(f[at], 1) << "backward before forward";
                ++bi[at];
                break;
              case Instr::BackwardWeight:
                EXPECT_EQ(bi[at], 1) << "W before B";
                ++w[at];
                break;
              default: ADD_FAILURE() << "computeOrder returned a non-compute";
              }
            }
            for (int i = 0; i < M * V; ++i) {
              EXPECT_EQ(f[i], 1);
              EXPECT_EQ(b[i], split ? 0 : 1);
              EXPECT_EQ(bi[i], split ? 1 : 0);
              EXPECT_EQ(w[i], split ? 1 : 0);
            }
          }

          std::vector<Transfer> sends, recvs;
          collectTransfers(s, sends, recvs);
          EXPECT_EQ(sends, recvs);
          // Every stage boundary carries one activation and one gradient
          // per microbatch.
          EXPECT_EQ(sends.size(), size_t(2) * M * (S * V - 1));
          EXPECT_TRUE(std::adjacent_find(sends.begin(), sends.end()) ==
                      sends.end())
              << "a transfer is sent twice";

          // No deadlock, whatever the costs.
          for (PipelineTimes t : {PipelineTimes{},
                                  PipelineTimes{1, 3, 2, 1, 0.25},
                                  PipelineTimes{0.5, 1, 0.25, 0.75, 2}}) {
            PipelineSimulation sim;
            ASSERT_TRUE(simulatePipelineSchedule(s, t, sim, err)) << err;
            ASSERT_EQ((int)sim.busy.size(), S);
            ASSERT_EQ((int)sim.idle.size(), S);
            ASSERT_EQ((int)sim.peakLiveMicrobatches.size(), S);
            double work = M * (t.forward + (split ? t.backwardInput +
                                                        t.backwardWeight
                                                  : t.backward));
            for (int r = 0; r < S; ++r) {
              EXPECT_NEAR(sim.busy[r], work, 1e-9);
              EXPECT_NEAR(sim.idle[r], sim.makespan - work, 1e-9);
            }
            EXPECT_GE(sim.bubbleFraction, -1e-12);
            EXPECT_LT(sim.bubbleFraction, 1.0);
          }

          std::string text = s.describe();
          EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), S + 1);
        }
  // gpipe, 1f1b, zb: 6*16 each; interleaved: V in {2,3}, S >= 2, M % S == 0.
  int interleaved = 0;
  for (int S = 2; S <= 6; ++S)
    interleaved += 2 * (16 / S);
  EXPECT_EQ(built, 3 * 6 * 16 + interleaved);
}

TEST(PipelineSchedule, SimulatedBubbleOfGPipeAndOneFOneB) {
  PipelineTimes t; // forward 1, backward 2, free transfers
  for (Kind kind : {Kind::GPipe, Kind::OneFOneB})
    for (int S = 1; S <= 6; ++S)
      for (int M = 1; M <= 16; ++M) {
        PipelineSimulation sim = simulate(build(kind, S, M), t);
        double expected = double(S - 1) / (M + S - 1);
        EXPECT_NEAR(sim.bubbleFraction, expected, 1e-9)
            << pipelineScheduleName(kind) << " S=" << S << " M=" << M;
        EXPECT_NEAR(sim.makespan, (M + S - 1) * 3.0, 1e-9);
        EXPECT_NEAR(theoreticalBubble(kind, S, M, 1), expected, 1e-12);
      }
}

TEST(PipelineSchedule, SimulatedBubbleOfInterleaved) {
  for (int S = 2; S <= 6; ++S)
    for (int M = S; M <= 16; M += S)
      for (int V = 2; V <= 3; ++V) {
        PipelineSimulation il = simulate(build(Kind::Interleaved, S, M, V));
        PipelineSimulation oneF = simulate(build(Kind::OneFOneB, S, M));
        double expected = double(S - 1) / (V * M + S - 1);
        EXPECT_NEAR(il.bubbleFraction, expected, 1e-9)
            << "S=" << S << " M=" << M << " V=" << V;
        EXPECT_NEAR(theoreticalBubble(Kind::Interleaved, S, M, V), expected,
                    1e-12);
        EXPECT_LT(il.bubbleFraction, oneF.bubbleFraction);
        // The same work: the chunk passes cost 1/V each.
        EXPECT_NEAR(il.busy[0], oneF.busy[0], 1e-9);
      }
}

TEST(PipelineSchedule, SimulatedBubbleOfZeroBubble) {
  for (int S = 2; S <= 6; ++S)
    for (int M = 1; M <= 16; ++M) {
      PipelineSimulation zb = simulate(build(Kind::ZeroBubble, S, M));
      PipelineSimulation oneF = simulate(build(Kind::OneFOneB, S, M));
      EXPECT_LT(zb.bubbleFraction, oneF.bubbleFraction)
          << "S=" << S << " M=" << M;
      // ZB-H1's (S-1) * (F + B - W) per rank once the pipeline fills.
      if (M >= S) {
        EXPECT_NEAR(zb.bubbleFraction, double(S - 1) / (3 * M + S - 1), 1e-9)
            << "S=" << S << " M=" << M;
      }
    }
  PipelineSimulation large = simulate(build(Kind::ZeroBubble, 4, 64));
  EXPECT_LT(large.bubbleFraction, 0.02);
  EXPECT_EQ(theoreticalBubble(Kind::ZeroBubble, 4, 8, 1), 0.0);
}

TEST(PipelineSchedule, TransferCostDelaysTheRecv) {
  PipelineTimes t;
  t.transfer = 0.5;
  // F on rank 0, hop, F and B on rank 1, hop, B on rank 0.
  PipelineSimulation sim = simulate(build(Kind::OneFOneB, 2, 1), t);
  EXPECT_NEAR(sim.makespan, 1 + 0.5 + 1 + 2 + 0.5 + 2, 1e-12);
  EXPECT_NEAR(sim.busy[0], 3, 1e-12);
  EXPECT_NEAR(sim.idle[1], 7 - 3, 1e-12);
  EXPECT_NEAR(sim.bubbleFraction, (4.0 + 4.0) / (2 * 7), 1e-12);
}

TEST(PipelineSchedule, PeakLiveMicrobatches) {
  for (int S = 1; S <= 6; ++S)
    for (int M = 1; M <= 16; ++M) {
      SCOPED_TRACE("S=" + std::to_string(S) + " M=" + std::to_string(M));
      PipelineSchedule oneFSchedule = build(Kind::OneFOneB, S, M);
      PipelineSimulation gpipe = simulate(build(Kind::GPipe, S, M));
      PipelineSimulation oneF = simulate(oneFSchedule);
      PipelineSimulation zb = simulate(build(Kind::ZeroBubble, S, M));
      EXPECT_EQ(gpipe.peakLiveMicrobatches[0], M);
      EXPECT_EQ(oneF.peakLiveMicrobatches[0], std::min(S, M));
      for (int r = 0; r < S; ++r) {
        EXPECT_EQ(oneF.peakLiveMicrobatches[r], std::min(S - r, M));
        EXPECT_LE(zb.peakLiveMicrobatches[r], oneF.peakLiveMicrobatches[r]);
      }
      // ZB-H1 keeps what W needs too: forwards whose W has not run stay at
      // most S, 1f1b's peak.
      PipelineSchedule zbSchedule = build(Kind::ZeroBubble, S, M);
      for (int r = 0; r < S; ++r) {
        int held = 0, peak = 0;
        for (const Instr &in : zbSchedule.computeOrder(r)) {
          if (in.kind == Instr::Forward)
            peak = std::max(peak, ++held);
          else if (in.kind == Instr::BackwardWeight)
            --held;
        }
        EXPECT_LE(peak, S) << "rank " << r;
      }
    }
  // Interleaved counts chunk passes: rank 0 of S=2 V=2 M=4 holds its four
  // warm-up forwards and the steady state's first.
  PipelineSimulation il = simulate(build(Kind::Interleaved, 2, 4, 2));
  EXPECT_EQ(il.peakLiveMicrobatches[0], 5);
  EXPECT_EQ(il.peakLiveMicrobatches[1], 3);
}

TEST(PipelineSchedule, BadInputsNameTheValue) {
  EXPECT_EQ(buildError(Kind::OneFOneB, 0, 4, 1),
            "--stages 0 must be at least 1");
  EXPECT_EQ(buildError(Kind::GPipe, -2, 4, 1),
            "--stages -2 must be at least 1");
  EXPECT_EQ(buildError(Kind::OneFOneB, 2, 0, 1),
            "--microbatches 0 must be at least 1");
  EXPECT_EQ(buildError(Kind::ZeroBubble, 2, 4, 0),
            "--virtual-stages 0 must be at least 1");
  EXPECT_EQ(buildError(Kind::OneFOneB, 2, 4, 2),
            "--virtual-stages 2 needs the interleaved schedule; 1f1b runs one "
            "model chunk per rank");
  EXPECT_EQ(buildError(Kind::GPipe, 2, 4, 3),
            "--virtual-stages 3 needs the interleaved schedule; gpipe runs one "
            "model chunk per rank");
  EXPECT_EQ(buildError(Kind::ZeroBubble, 2, 4, 2),
            "--virtual-stages 2 needs the interleaved schedule; zb runs one "
            "model chunk per rank");
  EXPECT_EQ(buildError(Kind::Interleaved, 2, 4, 1),
            "--virtual-stages 1 must be at least 2 for the interleaved "
            "schedule");
  EXPECT_EQ(buildError(Kind::Interleaved, 1, 4, 2),
            "--stages 1 must be at least 2 for the interleaved schedule");
  EXPECT_EQ(buildError(Kind::Interleaved, 4, 6, 2),
            "--microbatches 6 must be a multiple of the 4 pipeline stages for "
            "the interleaved schedule");
  EXPECT_EQ(buildError(Kind::GPipe, 4096, 4097, 1),
            "--stages 4096 x --microbatches 4097 x --virtual-stages 1 is more "
            "than 16777216 chunk passes");
}

TEST(PipelineSchedule, SimulatorReportsDeadlock) {
  std::string err;
  PipelineSimulation sim;
  // Rank 0 waits for a gradient before sending the activation that would
  // produce it.
  PipelineSchedule s = build(Kind::OneFOneB, 2, 1);
  std::vector<Instr> &rank0 = s.ranks[0];
  ASSERT_EQ(rank0[2].kind, Instr::RecvGradient);
  std::rotate(rank0.begin(), rank0.begin() + 2, rank0.begin() + 3);
  EXPECT_EQ(rankLine(s, 0, true), "recv-grad0@1 F0 send-act0@1 B0 reduce step");
  // Each list is consistent by itself: the cycle is between the ranks, and
  // only the simulator sees it.
  EXPECT_TRUE(validatePipelineSchedule(s, err)) << err;
  EXPECT_FALSE(simulatePipelineSchedule(s, {}, sim, err));
  EXPECT_EQ(err, "deadlock: rank 0 waits for recv-grad0@1, while rank 1 waits "
                 "for recv-act0@0");

  // A send that never happens.
  PipelineSchedule t = build(Kind::GPipe, 2, 2);
  auto &list = t.ranks[0];
  list.erase(std::find_if(list.begin(), list.end(), [](const Instr &in) {
    return in.kind == Instr::SendActivation && in.microbatch == 1;
  }));
  EXPECT_FALSE(simulatePipelineSchedule(t, {}, sim, err));
  EXPECT_EQ(err, "deadlock: rank 0 waits for recv-grad0@1, while rank 1 waits "
                 "for recv-act1@0");
  EXPECT_FALSE(validatePipelineSchedule(t, err));
  EXPECT_EQ(err, "rank 0: F1 needs a send-act after it");

  PipelineTimes negative;
  negative.transfer = -1;
  EXPECT_FALSE(
      simulatePipelineSchedule(build(Kind::GPipe, 2, 2), negative, sim, err));
  EXPECT_EQ(err, "pipeline times must be finite and not negative");
}

TEST(PipelineSchedule, ValidateCatchesBrokenLists) {
  std::string err;
  {
    PipelineSchedule s = build(Kind::ZeroBubble, 2, 2);
    // Move rank 1's W0 in front of its B0.
    auto &list = s.ranks[1];
    auto w = std::find_if(list.begin(), list.end(), [](const Instr &in) {
      return in.kind == Instr::BackwardWeight && in.microbatch == 0;
    });
    Instr moved = *w;
    list.erase(w);
    list.insert(list.begin(), moved);
    EXPECT_FALSE(validatePipelineSchedule(s, err));
    EXPECT_EQ(err, "rank 1: W0 runs before B0");
  }
  {
    PipelineSchedule s = build(Kind::Interleaved, 2, 2, 2);
    for (Instr &in : s.ranks[1])
      if (in.kind == Instr::SendActivation && in.chunk == 0)
        in.peer = 1;
    EXPECT_FALSE(validatePipelineSchedule(s, err));
    EXPECT_EQ(err, "rank 1: send-act0.0@1: model stage 2 is on rank 0");
  }
  {
    PipelineSchedule s = build(Kind::OneFOneB, 2, 2);
    s.ranks[0].pop_back();
    EXPECT_FALSE(validatePipelineSchedule(s, err));
    EXPECT_EQ(err, "rank 0: does not end with reduce, step");
  }
  {
    PipelineSchedule s = build(Kind::OneFOneB, 2, 2);
    s.ranks[1].insert(s.ranks[1].begin(), Instr{Instr::Forward, 1, 0, -1});
    EXPECT_FALSE(validatePipelineSchedule(s, err));
    EXPECT_EQ(err, "rank 1: F1 appears twice");
  }
  {
    PipelineSchedule s = build(Kind::GPipe, 2, 2);
    s.ranks[0].insert(s.ranks[0].begin(), Instr{Instr::Backward, 1, 0, -1});
    EXPECT_FALSE(validatePipelineSchedule(s, err));
    EXPECT_EQ(err, "rank 0: B1 appears twice");
  }
}
