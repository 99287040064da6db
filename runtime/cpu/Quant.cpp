//===- Quant.cpp - quantization-aware training's kernels --------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// kiln.fake_quant and its straight-through gradient, kiln.minmax_observe
// and kiln.absmax_scale (--qat int8, docs/Compression.md). The arithmetic
// is kiln/runtime/Quantize.h's, which --export-onnx shares. Float32.
//===----------------------------------------------------------------------===//
#include "GradUtil.h"
#include "Kernels.h"

#include "kiln/runtime/Quantize.h"

#include <cmath>
#include <limits>

namespace kiln::rt::cpu {

namespace {

using namespace grad;

void needF32(const KernelSpec &spec, const TensorDesc *d, const char *what) {
  if (!d)
    fail(spec, std::string(what) + " is required");
  if (d->dtype != DType::F32)
    unsupportedType(spec, d->dtype);
}

/// The input's split around the quantization axis: `outer` blocks of
/// `channels` runs of `inner` elements (channels = 1 per tensor).
struct ChannelSplit {
  int64_t outer = 1, channels = 1, inner = 1;
};

ChannelSplit channelSplit(const KernelSpec &spec, const TensorDesc &in,
                          const TensorDesc &scale, const TensorDesc &zp) {
  if (scale != zp)
    fail(spec, "scale " + scale.str() + " and zero_point " + zp.str() + " differ");
  ChannelSplit s;
  if (!spec.attrs.has("axis")) {
    if (scale.numel() != 1)
      fail(spec, "without axis, scale must be a scalar, got " + scale.str());
    s.inner = in.numel();
    return s;
  }
  int64_t rank = (int64_t)in.shape.size();
  int64_t axis = axisAttr(spec, "axis", rank);
  if (rank == 0 || scale.numel() != in.shape[axis])
    fail(spec, "scale " + scale.str() + " must have the input's size along axis " +
                   std::to_string(axis));
  s.outer = prod(in.shape, 0, axis);
  s.channels = in.shape[axis];
  s.inner = prod(in.shape, axis + 1, in.shape.size());
  return s;
}

void quantRange(const KernelSpec &spec, int64_t &qmin, int64_t &qmax) {
  qmin = spec.attrs.getInt("quant_min");
  qmax = spec.attrs.getInt("quant_max");
  if (qmin >= qmax)
    fail(spec, "needs quant_min < quant_max");
}

std::unique_ptr<Kernel> makeFakeQuant(const KernelSpec &spec) {
  expectArity(spec, 3, 1);
  needF32(spec, spec.inputs[0], "input");
  needF32(spec, spec.inputs[1], "scale");
  needF32(spec, spec.inputs[2], "zero_point");
  sameDesc(spec, spec.outputs[0], spec.inputs[0], "result");
  ChannelSplit cs = channelSplit(spec, *spec.inputs[0], *spec.inputs[1], *spec.inputs[2]);
  int64_t qmin, qmax;
  quantRange(spec, qmin, qmax);
  return make([=](ExecContext &, const void *const *in, void *const *out) {
    const float *x = static_cast<const float *>(in[0]);
    const float *scale = static_cast<const float *>(in[1]);
    const float *zp = static_cast<const float *>(in[2]);
    float *y = static_cast<float *>(out[0]);
    parallelRange(cs.outer * cs.channels, cs.outer * cs.channels * cs.inner * 4,
                  [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        int64_t c = r % cs.channels;
        float s = scale[c], z = zp[c];
        const float *xr = x + r * cs.inner;
        float *yr = y + r * cs.inner;
        for (int64_t i = 0; i < cs.inner; ++i)
          yr[i] = quant::fakeQuant(xr[i], s, z, qmin, qmax);
      }
    });
  });
}

std::unique_ptr<Kernel> makeFakeQuantGrad(const KernelSpec &spec) {
  expectArity(spec, 4, 1);
  needF32(spec, spec.inputs[0], "dy");
  sameDesc(spec, spec.inputs[1], spec.inputs[0], "input");
  needF32(spec, spec.inputs[2], "scale");
  needF32(spec, spec.inputs[3], "zero_point");
  sameDesc(spec, spec.outputs[0], spec.inputs[0], "result");
  ChannelSplit cs = channelSplit(spec, *spec.inputs[1], *spec.inputs[2], *spec.inputs[3]);
  int64_t qmin, qmax;
  quantRange(spec, qmin, qmax);
  return make([=](ExecContext &, const void *const *in, void *const *out) {
    const float *dy = static_cast<const float *>(in[0]);
    const float *x = static_cast<const float *>(in[1]);
    const float *scale = static_cast<const float *>(in[2]);
    const float *zp = static_cast<const float *>(in[3]);
    float *dx = static_cast<float *>(out[0]);
    parallelRange(cs.outer * cs.channels, cs.outer * cs.channels * cs.inner * 4,
                  [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        int64_t c = r % cs.channels;
        float inv = 1.0f / scale[c], z = zp[c];
        int64_t o = r * cs.inner;
        for (int64_t i = 0; i < cs.inner; ++i) {
          int64_t q = quant::unclamped(x[o + i], inv, z);
          dx[o + i] = q >= qmin && q <= qmax ? dy[o + i] : 0.0f;
        }
      }
    });
  });
}

