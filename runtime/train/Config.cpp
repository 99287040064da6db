//===- Config.cpp - the training config in the payload ----------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "Config.h"

#include "Util.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

namespace kiln::train {

using nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string &why) {
  fail("payload config: " + why);
}

const json *field(const json &obj, const char *key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

std::string getString(const json &obj, const char *key, const std::string &dflt,
                      const std::string &where = "") {
  const json *v = field(obj, key);
  if (!v)
    return dflt;
  if (!v->is_string())
    bad(where + "'" + key + "' must be a string");
  return v->get<std::string>();
}

double getNumber(const json &obj, const char *key, double dflt,
                 const std::string &where = "") {
  const json *v = field(obj, key);
  if (!v)
    return dflt;
  if (!v->is_number())
    bad(where + "'" + key + "' must be a number");
  double d = v->get<double>();
  if (!std::isfinite(d))
    bad(where + "'" + key + "' must be finite");
  return d;
}

std::optional<int64_t> getInt(const json &obj, const char *key,
                              const std::string &where = "") {
  const json *v = field(obj, key);
  if (!v)
    return std::nullopt;
  if (!v->is_number_integer())
    bad(where + "'" + key + "' must be an integer");
  if (v->is_number_unsigned() && v->get<uint64_t>() > (uint64_t)INT64_MAX)
    bad(where + "'" + key + "' is too large");
  return v->get<int64_t>();
}

} // namespace

const DataSpec *Config::findData(const std::string &name) const {
  for (const DataSpec &d : data)
    if (d.name == name)
      return &d;
  return nullptr;
}

double Config::learningRate(int64_t step, int64_t runSteps) const {
  const Schedule &s = schedule;
  if (s.kind == "constant")
    return lr;
  if (step < s.warmupSteps)
    return lr * double(step + 1) / double(s.warmupSteps);
  if (s.kind == "linear-warmup")
    return lr;
  // cosine
  int64_t total = s.totalSteps > 0 ? s.totalSteps : runSteps;
  double p = total > s.warmupSteps
                 ? double(step - s.warmupSteps) / double(total - s.warmupSteps)
                 : 1.0;
  p = std::min(1.0, std::max(0.0, p));
  return s.minLr + (lr - s.minLr) * (1 + std::cos(M_PI * p)) / 2;
}

Config parseConfig(std::string_view text) {
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::exception &e) {
    std::string what = e.what();
    for (char &c : what)
      if (c == '\n' || c == '\r')
        c = ' ';
    bad("not valid JSON: " + what);
  }
  if (!j.is_object())
    bad("not a JSON object");
  Config c;
  try {
    if (getString(j, "format", "") != "kiln-train-config")
      bad("'format' is not \"kiln-train-config\"");
    std::optional<int64_t> version = getInt(j, "version");
    if (!version || *version != 1)
      bad("version " + (version ? std::to_string(*version) : std::string("(none)")) +
          ", this executable reads version 1");
    c.model = getString(j, "model", "model.onnx");
    c.modelSha256 = getString(j, "model_sha256", "");
    std::optional<int64_t> batch = getInt(j, "batch_size");
    if (!batch || *batch <= 0)
      bad("'batch_size' must be a positive integer");
    c.batchSize = *batch;
    c.loss = getString(j, "loss", "");
    c.logits = getString(j, "logits", "logits");
    c.labels = getString(j, "labels", "labels");
    c.numClasses = getInt(j, "num_classes");
    if (c.numClasses && *c.numClasses <= 0)
      bad("'num_classes' must be positive");
    c.ignoreIndex = getInt(j, "ignore_index");
    const json *data = field(j, "data");
    if (!data || !data->is_array())
      bad("'data' must be an array");
    for (size_t i = 0; i < data->size(); ++i) {
      const json &d = (*data)[i];
      std::string where = "data[" + std::to_string(i) + "] ";
      if (!d.is_object())
        bad(where + "must be an object");
      DataSpec s;
      s.name = getString(d, "name", "", where);
      if (s.name.empty())
        bad(where + "needs a 'name'");
      std::string dt = getString(d, "dtype", "", where);
      if (!rt::parseDType(dt, s.dtype))
        bad(where + "has unknown dtype '" + dt + "'");
      const json *shape = field(d, "sample_shape");
      if (!shape || !shape->is_array())
        bad(where + "'sample_shape' must be an array");
      for (const json &n : *shape) {
        if (!n.is_number_integer() || n.get<int64_t>() < 0)
          bad(where + "'sample_shape' must hold non-negative integers");
        s.sampleShape.push_back(n.get<int64_t>());
      }
      if (c.findData(s.name))
        bad("data input '" + s.name + "' is listed twice");
      c.data.push_back(std::move(s));
    }
    if (const json *o = field(j, "optimizer")) {
      if (!o->is_object())
        bad("'optimizer' must be an object");
      c.optimizer = getString(*o, "name", c.optimizer, "optimizer ");
      c.lr = getNumber(*o, "lr", c.lr, "optimizer ");
    }
    if (const json *s = field(j, "schedule")) {
      if (!s->is_object())
        bad("'schedule' must be an object");
      c.schedule.kind = getString(*s, "kind", "constant", "schedule ");
      if (c.schedule.kind != "constant" && c.schedule.kind != "linear-warmup" &&
          c.schedule.kind != "cosine")
        bad("unknown schedule kind '" + c.schedule.kind + "'");
      c.schedule.warmupSteps = getInt(*s, "warmup_steps", "schedule ").value_or(0);
      c.schedule.totalSteps = getInt(*s, "total_steps", "schedule ").value_or(0);
      if (c.schedule.warmupSteps < 0 || c.schedule.totalSteps < 0)
        bad("schedule steps must be non-negative");
      c.schedule.minLr = getNumber(*s, "min_lr", 0.0, "schedule ");
    }
    c.lrInput = getString(j, "lr_input", c.lrInput);
    c.stepInput = getString(j, "step_input", c.stepInput);
  } catch (const json::exception &e) {
    bad(std::string("malformed: ") + e.what());
  }
  return c;
}

} // namespace kiln::train
