//===- Quantize.h - the arithmetic of quantization-aware training -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Defined once, used by the QAT kernels (runtime/cpu/Quant.cpp) and by
// --export-onnx's QDQ model (runtime/train/ExportOnnx.cpp), so the exported
// scales and zero points are the ones training used. Float32 throughout, as
// PyTorch's fake_quantize_* and observers compute (docs/Compression.md).
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_QUANTIZE_H
#define KILN_RUNTIME_QUANTIZE_H

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>

namespace kiln::rt::quant {

/// The ranges Kiln's QAT uses: activations asymmetric uint8, weights
/// symmetric int8 with the restricted range [-127, 127] (zero point 0).
constexpr int64_t kActMin = 0, kActMax = 255;
constexpr int64_t kWeightMin = -127, kWeightMax = 127;

/// The quantized value before clamping: zero_point + nearbyint(x * inv).
inline int64_t unclamped(float x, float invScale, float zeroPoint) {
  return static_cast<int64_t>(zeroPoint + std::nearbyint(x * invScale));
}

/// fake_quant of one element (PyTorch's fake_quantize_per_*_affine).
inline float fakeQuant(float x, float scale, float zeroPoint, int64_t qmin,
                       int64_t qmax) {
  float inv = 1.0f / scale;
  int64_t q = std::clamp(unclamped(x, inv, zeroPoint), qmin, qmax);
  return (static_cast<float>(q) - zeroPoint) * scale;
}

struct Affine {
  float scale;
  float zeroPoint; // an integer in [qmin, qmax]
};

/// PyTorch's _calculate_qparams for an affine (asymmetric) range.
inline Affine affineParams(float min, float max, int64_t qmin, int64_t qmax) {
  float lo = std::min(min, 0.0f), hi = std::max(max, 0.0f);
  float scale = (hi - lo) / static_cast<float>(qmax - qmin);
  scale = std::max(scale, FLT_EPSILON);
  // torch.round: half to even (the default rounding mode).
  float zp = static_cast<float>(qmin) - std::nearbyint(lo / scale);
  zp = std::clamp(zp, static_cast<float>(qmin), static_cast<float>(qmax));
  return {scale, zp};
}

/// A symmetric scale for the largest magnitude `amax`.
inline float symmetricScale(float amax, int64_t qmax) {
  return std::max(amax / static_cast<float>(qmax), FLT_EPSILON);
}

/// One observed batch with range [bmin, bmax] into the observer
/// [min, max, n]: the first sets the range, later ones move it by
/// `averaging`; frozen once n >= freeze.
inline void observe(float *obs, float bmin, float bmax, float averaging,
                    int64_t freeze) {
  if (static_cast<int64_t>(obs[2]) >= freeze)
    return;
  if (obs[2] == 0.0f) {
    obs[0] = bmin;
    obs[1] = bmax;
  } else {
    obs[0] = obs[0] + averaging * (bmin - obs[0]);
    obs[1] = obs[1] + averaging * (bmax - obs[1]);
  }
  obs[2] += 1.0f;
}

} // namespace kiln::rt::quant

#endif // KILN_RUNTIME_QUANTIZE_H
