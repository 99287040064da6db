//===- PoolWindow.h - a pooling kernel's window and tap tables --*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// What max_pool, avg_pool and their gradients read from a kernel spec: the
// window geometry (kiln/runtime/ShapeRules.h), avg_pool's count_include_pad
// and ceil_pad, and, for each spatial dim and output index of a pooling window
// (kiln::shape::WindowGeometry): the first and one-past-last kernel tap that
// lands inside the input, and avg_pool's divisor factor (the real taps, or
// with count_include_pad the taps inside the padded extent minus the
// ceil_pad end padding). The forward pooling loop and the avg_pool gradient
// read the same tables, so they count the same window; the run loops then
// need no bounds tests. Internal to runtime/cpu.
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_CPU_POOLWINDOW_H
#define KILN_RUNTIME_CPU_POOLWINDOW_H

#include "ShapeCheck.h"
#include "kiln/runtime/ShapeRules.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::rt::cpu {

/// Rounded quotients for d > 0.
inline int64_t floorDiv(int64_t a, int64_t d) { return a / d - (a % d < 0); }
inline int64_t ceilDiv(int64_t a, int64_t d) { return a / d + (a % d > 0); }

struct PoolTaps {
  using Table = std::array<std::vector<int64_t>, shape::kMaxSpatial>;
  /// Per array index of the geometry (neutral dims included) and output
  /// index: taps [lo, hi) and the divisor factor.
  Table lo, hi, div;
  /// Some window holds no real element (it lies in the padding).
  bool emptyWindow = false;

  PoolTaps() = default;
  /// `ceilPad` has one entry per spatial dim, or none.
  PoolTaps(const shape::WindowGeometry &g, bool includePad,
           const std::vector<int64_t> &ceilPad) {
    for (int i = 0; i < shape::kMaxSpatial; ++i) {
      int64_t cp = i >= g.first() && !ceilPad.empty() ? ceilPad[i - g.first()] : 0;
      int64_t limit = g.in[i] + g.ph[i] - cp; // end of the counted extent
      // Tap t lies at start + t * d; the taps inside the input and inside
      // the counted extent are ranges, computed without a loop over the
      // window, whose size comes from an attribute (a window of 2^40 taps
      // once took hours here; issue 21, fuzzing). The geometry keeps
      // in + pads, and so every difference below, inside int64_t.
      const int64_t k = g.k[i], d = g.d[i];
      for (int64_t o = 0; o < g.out[i]; ++o) {
        int64_t start = o * g.s[i] - g.pl[i];
        // First tap with pos >= 0, one past the last with pos <= in - 1.
        int64_t l = std::max<int64_t>(0, ceilDiv(-start, d));
        int64_t h = std::min(k, floorDiv(g.in[i] - 1 - start, d) + 1);
        // Taps with pos < limit (pos >= -pl always holds).
        int64_t counted = std::clamp<int64_t>(ceilDiv(limit - start, d), 0, k);
        if (h <= l) {
          l = h = 0;
          emptyWindow = true;
        }
        lo[i].push_back(l);
        hi[i].push_back(h);
        div[i].push_back(includePad ? counted : h - l);
      }
    }
  }
};

/// A pooling step's window: the geometry, avg_pool's divisor options and
/// the tap tables.
struct PoolWindow {
  shape::WindowGeometry w;
  bool includePad = false, anyCeilPad = false;
  PoolTaps taps;

  int64_t planes() const { return w.n * w.c; }
};

/// The window of pooling `x` [N, C, D...] with the attributes of `spec`
/// (`isAvg`: avg_pool's, with count_include_pad and ceil_pad).
inline PoolWindow poolWindow(const KernelSpec &spec, const TensorDesc &x,
                             bool isAvg) {
  std::vector<int64_t> kernel = spec.attrs.getInts("kernel"),
                       strides = spec.attrs.getInts("strides"),
                       dil = spec.attrs.getInts("dilations"),
                       pad = spec.attrs.getInts("padding"), ceilPad;
  shape::WindowAttrs a;
  a.kernel = kernel;
  a.strides = strides;
  a.dilations = dil;
  a.padding = pad;
  PoolWindow pw;
  checkRule(spec, shape::poolGeometry(x.shape, a, pw.w));
  size_t nsp = pw.w.nsp;
  if (isAvg) {
    pw.includePad = spec.attrs.getBool("count_include_pad", false);
    ceilPad = spec.attrs.getInts("ceil_pad", std::vector<int64_t>{});
    if (!ceilPad.empty() && ceilPad.size() != nsp)
      checkRule(spec, "expected " + std::to_string(nsp) + " ceil_pad values");
    for (size_t i = 0; i < ceilPad.size(); ++i) {
      if (ceilPad[i] < 0)
        checkRule(spec, "ceil_pad entries must be >= 0");
      if (ceilPad[i] > pad[i + nsp])
        checkRule(spec, "ceil_pad exceeds the end padding");
      pw.anyCeilPad |= ceilPad[i] != 0;
    }
  }
  pw.taps = PoolTaps(pw.w, pw.includePad, ceilPad);
  return pw;
}

} // namespace kiln::rt::cpu

#endif // KILN_RUNTIME_CPU_POOLWINDOW_H
