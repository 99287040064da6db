//===- Log.h - progress lines and the metrics file --------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Every --log-every steps (and the first and last) one line on stdout:
//   step 10/100  loss 2.301234  lr 1.000e-02  grad-norm 1.2345  1234.5 samples/s  mem 312 MiB  cpu 95%  ETA 0:00:12
// where "step 10/100" counts the steps done (step index 9 has run); a `\r`
// progress line on stderr only when stderr is a terminal; --metrics FILE one
// JSON object per step:
//   {"step": s, "epoch": e, "loss": L, "lr": lr, "grad_norm": g,
//    "samples_per_s": x, "step_ms": t, "time": T, "rss_mib": m,
//    "peak_mib": p, "cpu_util": u}
// where T is the Unix time (seconds) at the end of the step, m and p the
// resident and peak memory, u the fraction of the usable cores busy over the
// step (SystemMetrics.h) (plus "loss_scale" and "skipped" with loss scaling,
// "comm_mb" — megabytes the rank sent — in multi-rank runs, "alerts" on the
// step an --alert fired, and "eval_loss"/"eval_accuracy" on steps after
// which an eval ran), each
// line flushed as it is written so that a killed run loses nothing it wrote.
//===----------------------------------------------------------------------===//
#ifndef KILN_TRAIN_LOG_H
#define KILN_TRAIN_LOG_H

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace kiln::train {

struct StepRecord {
  int64_t step = 0;  // 0-based index of the step that ran
  int64_t epoch = 0;
  double loss = 0;
  double lr = 0;
  std::optional<double> gradNorm;
  /// Loss scaling: the scale this step ran with, and whether its update was
  /// skipped (non-finite gradients).
  std::optional<double> lossScale;
  bool skipped = false;
  double stepMs = 0;
  std::optional<double> evalLoss, evalAccuracy;
  /// Unix time at the end of the step (seconds).
  double time = 0;
  /// System metrics (SystemMetrics.h); rssBytes 0: not sampled.
  double rssBytes = 0, peakBytes = 0, cpuUtil = 0;
  std::optional<double> commMB;
  std::vector<std::string> alerts;
};

class Logger {
public:
  /// `total`: the run's last step + 1; `first`: the first step this process
  /// runs; `logEvery` 0: no periodic lines.
  Logger(int64_t first, int64_t total, int64_t batch, int64_t logEvery);
  ~Logger();

  /// Opens the metrics file. With `resume`, an existing file keeps its lines
  /// for steps before `first` (what the resumed run would have written) and
  /// the rest is dropped; otherwise it is truncated. Throws UserError.
  void openMetrics(const std::string &path, bool resume);

  void step(const StepRecord &r);
  /// A line on stdout (the progress line is cleared first).
  void message(const std::string &line);
  /// A line on stderr, also from a silent logger (a warning of any rank).
  void warning(const std::string &line);
  /// Clears the progress line.
  void finish();
  /// A silent logger prints nothing (the ranks other than 0 of a
  /// data-parallel run: rank 0 reports the run).
  void setSilent(bool silent) { silent_ = silent; }

private:
  void clearProgress();

  int64_t first_, total_, batch_, logEvery_;
  FILE *metrics_ = nullptr;
  std::string metricsPath_;
  bool tty_ = false, progressShown_ = false, silent_ = false;
  using Clock = std::chrono::steady_clock;
  Clock::time_point windowStart_, lastProgress_;
  int64_t windowSteps_ = 0;
  double avgStepSec_ = 0; // for the ETA
  int64_t stepsSeen_ = 0;
};

/// "%.9g" for finite values, "null" otherwise (JSON has no NaN).
std::string jsonNumber(double v);

} // namespace kiln::train

#endif // KILN_TRAIN_LOG_H
