//===- Trace.h - a per-rank trace of kernels and collectives ----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// TraceRecorder collects complete events ("X" in the Chrome trace format:
// a name, a category, a thread, a start and a duration) while it is
// enabled: the executor records each kernel it runs (ExecContext::trace),
// runtime/comm each collective from its start to its completion, kiln-train
// data loading and checkpoints. kiln-train --profile writes them as a
// Chrome/Perfetto trace, one process per rank (docs/Training.md).
//
// Times are microseconds on the wall clock, so that the ranks of one job
// line up in one trace; durations come from the steady clock.
//
// Recording is cheap enough to trace every kernel of every step: what
// repeats (a plan step's name, category and arguments) is interned once as
// a TraceLabel, and an event is the label and two steady-clock readings
// (24 bytes, no string, no allocation once reserve() made room). events()
// and chromeEvents() resolve the labels when the trace is read.
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_TRACE_H
#define KILN_RUNTIME_TRACE_H

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace kiln::rt {

/// The threads of a rank's trace.
enum class TraceThread : int { Compute = 0, Communication = 1, Host = 2 };

/// Extra fields of an event ("args"), as (key, value) strings.
using TraceArgs = std::vector<std::pair<std::string, std::string>>;

struct TraceEvent {
  std::string name, category;
  TraceThread thread = TraceThread::Compute;
  double startUs = 0, durationUs = 0;
  /// Shared: a kernel's arguments are made once per plan step, not per run.
  std::shared_ptr<const TraceArgs> args;
};

/// An interned (name, category, args) triple of a recorder.
using TraceLabel = uint32_t;

class TraceRecorder {
public:
  using Clock = std::chrono::steady_clock;

  TraceRecorder();

  /// Events are kept only while enabled (kiln-train: the --profile-steps).
  bool enabled() const { return enabled_; }
  void setEnabled(bool on) { enabled_ = on; }

  /// Microseconds of the trace's time axis at `t`.
  double toUs(Clock::time_point t) const;
  double nowUs() const { return toUs(Clock::now()); }

  /// Interns an event's description; the label stays valid for the
  /// recorder's life (clear() keeps labels). Thread-safe.
  TraceLabel label(std::string name, std::string category,
                   std::shared_ptr<const TraceArgs> args = nullptr);
  /// Records [start, end) under `label` when enabled: the hot path (the
  /// executor's kernels). Thread-safe.
  void record(TraceLabel label, TraceThread thread, Clock::time_point start,
              Clock::time_point end);

  /// Records [start, end) when enabled, interning a label for it.
  /// Thread-safe.
  void record(std::string name, std::string category, TraceThread thread,
              Clock::time_point start, Clock::time_point end,
              TraceArgs args = {});
  /// The same with arguments shared by many events (no copy).
  void record(std::string name, std::string category, TraceThread thread,
              Clock::time_point start, Clock::time_point end,
              std::shared_ptr<const TraceArgs> args);

  /// Room for `n` events, so that recording never reallocates (a large
  /// vector's move would show as a gap between two kernels).
  void reserve(size_t n);
  /// A copy of the events so far (thread-safe).
  std::vector<TraceEvent> events() const;
  void clear();

  /// The events as Chrome trace JSON objects, comma-separated (no brackets),
  /// with process `pid` named `processName` and its threads named.
  std::string chromeEvents(int pid, const std::string &processName) const;

private:
  struct Label {
    std::string name, category;
    std::shared_ptr<const TraceArgs> args;
  };
  struct Record {
    TraceLabel label;
    TraceThread thread;
    int64_t startNs, endNs; // steady clock, since steadyEpoch_
  };

  bool enabled_ = false;
  Clock::time_point steadyEpoch_;
  double wallEpochUs_ = 0;
  mutable std::mutex m_;
  std::vector<Label> labels_;
  std::vector<Record> records_;
};

/// Total length of the union of `intervals` ([start, end) pairs) not covered
/// by the union of `holes`. With communication intervals and the intervals
/// in which compute waited for communication, it is the communication time
/// hidden behind compute.
double uncoveredLength(std::vector<std::pair<double, double>> intervals,
                       std::vector<std::pair<double, double>> holes);

/// Total length of the union of `intervals`.
double unionLength(std::vector<std::pair<double, double>> intervals);

/// One kernel's share of a run (kiln-train --profile per step, KILN_PROFILE
/// over a program's life).
struct KernelStat {
  std::string name;
  double ms = 0;    // time in it
  double calls = 0; // launches
  double flops = 0; // floating-point work done (0: the plan gives none)
  double bytes = 0; // bytes its operands and results hold
};

/// The table both profilers print, longest first, at most `top` rows:
///   "matmul            3.210 ms  41.2%    12 calls   85.3 GFLOP/s   9.1 GB/s"
/// where the percentage is of `totalMs`; GFLOP/s is left out of kernels
/// without FLOPs.
std::vector<std::string> kernelTable(std::vector<KernelStat> stats,
                                     double totalMs, size_t top);

} // namespace kiln::rt

#endif // KILN_RUNTIME_TRACE_H
