//===- Trace.cpp - a per-rank trace of kernels and collectives --*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "kiln/runtime/Trace.h"

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

namespace kiln::rt {

TraceRecorder::TraceRecorder() : steadyEpoch_(Clock::now()) {
  wallEpochUs_ = std::chrono::duration<double, std::micro>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
}

double TraceRecorder::toUs(Clock::time_point t) const {
  return wallEpochUs_ +
         std::chrono::duration<double, std::micro>(t - steadyEpoch_).count();
}

TraceLabel TraceRecorder::label(std::string name, std::string category,
                                std::shared_ptr<const TraceArgs> args) {
  std::lock_guard<std::mutex> lock(m_);
  labels_.push_back({std::move(name), std::move(category), std::move(args)});
  return (TraceLabel)(labels_.size() - 1);
}

void TraceRecorder::record(TraceLabel label, TraceThread thread,
                           Clock::time_point start, Clock::time_point end) {
  if (!enabled_)
    return;
  Record r{label, thread,
           std::chrono::duration_cast<std::chrono::nanoseconds>(start - steadyEpoch_)
               .count(),
           std::chrono::duration_cast<std::chrono::nanoseconds>(end - steadyEpoch_)
               .count()};
  std::lock_guard<std::mutex> lock(m_);
  records_.push_back(r);
}

void TraceRecorder::record(std::string name, std::string category,
                           TraceThread thread, Clock::time_point start,
                           Clock::time_point end, TraceArgs args) {
  if (!enabled_)
    return;
  record(std::move(name), std::move(category), thread, start, end,
         args.empty() ? nullptr
                      : std::make_shared<const TraceArgs>(std::move(args)));
}

void TraceRecorder::record(std::string name, std::string category,
                           TraceThread thread, Clock::time_point start,
                           Clock::time_point end,
                           std::shared_ptr<const TraceArgs> args) {
  if (!enabled_)
    return;
  record(label(std::move(name), std::move(category), std::move(args)), thread,
         start, end);
}

void TraceRecorder::reserve(size_t n) {
  std::lock_guard<std::mutex> lock(m_);
  records_.reserve(n);
}

std::vector<TraceEvent> TraceRecorder::events() const {
  std::lock_guard<std::mutex> lock(m_);
  std::vector<TraceEvent> out;
  out.reserve(records_.size());
  for (const Record &r : records_) {
    const Label &l = labels_[r.label];
    TraceEvent e;
    e.name = l.name;
    e.category = l.category;
    e.thread = r.thread;
    e.startUs = wallEpochUs_ + (double)r.startNs * 1e-3;
    e.durationUs = std::max(0.0, (double)(r.endNs - r.startNs) * 1e-3);
    e.args = l.args;
    out.push_back(std::move(e));
  }
  return out;
}

void TraceRecorder::clear() {
  std::lock_guard<std::mutex> lock(m_);
  records_.clear();
}

namespace {

/// `s` as a JSON string (quoted, escaped).
void appendEscaped(std::string &out, const std::string &s) {
  out += nlohmann::json(s).dump();
}

const char *threadName(TraceThread t) {
  switch (t) {
  case TraceThread::Compute: return "compute";
  case TraceThread::Communication: return "communication";
  case TraceThread::Host: return "host (data, checkpoints)";
  }
  return "?";
}

} // namespace

std::string TraceRecorder::chromeEvents(int pid,
                                        const std::string &processName) const {
  std::string out;
  const std::string p = std::to_string(pid);
  out += "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + p +
         ",\"tid\":0,\"args\":{\"name\":";
  appendEscaped(out, processName);
  out += "}}";
  for (TraceThread t : {TraceThread::Compute, TraceThread::Communication,
                        TraceThread::Host}) {
    out += ",{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + p +
           ",\"tid\":" + std::to_string((int)t) + ",\"args\":{\"name\":";
    appendEscaped(out, threadName(t));
    out += "}}";
  }
  char num[64];
  for (const TraceEvent &e : events()) {
    out += ",{\"ph\":\"X\",\"name\":";
    appendEscaped(out, e.name);
    out += ",\"cat\":";
    appendEscaped(out, e.category);
    std::snprintf(num, sizeof num, ",\"ts\":%.3f,\"dur\":%.3f", e.startUs,
                  e.durationUs);
    out += num;
    out += ",\"pid\":" + p + ",\"tid\":" + std::to_string((int)e.thread);
    out += ",\"args\":{";
    if (e.args)
      for (size_t k = 0; k < e.args->size(); ++k) {
        if (k)
          out += ',';
        appendEscaped(out, (*e.args)[k].first);
        out += ':';
        appendEscaped(out, (*e.args)[k].second);
      }
    out += "}}";
  }
  return out;
}

namespace {

std::vector<std::pair<double, double>>
merged(std::vector<std::pair<double, double>> v) {
  std::sort(v.begin(), v.end());
  std::vector<std::pair<double, double>> out;
  for (auto [a, b] : v) {
    if (!(b > a))
      continue;
    if (!out.empty() && a <= out.back().second)
      out.back().second = std::max(out.back().second, b);
    else
      out.push_back({a, b});
  }
  return out;
}

} // namespace

double unionLength(std::vector<std::pair<double, double>> intervals) {
  double total = 0;
  for (auto [a, b] : merged(std::move(intervals)))
    total += b - a;
  return total;
}

std::vector<std::string> kernelTable(std::vector<KernelStat> stats,
                                     double totalMs, size_t top) {
  std::stable_sort(stats.begin(), stats.end(),
                   [](const KernelStat &a, const KernelStat &b) { return a.ms > b.ms; });
  std::vector<std::string> rows;
  for (size_t k = 0; k < stats.size() && k < top; ++k) {
    const KernelStat &s = stats[k];
    char buf[256];
    double sec = s.ms / 1e3;
    char rate[64] = "";
    if (s.flops > 0 && sec > 0)
      std::snprintf(rate, sizeof rate, "  %8.1f GFLOP/s", s.flops / sec / 1e9);
    else
      std::snprintf(rate, sizeof rate, "  %8s        ", "");
    std::snprintf(buf, sizeof buf, "%-26s %9.3f ms %5.1f%% %7.0f calls%s %8.1f GB/s",
                  s.name.c_str(), s.ms, totalMs > 0 ? 100.0 * s.ms / totalMs : 0.0,
                  s.calls, rate, sec > 0 ? s.bytes / sec / 1e9 : 0.0);
    rows.push_back(buf);
  }
  return rows;
}

double uncoveredLength(std::vector<std::pair<double, double>> intervals,
                       std::vector<std::pair<double, double>> holes) {
  auto in = merged(std::move(intervals));
  auto out = merged(std::move(holes));
  double total = 0;
  size_t h = 0;
  for (auto [a, b] : in) {
    double covered = 0;
    while (h < out.size() && out[h].second <= a)
      ++h;
    for (size_t k = h; k < out.size() && out[k].first < b; ++k)
      covered += std::min(b, out[k].second) - std::max(a, out[k].first);
    total += (b - a) - covered;
  }
  return total;
}

} // namespace kiln::rt
