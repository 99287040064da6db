//===- LossScale.h - the dynamic loss scale ---------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// torch.cuda.amp.GradScaler's update rule (torch/amp/grad_scaler.py,
// _amp_update_scale_), on the host: the plan scales backward's seed by
// scale(), unscales the gradients and skips the update of a step whose
// gradients are not all finite (--kiln-attach-optimizer loss-scale); after
// each step the trainer reports whether it was finite:
//   - not finite: the step was skipped; scale *= backoff, the clean-step
//     count restarts;
//   - finite: the clean-step count grows; at growth_interval the scale is
//     multiplied by growth and the count restarts.
// The scale is a float32, as GradScaler's tensor is, so products round the
// same way. A static scale never changes (skipped steps still skip).
// The state lives in checkpoints, so a resumed run continues the sequence.
//===----------------------------------------------------------------------===//
#ifndef KILN_TRAIN_LOSSSCALE_H
#define KILN_TRAIN_LOSSSCALE_H

#include "Config.h"

#include <cstdint>

namespace kiln::train {

/// What a checkpoint keeps of the scaler.
struct LossScaleState {
  float scale = 0;            // 0: not started (the config's init)
  int64_t growthTracker = 0;  // clean steps since the last change
  int64_t skipped = 0;        // steps skipped so far (the optimizer's step
                              // count is steps - skipped)
  int64_t skippedInARow = 0;
};

class LossScaler {
public:
  explicit LossScaler(const LossScaleConfig &c) : c_(c) { s_.scale = float(c.init); }

  float scale() const { return s_.scale; }
  const LossScaleState &state() const { return s_; }
  /// A checkpoint's state (scale 0: the config's init).
  void restore(const LossScaleState &s) {
    s_ = s;
    if (!(s_.scale > 0))
      s_.scale = float(c_.init);
  }

  /// After a step whose gradients were (not) all finite.
  void update(bool finite) {
    if (!finite) {
      ++s_.skipped;
      ++s_.skippedInARow;
      if (c_.dynamic)
        s_.scale = float(double(s_.scale) * c_.backoffFactor);
      s_.growthTracker = 0;
      return;
    }
    s_.skippedInARow = 0;
    if (!c_.dynamic)
      return;
    if (++s_.growthTracker == c_.growthInterval) {
      s_.scale = float(double(s_.scale) * c_.growthFactor);
      s_.growthTracker = 0;
    }
  }

  /// The dynamic scale has backed off below its minimum: no scale makes the
  /// gradients finite.
  bool collapsed() const { return c_.dynamic && double(s_.scale) < c_.min; }

private:
  LossScaleConfig c_;
  LossScaleState s_;
};

} // namespace kiln::train

#endif // KILN_TRAIN_LOSSSCALE_H
