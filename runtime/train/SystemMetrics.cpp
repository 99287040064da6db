//===- SystemMetrics.cpp - what the process uses of the machine -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "SystemMetrics.h"

#include <sched.h>
#include <unistd.h>
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace kiln::train {

namespace {

/// Up to `cap` bytes of a small /proc or /sys file, NUL-terminated.
bool readSmallFile(const char *path, char *buf, size_t cap) {
  FILE *f = std::fopen(path, "rb");
  if (!f)
    return false;
  size_t n = std::fread(buf, 1, cap - 1, f);
  std::fclose(f);
  buf[n] = 0;
  return n > 0;
}

/// CPU seconds of every thread so far, and the peak resident bytes.
double cpuSeconds(double *peakBytes = nullptr) {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0)
    return 0;
  if (peakBytes)
    *peakBytes = (double)u.ru_maxrss * 1024.0; // KiB on Linux
  return (double)u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 +
         (double)u.ru_stime.tv_sec + u.ru_stime.tv_usec * 1e-6;
}

/// A cgroup limit file's value in bytes; 0 for "max", absent or absurd.
double cgroupLimit(const char *path) {
  char buf[64];
  if (!readSmallFile(path, buf, sizeof buf))
    return 0;
  if (std::strncmp(buf, "max", 3) == 0)
    return 0;
  char *end = nullptr;
  double v = std::strtod(buf, &end);
  // cgroup v1 reports "no limit" as a huge page-rounded number.
  if (end == buf || !(v > 0) || v > 1e18)
    return 0;
  return v;
}

double memoryLimit() {
  char buf[4096];
  double total = 0;
  if (readSmallFile("/proc/meminfo", buf, sizeof buf)) {
    double kb = procStatusBytes(buf, "MemTotal");
    total = kb > 0 ? kb : 0;
  }
  double cg = cgroupLimit("/sys/fs/cgroup/memory.max");
  if (cg == 0)
    cg = cgroupLimit("/sys/fs/cgroup/memory/memory.limit_in_bytes");
  if (cg > 0 && (total == 0 || cg < total))
    return cg;
  return total;
}

} // namespace

double procStatusBytes(const char *text, const char *name) {
  size_t len = std::strlen(name);
  for (const char *p = text; p && *p;) {
    if (std::strncmp(p, name, len) == 0 && p[len] == ':') {
      char *end = nullptr;
      double v = std::strtod(p + len + 1, &end);
      if (end == p + len + 1 || !(v >= 0))
        return -1;
      while (*end == ' ' || *end == '\t')
        ++end;
      return std::strncmp(end, "kB", 2) == 0 ? v * 1024.0 : v;
    }
    p = std::strchr(p, '\n');
    if (p)
      ++p;
  }
  return -1;
}

std::string formatBytes(double bytes) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0 || bytes >= 100)
    std::snprintf(buf, sizeof buf, "%.0f %s", bytes, units[u]);
  else if (bytes >= 10)
    std::snprintf(buf, sizeof buf, "%.1f %s", bytes, units[u]);
  else
    std::snprintf(buf, sizeof buf, "%.2f %s", bytes, units[u]);
  return buf;
}

SystemMonitor::SystemMonitor() {
  lastWall_ = Clock::now();
  lastCpuSec_ = cpuSeconds();
  limit_ = memoryLimit();
  long page = sysconf(_SC_PAGESIZE);
  pageSize_ = page > 0 ? page : 4096;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    cores_ = std::max(1, CPU_COUNT(&set));
}

SystemSample SystemMonitor::sample() {
  SystemSample s;
  s.limitBytes = limit_;
  s.cores = cores_;
  // /proc/self/statm ("size resident shared ...", in pages) is one short
  // line: cheaper than /proc/self/status's VmRSS.
  char buf[128];
  if (readSmallFile("/proc/self/statm", buf, sizeof buf)) {
    unsigned long long size = 0, resident = 0;
    if (std::sscanf(buf, "%llu %llu", &size, &resident) == 2)
      s.rssBytes = (double)resident * (double)pageSize_;
  }
  auto now = Clock::now();
  double peak = 0;
  double cpu = cpuSeconds(&peak);
  s.peakBytes = std::max(s.rssBytes, peak);
  // CPU time advances in scheduler ticks: over a sub-millisecond step the
  // ratio is noise (0%, or 250%). It is measured over at least 100 ms; the
  // steps in between report the last such figure.
  double wall = std::chrono::duration<double>(now - lastWall_).count();
  double util = wall > 0 ? std::max(0.0, (cpu - lastCpuSec_) / wall / cores_) : 0;
  if (wall >= 0.1) {
    lastUtil_ = util;
    haveUtil_ = true;
    lastWall_ = now;
    lastCpuSec_ = cpu;
  }
  // Until the first 100 ms have passed: the interval so far.
  s.cpuUtil = haveUtil_ ? lastUtil_ : util;
  return s;
}

} // namespace kiln::train
