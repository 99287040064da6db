//===- Eval.h - held-out evaluation -----------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// --eval-data runs the payload's eval plan (the forward pass with the loss;
// outputs `loss`, and `logits` when the loss was appended) over the held-out
// arrays in file order, full batches only, with the train program's current
// parameters. Accuracy (cross-entropy with a `logits` output) is the
// fraction of label positions, ignore_index excluded, where the argmax over
// the last axis of the logits equals the label; with soft labels
// (--soft-labels: a probability row per position) the label is the row's
// argmax.
//===----------------------------------------------------------------------===//
#ifndef KILN_TRAIN_EVAL_H
#define KILN_TRAIN_EVAL_H

#include "Config.h"
#include "Data.h"

#include "kiln/runtime/Runtime.h"

#include <map>
#include <memory>
#include <optional>

namespace kiln::train {

struct EvalResult {
  double loss = 0;
  std::optional<double> accuracy;
  uint64_t samples = 0;
};

class Evaluator {
public:
  /// Loads the eval plan and binds `bindings` (--eval-data) to its inputs.
  /// Throws UserError.
  Evaluator(std::string_view plan, const Config &config,
            const std::vector<std::pair<std::string, std::string>> &bindings);
  /// Copies the parameters of `train` the eval plan shares and runs it over
  /// the eval set; `whole` (may be null) holds the gathered parameters
  /// `train` keeps split over the ranks (ZeRO-3). Throws UserError.
  EvalResult run(const rt::Program &train, int64_t step,
                 const std::map<std::string, rt::HostTensor> *whole = nullptr);

private:
  const Config &config_;
  std::unique_ptr<rt::Program> program_;
  Dataset data_;
  std::vector<int> inputSource_; // per plan input: data index, -1 lr, -2 step
  int lossOut_ = -1, logitsOut_ = -1, labelsSource_ = -1;
};

/// Output `name` of `program`, or -1.
int findOutput(const rt::Program &program, const std::string &name);
/// Element 0 of a floating tensor as double (NaN for other types).
double scalarValue(const rt::HostTensor &t);

} // namespace kiln::train

#endif // KILN_TRAIN_EVAL_H