std::unique_ptr<Kernel> makeMinMaxObserve(const KernelSpec &spec) {
  expectArity(spec, 3, 3);
  for (int i = 0; i < 2; ++i) {
    needF32(spec, spec.inputs[i], i ? "batch_max" : "batch_min");
    if (spec.inputs[i]->numel() != 1)
      fail(spec, "batch_min and batch_max must be scalars");
  }
  needF32(spec, spec.inputs[2], "observer");
  if (spec.inputs[2]->numel() != 3)
    fail(spec, "observer must be [3] ([min, max, n]), got " + spec.inputs[2]->str());
  sameDesc(spec, spec.outputs[2], spec.inputs[2], "new_observer");
  for (int i = 0; i < 2; ++i)
    if (!spec.outputs[i] || spec.outputs[i]->dtype != DType::F32 ||
        spec.outputs[i]->numel() != 1)
      fail(spec, "scale and zero_point must be f32 scalars");
  int64_t qmin, qmax;
  quantRange(spec, qmin, qmax);
  float averaging = (float)spec.attrs.getFloat("averaging");
  int64_t freeze = spec.attrs.getInt("freeze");
  if (!(averaging > 0.0f && averaging <= 1.0f) || freeze < 0)
    fail(spec, "needs 0 < averaging <= 1 and freeze >= 0");
  return make([=](ExecContext &, const void *const *in, void *const *out) {
    float lo = *static_cast<const float *>(in[0]), hi = *static_cast<const float *>(in[1]);
    const float *o = static_cast<const float *>(in[2]);
    float obs[3] = {o[0], o[1], o[2]};
    quant::observe(obs, lo, hi, averaging, freeze);
    quant::Affine a = quant::affineParams(obs[0], obs[1], qmin, qmax);
    *static_cast<float *>(out[0]) = a.scale;
    *static_cast<float *>(out[1]) = a.zeroPoint;
    float *no = static_cast<float *>(out[2]);
    no[0] = obs[0];
    no[1] = obs[1];
    no[2] = obs[2];
  });
}

std::unique_ptr<Kernel> makeAbsMaxScale(const KernelSpec &spec) {
  expectArity(spec, 1, 1);
  needF32(spec, spec.inputs[0], "input");
  const TensorDesc &in = *spec.inputs[0];
  int64_t rank = (int64_t)in.shape.size();
  int64_t axis = axisAttr(spec, "axis", rank);
  int64_t qmax = spec.attrs.getInt("quant_max");
  if (rank == 0 || qmax < 1)
    fail(spec, "needs a tensor of rank >= 1 and quant_max >= 1");
  if (!spec.outputs[0] || spec.outputs[0]->dtype != DType::F32 ||
      spec.outputs[0]->numel() != in.shape[axis])
    fail(spec, "result must be f32 [" + std::to_string(in.shape[axis]) + "]");
  int64_t outer = prod(in.shape, 0, axis), channels = in.shape[axis];
  int64_t inner = prod(in.shape, axis + 1, in.shape.size());
  return make([=](ExecContext &, const void *const *inp, void *const *out) {
    const float *x = static_cast<const float *>(inp[0]);
    float *s = static_cast<float *>(out[0]);
    for (int64_t c = 0; c < channels; ++c)
      s[c] = 0.0f;
    for (int64_t b = 0; b < outer; ++b)
      for (int64_t c = 0; c < channels; ++c) {
        const float *xr = x + (b * channels + c) * inner;
        float m = s[c];
        for (int64_t i = 0; i < inner; ++i)
          m = std::fmax(m, std::fabs(xr[i]));
        s[c] = m;
      }
    for (int64_t c = 0; c < channels; ++c)
      s[c] = quant::symmetricScale(s[c], qmax);
  });
}

} // namespace

void registerQuantKernels(KernelRegistry &r) {
  r.add("fake_quant", makeFakeQuant);
  r.add("fake_quant_grad", makeFakeQuantGrad);
  r.add("minmax_observe", makeMinMaxObserve);
  r.add("absmax_scale", makeAbsMaxScale);
}

} // namespace kiln::rt::cpu
