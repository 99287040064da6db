//===- Log.cpp - progress lines and the metrics file ------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "Log.h"

#include "SystemMetrics.h"
#include "Util.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <unistd.h>

namespace kiln::train {

std::string jsonNumber(double v) {
  if (!std::isfinite(v))
    return "null";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

Logger::Logger(int64_t first, int64_t total, int64_t batch, int64_t logEvery)
    : first_(first), total_(total), batch_(batch), logEvery_(logEvery) {
  tty_ = ::isatty(2) == 1;
  windowStart_ = lastProgress_ = Clock::now();
}

Logger::~Logger() {
  finish();
  if (metrics_)
    std::fclose(metrics_);
}

void Logger::openMetrics(const std::string &path, bool resume) {
  metricsPath_ = path;
  std::string kept;
  if (resume) {
    // Keep whole lines of steps before `first_`; a line cut off by a kill
    // (no newline) or of a later step is dropped.
    // A file that cannot be read is started afresh, as one that is missing.
    std::string all, readErr;
    if (readWholeFile(path, all, readErr)) {
      size_t pos = 0;
      while (pos < all.size()) {
        size_t nl = all.find('\n', pos);
        if (nl == std::string::npos)
          break;
        std::string line = all.substr(pos, nl - pos);
        pos = nl + 1;
        try {
          auto j = nlohmann::json::parse(line);
          if (j.is_object() && j.contains("step") &&
              j["step"].is_number_integer() && j["step"].get<int64_t>() < first_)
            kept += line + "\n";
        } catch (const nlohmann::json::exception &) {
        }
      }
    }
  }
  std::string err;
  if (resume && !writeFileAtomic(path, {kept}, err))
    fail("--metrics " + err);
  metrics_ = std::fopen(path.c_str(), resume ? "ab" : "wb");
  if (!metrics_)
    fail("--metrics " + path + ": " + lastError());
}

void Logger::clearProgress() {
  if (progressShown_) {
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
    progressShown_ = false;
  }
}

void Logger::message(const std::string &line) {
  if (silent_)
    return;
  clearProgress();
  std::fputs(line.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

void Logger::warning(const std::string &line) {
  clearProgress();
  std::fflush(stdout);
  std::fputs(line.c_str(), stderr);
  std::fputc('\n', stderr);
  std::fflush(stderr);
}

void Logger::finish() { clearProgress(); }

void Logger::step(const StepRecord &r) {
  auto now = Clock::now();
  ++windowSteps_;
  ++stepsSeen_;
  // An exponential average of the step time for the ETA (the first steps
  // are slow: page faults, oneDNN primitive creation).
  double sec = r.stepMs / 1e3;
  avgStepSec_ = stepsSeen_ == 1 ? sec : 0.9 * avgStepSec_ + 0.1 * sec;
  double sps = r.stepMs > 0 ? batch_ * 1e3 / r.stepMs : 0;

  if (metrics_) {
    std::string line = "{\"step\": " + std::to_string(r.step) +
                       ", \"epoch\": " + std::to_string(r.epoch) +
                       ", \"loss\": " + jsonNumber(r.loss) +
                       ", \"lr\": " + jsonNumber(r.lr);
    if (r.gradNorm)
      line += ", \"grad_norm\": " + jsonNumber(*r.gradNorm);
    if (r.lossScale)
      line += ", \"loss_scale\": " + jsonNumber(*r.lossScale) +
              ", \"skipped\": " + (r.skipped ? "true" : "false");
    char buf[96];
    std::snprintf(buf, sizeof buf, ", \"samples_per_s\": %.1f, \"step_ms\": %.3f",
                  sps, r.stepMs);
    line += buf;
    if (r.time > 0) {
      std::snprintf(buf, sizeof buf, ", \"time\": %.3f", r.time);
      line += buf;
    }
    if (r.rssBytes > 0) {
      std::snprintf(buf, sizeof buf,
                    ", \"rss_mib\": %.1f, \"peak_mib\": %.1f, \"cpu_util\": %.3f",
                    r.rssBytes / 1048576.0, r.peakBytes / 1048576.0, r.cpuUtil);
      line += buf;
    }
    if (r.commMB)
      line += ", \"comm_mb\": " + jsonNumber(*r.commMB);
    if (!r.alerts.empty()) {
      line += ", \"alerts\": [";
      for (size_t k = 0; k < r.alerts.size(); ++k)
        line += (k ? ", \"" : "\"") + r.alerts[k] + "\"";
      line += "]";
    }
    if (r.evalLoss)
      line += ", \"eval_loss\": " + jsonNumber(*r.evalLoss);
    if (r.evalAccuracy)
      line += ", \"eval_accuracy\": " + jsonNumber(*r.evalAccuracy);
    line += "}\n";
    if (std::fputs(line.c_str(), metrics_) < 0 || std::fflush(metrics_) != 0)
      fail("--metrics " + metricsPath_ + ": write error: " + lastError());
  }

  int64_t done = r.step + 1;
  double eta = avgStepSec_ * double(total_ - done);
  char gn[96] = "";
  if (r.gradNorm)
    std::snprintf(gn, sizeof gn, "  grad-norm %.4f", *r.gradNorm);
  if (r.lossScale) {
    size_t used = std::strlen(gn);
    std::snprintf(gn + used, sizeof gn - used, "  scale %g%s", *r.lossScale,
                  r.skipped ? " (skipped)" : "");
  }
  bool logNow = logEvery_ > 0 &&
                (done % logEvery_ == 0 || done == total_ || r.step == first_);
  if (logNow) {
    double window = std::chrono::duration<double>(now - windowStart_).count();
    double rate = window > 0 ? windowSteps_ * batch_ / window : sps;
    char sys[96] = "";
    if (r.rssBytes > 0)
      std::snprintf(sys, sizeof sys, "  mem %s  cpu %.0f%%",
                    formatBytes(r.rssBytes).c_str(), 100.0 * r.cpuUtil);
    char line[384];
    std::snprintf(line, sizeof line,
                  "step %lld/%lld  loss %.6f  lr %.3e%s  %.1f samples/s%s  ETA %s",
                  (long long)done, (long long)total_, r.loss, r.lr, gn, rate, sys,
                  formatDuration(eta).c_str());
    message(line);
    windowStart_ = now;
    windowSteps_ = 0;
  }
  if (tty_ && !silent_ &&
      std::chrono::duration<double>(now - lastProgress_).count() > 0.1) {
    lastProgress_ = now;
    std::fprintf(stderr, "\r\033[Kstep %lld/%lld  loss %.6f  %.1f samples/s  ETA %s",
                 (long long)done, (long long)total_, r.loss, sps,
                 formatDuration(eta).c_str());
    std::fflush(stderr);
    progressShown_ = true;
  }
}

} // namespace kiln::train
