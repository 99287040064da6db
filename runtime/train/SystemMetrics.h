//===- SystemMetrics.h - what the process uses of the machine ---*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// kiln-train samples these after every step (cheap: one short /proc read
// and getrusage, a few microseconds) and reports them in the log line, the
// metrics file and TensorBoard:
//   rss       resident memory now (/proc/self/statm)
//   peak      the most resident memory so far (getrusage's ru_maxrss)
//   limit     the memory the process may use: the smaller of the machine's
//             (MemTotal of /proc/meminfo) and its cgroup's limit
//             (memory.max, cgroup v2, or memory.limit_in_bytes, v1)
//   cpu       CPU time of every thread of the process over the wall time
//             of the last interval of at least 100 ms, as a fraction of the
//             cores the process may run on (sched_getaffinity): 1.0 = all of
//             them busy (before 100 ms have passed, the time so far)
// The CUDA target will add GPU utilisation and memory (NVML) here.
//===----------------------------------------------------------------------===//
#ifndef KILN_TRAIN_SYSTEMMETRICS_H
#define KILN_TRAIN_SYSTEMMETRICS_H

#include <chrono>
#include <cstdint>
#include <string>

namespace kiln::train {

struct SystemSample {
  double rssBytes = 0, peakBytes = 0;
  double limitBytes = 0; // 0 when unknown
  double cpuUtil = 0;    // fraction of the usable cores, over the interval
  int cores = 1;
};

class SystemMonitor {
public:
  SystemMonitor();
  /// Reads the counters; cpuUtil covers the last interval of at least
  /// 100 ms since construction.
  SystemSample sample();
  /// The memory limit found at construction (0: unknown).
  double limitBytes() const { return limit_; }

private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point lastWall_;
  double lastCpuSec_ = 0;
  double limit_ = 0;
  int cores_ = 1;
  long pageSize_ = 4096;
  double lastUtil_ = 0;
  bool haveUtil_ = false;
};

/// Parses the "NAME:   123 kB" lines of a /proc/meminfo-like text: the value
/// of NAME in bytes, or -1 when absent or malformed.
double procStatusBytes(const char *text, const char *name);

/// "1.5 GiB", "512 MiB", "12 KiB" (three significant digits).
std::string formatBytes(double bytes);

} // namespace kiln::train

#endif // KILN_TRAIN_SYSTEMMETRICS_H
