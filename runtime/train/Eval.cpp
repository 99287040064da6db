//===- Eval.cpp - held-out evaluation ---------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "Eval.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace kiln::train {

using rt::DType;

int findOutput(const rt::Program &program, const std::string &name) {
  const auto &names = program.outputNames();
  for (size_t k = 0; k < names.size(); ++k)
    if (names[k] == name)
      return (int)k;
  return -1;
}

namespace {

double loadFloat(const rt::HostTensor &t, int64_t i) {
  switch (t.dtype()) {
  case DType::F32: return t.as<float>()[i];
  case DType::F64: return t.as<double>()[i];
  case DType::F16: return rt::halfToFloat(t.as<uint16_t>()[i]);
  case DType::BF16: return rt::bf16ToFloat(t.as<uint16_t>()[i]);
  default: return std::numeric_limits<double>::quiet_NaN();
  }
}

int64_t loadLabel(const rt::HostTensor &t, int64_t i) {
  switch (t.dtype()) {
  case DType::I64: return t.as<int64_t>()[i];
  case DType::I32: return t.as<int32_t>()[i];
  case DType::I16: return t.as<int16_t>()[i];
  case DType::I8: return t.as<int8_t>()[i];
  case DType::U8: return t.as<uint8_t>()[i];
  case DType::U16: return t.as<uint16_t>()[i];
  case DType::U32: return t.as<uint32_t>()[i];
  case DType::U64: return (int64_t)t.as<uint64_t>()[i];
  default: return -1;
  }
}

} // namespace

double scalarValue(const rt::HostTensor &t) {
  if (t.numel() < 1 || !t.data())
    return std::numeric_limits<double>::quiet_NaN();
  return loadFloat(t, 0);
}

Evaluator::Evaluator(
    std::string_view plan, const Config &config,
    const std::vector<std::pair<std::string, std::string>> &bindings)
    : config_(config) {
  if (plan.empty())
    fail("--eval-data: this executable has no eval plan");
  std::string err;
  program_ = rt::Program::load(plan.data(), plan.size(), err);
  if (!program_)
    fail("payload eval plan: " + err);
  lossOut_ = findOutput(*program_, "loss");
  if (lossOut_ < 0)
    fail("payload eval plan: it has no 'loss' output");
  // Data specs from the plan's inputs.
  std::vector<DataSpec> specs;
  int64_t batch = -1;
  const auto &names = program_->inputNames();
  const auto &descs = program_->inputDescs();
  for (size_t k = 0; k < names.size(); ++k) {
    if (names[k] == config.lrInput) {
      inputSource_.push_back(-1);
      continue;
    }
    if (names[k] == config.stepInput) {
      inputSource_.push_back(-2);
      continue;
    }
    if (descs[k].shape.empty())
      fail("payload eval plan: input '" + names[k] + "' has no batch axis");
    if (batch < 0)
      batch = descs[k].shape[0];
    if (descs[k].shape[0] != batch)
      fail("payload eval plan: its inputs disagree on the batch size");
    DataSpec s;
    s.name = names[k];
    s.dtype = descs[k].dtype;
    s.sampleShape.assign(descs[k].shape.begin() + 1, descs[k].shape.end());
    inputSource_.push_back((int)specs.size());
    specs.push_back(std::move(s));
  }
  if (specs.empty())
    fail("payload eval plan: it reads no data");
  data_.open(bindings, specs, batch, "--eval-data");
  if (config.loss == "cross-entropy" && config.numClasses)
    data_.checkLabels(config.labels, *config.numClasses, config.ignoreIndex);
  for (size_t k = 0; k < specs.size(); ++k)
    if (specs[k].name == config.labels)
      labelsSource_ = (int)k;
  if (config.loss == "cross-entropy" && labelsSource_ >= 0) {
    logitsOut_ = findOutput(*program_, "logits");
    if (logitsOut_ < 0 && !config.logits.empty())
      logitsOut_ = findOutput(*program_, config.logits);
  }
}

EvalResult Evaluator::run(const rt::Program &train, int64_t step) {
  std::string err;
  for (const std::string &name : program_->paramNames()) {
    rt::TensorDesc d;
    if (!train.getParamDesc(name, d))
      continue;
    rt::HostTensor v;
    if (!train.getParam(name, v, err) || !program_->setParam(name, v, err))
      fail("eval: " + err);
  }
  rt::HostTensor lrT(rt::TensorDesc{DType::F32, {}});
  rt::HostTensor stepT(rt::TensorDesc{DType::I64, {}});
  *stepT.as<int64_t>() = step + 1;
  std::vector<rt::HostTensor> batch = data_.makeBatch();
  std::vector<uint64_t> order = epochOrder(data_.numSamples(), 0, 0, false);
  std::vector<const rt::HostTensor *> inputs;
  for (int src : inputSource_)
    inputs.push_back(src == -1 ? &lrT : src == -2 ? &stepT : &batch[src]);
  std::string bad = program_->checkInputs(inputs);
  if (!bad.empty())
    fail("eval: " + bad);

  EvalResult r;
  double lossSum = 0;
  uint64_t correct = 0, counted = 0;
  int64_t steps = data_.stepsPerEpoch();
  std::vector<rt::HostTensor> outputs;
  program_->setSeed(0);
  program_->setStep(0);
  for (int64_t s = 0; s < steps; ++s) {
    data_.gather(order, (uint64_t)s * (uint64_t)data_.batch(), batch);
    if (!program_->run(inputs, outputs, err))
      fail("eval: " + err);
    lossSum += scalarValue(outputs[lossOut_]);
    if (logitsOut_ >= 0) {
      const rt::HostTensor &logits = outputs[logitsOut_];
      const rt::HostTensor &labels = batch[labelsSource_];
      int64_t positions = labels.numel();
      int64_t c = logits.shape().empty() ? 0 : logits.shape().back();
      if (c <= 0 || logits.numel() != positions * c)
        continue;
      for (int64_t i = 0; i < positions; ++i) {
        int64_t y = loadLabel(labels, i);
        if (config_.ignoreIndex && y == *config_.ignoreIndex)
          continue;
        int64_t best = 0;
        double bestV = loadFloat(logits, i * c);
        for (int64_t j = 1; j < c; ++j) {
          double v = loadFloat(logits, i * c + j);
          if (v > bestV || (std::isnan(v) && !std::isnan(bestV))) {
            bestV = v;
            best = j;
          }
        }
        correct += best == y;
        ++counted;
      }
    }
  }
  r.loss = steps ? lossSum / (double)steps : 0;
  if (logitsOut_ >= 0 && counted)
    r.accuracy = (double)correct / (double)counted;
  r.samples = (uint64_t)steps * (uint64_t)data_.batch();
  return r;
}

} // namespace kiln::train
