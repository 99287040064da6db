//===- Alerts.h - kiln-train --alert: threshold warnings --------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// `--alert KIND=THRESHOLD` (repeatable) watches every step of every rank and
// prints one line on stderr the first time a condition holds, naming the
// rank and the step:
//   memory=P%       resident memory above P% of the limit (SystemMetrics.h)
//                   warning: rank 0 memory at 93% of 24 GiB (step 120)
//   step-time=Fx    a step F times slower than the median of the previous
//                   steps (at most the last 64; from the 9th step on; a
//                   step's time leaves out evaluations and checkpoints)
//   loss-spike=Fx   a finite loss F times the median of the previous losses
//                   (the same window; losses of either sign: |loss - median|
//                   above (F - 1)·|median|)
//   nan             a non-finite loss or gradient norm on a step the run
//                   goes on from: not one loss scaling skipped (overflow is
//                   what it handles), nor the non-finite loss that stops
//                   the run with its own error; so it names the step whose
//                   gradients overflowed before the loss did
// `--alert none` turns them all off. The default is memory=90% and nan.
// A condition warns once per run and rank: a slow step after a slow step
// says nothing new. Each warning is also named in the metrics row of its
// step ("alerts": ["memory", ...]) so that kiln-logs finds it.
//===----------------------------------------------------------------------===//
#ifndef KILN_TRAIN_ALERTS_H
#define KILN_TRAIN_ALERTS_H

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

namespace kiln::train {

struct AlertConfig {
  std::optional<double> memoryFraction; // of the limit
  std::optional<double> stepTimeFactor;
  std::optional<double> lossSpikeFactor;
  bool nan = false;

  /// The defaults: memory=90%, nan.
  static AlertConfig defaults();
  /// Applies the --alert values in order to the defaults; throws UserError
  /// "--alert SPEC: why".
  static AlertConfig parse(const std::vector<std::string> &specs);
};

/// What a step looked like, for Alerts::check.
struct AlertInput {
  int64_t step = 0;
  double loss = 0;
  std::optional<double> gradNorm;
  bool skipped = false;  // loss scaling skipped the update
  bool stopping = false; // the run stops on this step with its own error
  double stepMs = 0;
  double rssBytes = 0, limitBytes = 0;
};

class Alerts {
public:
  Alerts(AlertConfig config, int rank) : config_(config), rank_(rank) {}

  /// The warning lines for this step (each condition's first time only),
  /// and their conditions' names ("memory", "step-time", "loss-spike",
  /// "nan") in `fired`.
  std::vector<std::string> check(const AlertInput &in,
                                 std::vector<std::string> *fired = nullptr);

private:
  AlertConfig config_;
  int rank_;
  bool memoryWarned_ = false, stepWarned_ = false, spikeWarned_ = false,
       nanWarned_ = false;
  std::deque<double> times_, losses_;
};

} // namespace kiln::train

#endif // KILN_TRAIN_ALERTS_H
