//===- Alerts.cpp - kiln-train --alert: threshold warnings ------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "Alerts.h"

#include "SystemMetrics.h"
#include "Util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace kiln::train {

namespace {

constexpr size_t kWindow = 64;
constexpr size_t kMinHistory = 8;

double median(std::deque<double> v) {
  std::vector<double> s(v.begin(), v.end());
  std::nth_element(s.begin(), s.begin() + s.size() / 2, s.end());
  return s[s.size() / 2];
}

/// A positive finite number followed by `suffix` (or nothing, if the suffix
/// is optional); false otherwise.
bool number(const std::string &text, const char *suffix, double &out) {
  std::string body = text;
  size_t n = std::char_traits<char>::length(suffix);
  if (body.size() > n && body.compare(body.size() - n, n, suffix) == 0)
    body.resize(body.size() - n);
  if (body.empty())
    return false;
  char *end = nullptr;
  out = std::strtod(body.c_str(), &end);
  return end == body.c_str() + body.size() && std::isfinite(out) && out > 0;
}

std::string fmt(const char *f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

} // namespace

AlertConfig AlertConfig::defaults() {
  AlertConfig c;
  c.memoryFraction = 0.9;
  c.nan = true;
  return c;
}

AlertConfig AlertConfig::parse(const std::vector<std::string> &specs) {
  AlertConfig c = defaults();
  for (const std::string &spec : specs) {
    auto bad = [&](const std::string &why) {
      fail("--alert " + spec + ": " + why);
    };
    if (spec == "none") {
      c = AlertConfig();
      continue;
    }
    if (spec == "nan") {
      c.nan = true;
      continue;
    }
    size_t eq = spec.find('=');
    std::string kind = spec.substr(0, eq);
    std::string value = eq == std::string::npos ? "" : spec.substr(eq + 1);
    double v = 0;
    if (kind == "memory") {
      if (value == "off") {
        c.memoryFraction.reset();
        continue;
      }
      if (value.empty() || value.back() != '%' || !number(value, "%", v) ||
          v > 100)
        bad("needs a percentage of the memory limit in (0, 100], as memory=90%");
      c.memoryFraction = v / 100.0;
    } else if (kind == "step-time" || kind == "loss-spike") {
      std::optional<double> &slot =
          kind == "step-time" ? c.stepTimeFactor : c.lossSpikeFactor;
      if (value == "off") {
        slot.reset();
        continue;
      }
      if (value.empty() || value.back() != 'x' || !number(value, "x", v) ||
          v <= 1)
        bad("needs a factor above 1 of the running median, as " + kind + "=2x");
      slot = v;
    } else if (kind == "nan" && value == "off") {
      c.nan = false;
    } else {
      bad("unknown alert; give memory=P%, step-time=Fx, loss-spike=Fx, nan or "
          "none");
    }
  }
  return c;
}

std::vector<std::string> Alerts::check(const AlertInput &in,
                                       std::vector<std::string> *fired) {
  std::vector<std::string> lines;
  const std::string who =
      "warning: rank " + std::to_string(rank_) + " ";
  const std::string at = " (step " + std::to_string(in.step) + ")";
  auto fire = [&](const char *name, bool &warned, std::string line) {
    if (warned)
      return;
    if (fired)
      fired->push_back(name);
    lines.push_back(who + line + at);
    warned = true;
  };

  if (config_.memoryFraction && in.limitBytes > 0 &&
      in.rssBytes > *config_.memoryFraction * in.limitBytes)
    fire("memory", memoryWarned_,
         "memory at " + fmt("%.0f", 100.0 * in.rssBytes / in.limitBytes) +
             "% of " + formatBytes(in.limitBytes) + " (alert at " +
             fmt("%g", 100.0 * *config_.memoryFraction) + "%)");

  bool lossFinite = std::isfinite(in.loss);
  bool normBad = in.gradNorm && !std::isfinite(*in.gradNorm);
  if (config_.nan && !in.skipped && !in.stopping && (!lossFinite || normBad))
    fire("nan", nanWarned_,
         !lossFinite ? std::string("loss is ") +
                           (std::isnan(in.loss) ? "NaN" : "infinite")
                     : "gradient norm is not finite");

  if (config_.stepTimeFactor) {
    if (times_.size() >= kMinHistory) {
      double m = median(times_);
      if (m > 0 && in.stepMs > *config_.stepTimeFactor * m)
        fire("step-time", stepWarned_,
             "step took " + fmt("%.1f", in.stepMs) + " ms, " +
                 fmt("%.1f", in.stepMs / m) + "x the median " + fmt("%.1f", m) +
                 " ms of the previous steps");
    }
    times_.push_back(in.stepMs);
    if (times_.size() > kWindow)
      times_.pop_front();
  }

  if (config_.lossSpikeFactor && lossFinite) {
    if (losses_.size() >= kMinHistory) {
      double m = median(losses_);
      double f = *config_.lossSpikeFactor;
      if (std::fabs(in.loss - m) > (f - 1) * std::fabs(m) && in.loss > m)
        fire("loss-spike", spikeWarned_,
             "loss spiked to " + fmt("%.6g", in.loss) + ", " +
                 (m != 0 ? fmt("%.1f", in.loss / m) + "x" : std::string("above")) +
                 " the median " + fmt("%.6g", m) + " of the previous steps");
    }
    losses_.push_back(in.loss);
    if (losses_.size() > kWindow)
      losses_.pop_front();
  }
  return lines;
}

} // namespace kiln::train
