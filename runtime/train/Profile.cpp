//===- Profile.cpp - kiln-train --profile -----------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "Profile.h"

#include "kiln/runtime/FileIO.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <stdexcept>

namespace kiln::train {

bool parseProfileSteps(const std::string &text, int64_t &a, int64_t &b,
                       std::string &err) {
  size_t colon = text.find(':');
  auto number = [](const std::string &s, int64_t &v) {
    if (s.empty() || s.size() > 18 ||
        s.find_first_not_of("0123456789") != std::string::npos)
      return false;
    v = std::stoll(s);
    return true;
  };
  if (colon == std::string::npos || !number(text.substr(0, colon), a) ||
      !number(text.substr(colon + 1), b) || a >= b) {
    err = "--profile-steps needs A:B with 0 <= A < B (steps A to B-1), got '" +
          text + "'";
    return false;
  }
  return true;
}

namespace {

/// Times the calling thread was preempted (involuntary context switches).
long preemptions() {
  rusage u{};
  return getrusage(RUSAGE_THREAD, &u) == 0 ? u.ru_nivcsw : 0;
}

/// Nanoseconds the calling thread has spent runnable but waiting for a CPU
/// (the second field of /proc/thread-self/schedstat; -1 where the kernel has
/// no schedstat). On a shared machine this is the part of a step no profiler
/// can attribute: the process did not run.
long long runQueueNs() {
  std::FILE *f = std::fopen("/proc/thread-self/schedstat", "r");
  if (!f)
    return -1;
  unsigned long long ran = 0, waited = 0;
  int n = std::fscanf(f, "%llu %llu", &ran, &waited);
  std::fclose(f);
  return n == 2 ? static_cast<long long>(waited) : -1;
}

} // namespace

void Profiler::beginStep(int64_t s) {
  recording_ = s >= first_ && s < last_;
  trace_.setEnabled(recording_);
  if (recording_) {
    preemptedBefore_ = preemptions();
    waitedBefore_ = runQueueNs();
  }
  stepStart_ = rt::TraceRecorder::Clock::now();
}

void Profiler::endStep(int64_t s) {
  if (recording_) {
    auto end = rt::TraceRecorder::Clock::now();
    rt::TraceArgs args = {
        {"step", std::to_string(s)},
        {"preempted", std::to_string(preemptions() - preemptedBefore_)}};
    long long waited = runQueueNs();
    if (waited >= 0 && waitedBefore_ >= 0)
      args.push_back({"runqueue_us", std::to_string((waited - waitedBefore_) / 1000)});
    trace_.record("step " + std::to_string(s), "step", rt::TraceThread::Compute,
                  stepStart_, end, std::move(args));
  }
  recording_ = false;
  trace_.setEnabled(false);
}

void Profiler::host(const std::string &name, const std::string &category,
                    rt::TraceRecorder::Clock::time_point start,
                    rt::TraceRecorder::Clock::time_point end) {
  trace_.record(name, category, rt::TraceThread::Host, start, end);
}

namespace {

std::string ms(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

std::string pct(double part, double whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", whole > 0 ? 100.0 * part / whole : 0.0);
  return buf;
}

} // namespace

ProfileSummary Profiler::summarize() const {
  ProfileSummary out;
  std::vector<std::pair<double, double>> comm, waits;
  std::map<std::string, rt::KernelStat> byKernel;
  double kernelUs = 0, waitUs = 0, stepUs = 0, dataUs = 0;
  auto number = [](const rt::TraceEvent &e, const char *key) {
    if (e.args)
      for (const auto &[k, v] : *e.args)
        if (k == key)
          return std::strtod(v.c_str(), nullptr);
    return 0.0;
  };
  for (const rt::TraceEvent &e : trace_.events()) {
    if (e.category == "step") {
      ++out.steps;
      stepUs += e.durationUs;
    } else if (e.category == "data") {
      dataUs += e.durationUs;
    } else if (e.category == "kernel") {
      rt::KernelStat &k = byKernel[e.name];
      k.name = e.name;
      k.ms += e.durationUs / 1e3;
      k.calls += 1;
      k.flops += number(e, "flops");
      k.bytes += number(e, "bytes");
      kernelUs += e.durationUs;
    } else if (e.category == "wait") {
      // Inside a collective kernel: compute stood still for the communicator.
      waitUs += e.durationUs;
      waits.push_back({e.startUs, e.startUs + e.durationUs});
    } else if (e.category == "collective") {
      comm.push_back({e.startUs, e.startUs + e.durationUs});
    }
  }
  kernelUs = std::max(0.0, kernelUs - waitUs);
  if (out.steps == 0)
    return out;
  const double n = (double)out.steps * 1e3; // us -> ms per step
  out.stepMs = stepUs / n;
  out.computeMs = kernelUs / n;
  out.waitMs = waitUs / n;
  out.dataMs = dataUs / n;
  out.commMs = rt::unionLength(comm) / n;
  out.hiddenMs = rt::uncoveredLength(comm, waits) / n;
  const double steps = (double)out.steps;
  for (auto &[name, k] : byKernel) {
    rt::KernelStat per = k;
    per.ms /= steps;
    per.calls /= steps;
    per.flops /= steps;
    per.bytes /= steps;
    out.kernels.push_back(per);
  }
  std::stable_sort(out.kernels.begin(), out.kernels.end(),
                   [](const auto &a, const auto &b) { return a.ms > b.ms; });
  return out;
}

std::vector<std::string> Profiler::finish(comm::Communicator &world) {
  ProfileSummary sum = summarize();
  const int ranks = world.size(), rank = world.rank();
  std::string mine = trace_.chromeEvents(rank, "rank " + std::to_string(rank));

  // Every rank's events and overlap to rank 0: sizes, then padded bytes.
  std::vector<std::string> all{mine};
  std::vector<double> overlap{sum.commMs, sum.hiddenMs};
  if (ranks > 1) {
    uint64_t len = mine.size();
    std::vector<uint64_t> lens(ranks);
    world.allGather(&len, lens.data(), 1, rt::DType::U64).wait();
    uint64_t most = *std::max_element(lens.begin(), lens.end());
    mine.resize(most, ' ');
    std::string gathered(most * ranks, ' ');
    world.allGather(mine.data(), gathered.data(), most, rt::DType::U8).wait();
    all.clear();
    for (int r = 0; r < ranks; ++r)
      all.push_back(gathered.substr(r * most, lens[r]));
    std::vector<double> pairs(2 * ranks);
    world.allGather(overlap.data(), pairs.data(), 2, rt::DType::F64).wait();
    overlap = pairs;
  }
  std::vector<std::string> lines;
  if (rank != 0)
    return lines;
  std::string json = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  for (int r = 0; r < (int)all.size(); ++r) {
    if (r)
      json += ',';
    json += all[r];
  }
  json += "]}\n";
  std::string err;
  if (!rt::writeFileAtomic(path_, {json}, err))
    throw std::runtime_error("--profile " + err);

  if (sum.steps == 0) {
    lines.push_back("profile: no step of the run is in --profile-steps " +
                    std::to_string(first_) + ":" + std::to_string(last_) +
                    "; wrote an empty trace to " + path_);
    return lines;
  }
  double other =
      std::max(0.0, sum.stepMs - sum.computeMs - sum.waitMs - sum.dataMs);
  lines.push_back("profile: " + std::to_string(sum.steps) + " step" +
                  (sum.steps == 1 ? "" : "s") + " on rank 0, " + ms(sum.stepMs) +
                  " ms each: compute " + ms(sum.computeMs) + " ms (" +
                  pct(sum.computeMs, sum.stepMs) + "), waiting for communication " +
                  ms(sum.waitMs) + " ms (" + pct(sum.waitMs, sum.stepMs) +
                  "), waiting for data " + ms(sum.dataMs) + " ms (" +
                  pct(sum.dataMs, sum.stepMs) + "), idle " + ms(other) + " ms (" +
                  pct(other, sum.stepMs) + ")");
  for (int r = 0; r < (int)overlap.size() / 2; ++r) {
    double c = overlap[2 * r], h = overlap[2 * r + 1];
    if (c > 0)
      lines.push_back("profile: rank " + std::to_string(r) + ": communication " +
                      ms(c) + " ms per step, " + pct(h, c) +
                      " of it overlapped with compute");
  }
  lines.push_back("profile: the kernels by time per step (of the step's " +
                  ms(sum.stepMs) + " ms):");
  for (const std::string &row : rt::kernelTable(sum.kernels, sum.stepMs, 10))
    lines.push_back("profile:   " + row);
  lines.push_back("profile: wrote " + path_ + " (Chrome trace; " +
                  std::to_string(ranks) + " rank" + (ranks == 1 ? "" : "s") + ")");
  return lines;
}

} // namespace kiln::train
