//===- Profile.h - kiln-train --profile -------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// --profile FILE.json [--profile-steps A:B]: the kernels, collectives, data
// loading and checkpoints of steps A..B-1 as a Chrome/Perfetto trace (one
// process per rank; threads compute, communication, host). A step's event
// says how often the operating system preempted the compute thread during
// it ("preempted": time no event accounts for). A kernel's event
// carries its ONNX node, operand shapes, bytes and FLOPs (the plan's, from
// the op's cost interface). At the end a summary in the log: the step split
// into compute, waiting for communication, waiting for data and the rest
// (idle: the executor's own work, logging, metrics), how much of the
// communication was hidden behind compute, and the kernels that took
// longest with their achieved GFLOP/s and GB/s (rt::kernelTable, the table
// KILN_PROFILE prints for any program).
//===----------------------------------------------------------------------===//
#ifndef KILN_TRAIN_PROFILE_H
#define KILN_TRAIN_PROFILE_H

#include "kiln/comm/Communicator.h"
#include "kiln/runtime/Trace.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kiln::train {

/// Parses "A:B" (0 <= A < B) into [a, b); false with a message otherwise.
bool parseProfileSteps(const std::string &text, int64_t &a, int64_t &b,
                       std::string &err);

/// What one rank's profiled steps show (Profiler::summarize).
struct ProfileSummary {
  int64_t steps = 0;
  double stepMs = 0;      // mean wall time of a profiled step
  double computeMs = 0;   // in kernels, not waiting for communication
  double waitMs = 0;      // in kernels waiting for communication
  double dataMs = 0;      // waiting for the data loader
  double commMs = 0;      // collectives in flight (union of their intervals)
  double hiddenMs = 0;    // of commMs, while compute ran
  /// Kernels per step (time, calls, FLOPs, bytes), longest first.
  std::vector<rt::KernelStat> kernels;
};

class Profiler {
public:
  /// Profiles steps [first, last) of the run.
  Profiler(std::string path, int64_t first, int64_t last)
      : path_(std::move(path)), first_(first), last_(last) {}

  rt::TraceRecorder &recorder() { return trace_; }
  int64_t first() const { return first_; }
  int64_t last() const { return last_; }

  /// Before step s runs: records while s is in the window.
  void beginStep(int64_t s);
  /// After step s: its event on the compute thread.
  void endStep(int64_t s);
  /// A host interval while recording: `category` "data" (waiting for the
  /// loader), "checkpoint" or "eval".
  void host(const std::string &name, const std::string &category,
            rt::TraceRecorder::Clock::time_point start,
            rt::TraceRecorder::Clock::time_point end);

  ProfileSummary summarize() const;

  /// Collective over `world` (every rank calls it): gathers the ranks'
  /// events to rank 0, which writes the trace atomically, and returns the
  /// log lines (rank 0's summary, the overlap of every rank). Throws
  /// std::runtime_error when the file cannot be written.
  std::vector<std::string> finish(comm::Communicator &world);

private:
  std::string path_;
  int64_t first_, last_;
  rt::TraceRecorder trace_;
  rt::TraceRecorder::Clock::time_point stepStart_;
  long preemptedBefore_ = 0;
  long long waitedBefore_ = -1;
  bool recording_ = false;
};

} // namespace kiln::train

#endif // KILN_TRAIN_PROFILE_H
