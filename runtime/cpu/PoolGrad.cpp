//===- PoolGrad.cpp - max and average pooling gradients ---------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// max_pool_grad (dy, x -> dx) and avg_pool_grad (dy -> dx), with the
// forward's geometry (ShapeRules.h) and tap tables (PoolWindow.h). In f32 they
// run on oneDNN's pooling_v2_backward (max pooling re-runs the forward in
// training mode for the argmax workspace: the kernel gets x, not the
// forward's indices). f64 keeps the direct loops. Every parallel loop writes
// disjoint outputs, so results do not depend on the thread count.
//===----------------------------------------------------------------------===//
#include "Dnnl.h"
#include "GradUtil.h"
#include "Kernels.h"
#include "Widen16.h"
#include "PoolWindow.h"
#include "kiln/runtime/ShapeRules.h"

#include <cmath>
#include <unordered_map>

namespace kiln::rt::cpu {
namespace {

using namespace grad;

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

/// The forward pooling's window (PoolWindow.h): geometry with the real
/// spatial dims last, after neutral entries, and the tap tables.
using PoolG = PoolWindow;

/// The window of the forward pooling of `x`, checked against its result
/// `y` (the gradient's dy).
PoolG poolGeom(const KernelSpec &spec, const TensorDesc &x, const TensorDesc &y,
               bool avg) {
  PoolG g = poolWindow(spec, x, avg);
  if (g.w.outShape() != y.shape)
    fail(spec, "dy " + y.str() + " does not match the pooling's result " +
                   shape::shapeStr(g.w.outShape()));
  return g;
}

/// max_pool_grad (dy, x -> dx) or avg_pool_grad (dy -> dx) in f32 on
/// oneDNN's pooling_v2_backward, on the plain layouts. Max pooling first
/// re-runs the forward in training mode to get the argmax workspace.
class DnnlPoolGrad {
public:
  /// Null when oneDNN does not compute `g` the way the direct loop does.
  static std::unique_ptr<DnnlPoolGrad>
  create(const PoolG &g, bool isMax,
         dnnl::memory::data_type dt = dnnl::memory::data_type::f32) {
    if (g.planes() == 0 || g.taps.emptyWindow ||
        (!isMax && g.includePad && g.anyCeilPad))
      return nullptr;
    try {
      return std::unique_ptr<DnnlPoolGrad>(new DnnlPoolGrad(g, isMax, dt));
    } catch (const dnnl::error &) {
      return nullptr; // the direct loop computes it
    }
  }

  /// The kernel's operands: dy (and, for max, x) -> dx.
  void run(const void *const *in, void *const *out) {
    dnnl::stream &st = dnnlStream();
    if (isMax_) {
      src_.set_data_handle(const_cast<void *>(in[1]));
      fwd_.execute(st, fwdArgs_);
    }
    diffDst_.set_data_handle(const_cast<void *>(in[0]));
    diffSrc_.set_data_handle(out[0]);
    bwd_.execute(st, bwdArgs_);
    st.wait();
  }

private:
  DnnlPoolGrad(const PoolG &g, bool isMax, dnnl::memory::data_type dt)
      : isMax_(isMax) {
    using dnnl::memory;
    DnnlWindow w(g.w);
    const memory::dims &s = w.strides, &k = w.kernel, &d = w.holes,
                       &pl = w.padL, &pr = w.padR;
    dnnl::algorithm alg = isMax ? dnnl::algorithm::pooling_max
                          : g.includePad
                              ? dnnl::algorithm::pooling_avg_include_padding
                              : dnnl::algorithm::pooling_avg_exclude_padding;
    dnnl::engine &eng = dnnlEngine();
    memory::desc smd = plainF32(w.src, dt), dmd = plainF32(w.dst, dt);
    dnnl::pooling_v2_forward::primitive_desc fpd(
        dnnl::pooling_v2_forward::desc(dnnl::prop_kind::forward_training, alg,
                                       smd, dmd, s, k, d, pl, pr),
        userScratchpadAttr(), eng);
    dnnl::pooling_v2_backward::primitive_desc bpd(
        dnnl::pooling_v2_backward::desc(alg, smd, dmd, s, k, d, pl, pr),
        userScratchpadAttr(), eng, fpd);
    bwd_ = dnnl::pooling_v2_backward(bpd);
    diffDst_ = memory(dmd, eng, nullptr);
    diffSrc_ = memory(smd, eng, nullptr);
    size_t padBytes = bpd.scratchpad_desc().get_size();
    if (isMax) {
      fwd_ = dnnl::pooling_v2_forward(fpd);
      src_ = memory(smd, eng, nullptr);
      dstBuf_.resize(dmd.get_size());
      wsBuf_.resize(fpd.workspace_desc().get_size());
      padBytes = std::max(padBytes, fpd.scratchpad_desc().get_size());
    }
    // The two primitives run one after the other, so they share a scratchpad.
    scratch_.resize(padBytes);
    bwdArgs_ = {{DNNL_ARG_DIFF_DST, diffDst_},
                {DNNL_ARG_DIFF_SRC, diffSrc_},
                {DNNL_ARG_SCRATCHPAD,
                 memory(bpd.scratchpad_desc(), eng, scratch_.data())}};
    if (isMax) {
      memory ws(fpd.workspace_desc(), eng, wsBuf_.data());
      fwdArgs_ = {{DNNL_ARG_SRC, src_},
                  {DNNL_ARG_DST, memory(dmd, eng, dstBuf_.data())},
                  {DNNL_ARG_WORKSPACE, ws},
                  {DNNL_ARG_SCRATCHPAD,
                   memory(fpd.scratchpad_desc(), eng, scratch_.data())}};
      bwdArgs_[DNNL_ARG_WORKSPACE] = ws;
    }
  }

  bool isMax_;
  dnnl::pooling_v2_forward fwd_;
  dnnl::pooling_v2_backward bwd_;
  dnnl::memory src_, diffDst_, diffSrc_;
  Scratch dstBuf_, wsBuf_, scratch_;
  std::unordered_map<int, dnnl::memory> fwdArgs_, bwdArgs_;
};

std::unique_ptr<Kernel> poolGradKernel(const KernelSpec &spec, const PoolG &g,
                                       bool isMax, std::unique_ptr<Kernel> direct) {
  std::unique_ptr<DnnlPoolGrad> dnnl;
  if (spec.inputs[0]->dtype == DType::F32)
    dnnl = DnnlPoolGrad::create(g, isMax);
  return dnnlOrDirect(std::move(dnnl), std::move(direct));
}

std::unique_ptr<Kernel> makeMaxPoolGrad(const KernelSpec &spec);
std::unique_ptr<Kernel> makeAvgPoolGrad(const KernelSpec &spec);

/// The 16-bit cases: bf16 on oneDNN's bf16 pooling backward where the CPU
/// has it and oneDNN computes the geometry as the direct loop does, else
/// f32 staging (Widen16.h).
std::unique_ptr<Kernel> poolGrad16(const KernelSpec &spec, bool isMax) {
  expectArity(spec, isMax ? 2 : 1, 1);
  bool bf16 = dnnlHasBf16();
  for (const TensorDesc *d : {spec.inputs[0], spec.inputs.back(), spec.outputs[0]})
    bf16 &= d && d->dtype == DType::BF16;
  if (bf16) {
    const TensorDesc &x = isMax ? *spec.inputs[1] : *spec.outputs[0];
    PoolG pg = poolGeom(spec, x, *spec.inputs[0], !isMax);
    if (std::shared_ptr<DnnlPoolGrad> dnnl =
            DnnlPoolGrad::create(pg, isMax, dnnl::memory::data_type::bf16))
      return make([dnnl](ExecContext &, const void *const *in, void *const *out) {
        dnnl->run(in, out);
      });
  }
  return widening16(isMax ? makeMaxPoolGrad : makeAvgPoolGrad)(spec);
}


std::unique_ptr<Kernel> makeMaxPoolGrad(const KernelSpec &spec) {
  if (has16BitFloat(spec))
    return poolGrad16(spec, true);
  expectArity(spec, 2, 1);
  need(spec, spec.inputs[0], "dy");
  need(spec, spec.inputs[1], "x");
  sameDesc(spec, spec.outputs[0], spec.inputs[1], "the result");
  PoolG pg = poolGeom(spec, *spec.inputs[1], *spec.inputs[0], false);
  auto direct = byFloat(spec, spec.inputs[0]->dtype, [&](auto tag) {
    using T = decltype(tag);
    return make([g = pg.w, planes = pg.planes()](ExecContext &, const void *const *in, void *const *out) {
      const T *dy = static_cast<const T *>(in[0]), *x = static_cast<const T *>(in[1]);
      T *dx = static_cast<T *>(out[0]);
      int64_t IS = g.in[0] * g.in[1] * g.in[2], OS = g.out[0] * g.out[1] * g.out[2];
      parallelRange(planes, planes * OS * g.k[0] * g.k[1] * g.k[2], [&](int64_t b, int64_t e) {
        for (int64_t pl = b; pl < e; ++pl) {
          const T *xp = x + pl * IS, *dyp = dy + pl * OS;
          T *dxp = dx + pl * IS;
          std::fill(dxp, dxp + IS, T(0));
          for (int64_t o0 = 0; o0 < g.out[0]; ++o0)
            for (int64_t o1 = 0; o1 < g.out[1]; ++o1)
              for (int64_t o2 = 0; o2 < g.out[2]; ++o2) {
                int64_t best = -1;
                T bv = T(0);
                for (int64_t k0 = 0; k0 < g.k[0]; ++k0) {
                  int64_t i0 = o0 * g.s[0] - g.pl[0] + k0 * g.d[0];
                  if (i0 < 0 || i0 >= g.in[0]) continue;
                  for (int64_t k1 = 0; k1 < g.k[1]; ++k1) {
                    int64_t i1 = o1 * g.s[1] - g.pl[1] + k1 * g.d[1];
                    if (i1 < 0 || i1 >= g.in[1]) continue;
                    for (int64_t k2 = 0; k2 < g.k[2]; ++k2) {
                      int64_t i2 = o2 * g.s[2] - g.pl[2] + k2 * g.d[2];
                      if (i2 < 0 || i2 >= g.in[2]) continue;
                      int64_t i = (i0 * g.in[1] + i1) * g.in[2] + i2;
                      if (best < 0 || xp[i] > bv || std::isnan(xp[i])) {
                        if (best >= 0 && std::isnan(bv)) continue;
                        best = i;
                        bv = xp[i];
                      }
                    }
                  }
                }
                if (best >= 0)
                  dxp[best] += dyp[(o0 * g.out[1] + o1) * g.out[2] + o2];
              }
        }
      });
    });
  });
  return poolGradKernel(spec, pg, true, std::move(direct));
}

std::unique_ptr<Kernel> makeAvgPoolGrad(const KernelSpec &spec) {
  if (has16BitFloat(spec))
    return poolGrad16(spec, false);
  expectArity(spec, 1, 1);
  need(spec, spec.inputs[0], "dy");
  need(spec, spec.outputs[0], "the result");
  PoolG pg = poolGeom(spec, *spec.outputs[0], *spec.inputs[0], true);
  // Per dim and output index: valid taps [lo, hi) and the divisor factor,
  // the forward avg_pool's own tables.
  const PoolTaps::Table &lo = pg.taps.lo, &hi = pg.taps.hi, &dv = pg.taps.div;
  auto direct = byFloat(spec, spec.inputs[0]->dtype, [&](auto tag) {
    using T = decltype(tag);
    return make([g = pg.w, planes = pg.planes(), lo, hi, dv](ExecContext &, const void *const *in, void *const *out) {
      const T *dy = static_cast<const T *>(in[0]);
      T *dx = static_cast<T *>(out[0]);
      int64_t IS = g.in[0] * g.in[1] * g.in[2], OS = g.out[0] * g.out[1] * g.out[2];
      parallelRange(planes, planes * OS * g.k[0] * g.k[1] * g.k[2], [&](int64_t b, int64_t e) {
        for (int64_t pl = b; pl < e; ++pl) {
          const T *dyp = dy + pl * OS;
          T *dxp = dx + pl * IS;
          std::fill(dxp, dxp + IS, T(0));
          for (int64_t o0 = 0; o0 < g.out[0]; ++o0)
            for (int64_t o1 = 0; o1 < g.out[1]; ++o1)
              for (int64_t o2 = 0; o2 < g.out[2]; ++o2) {
                int64_t div = dv[0][o0] * dv[1][o1] * dv[2][o2];
                if (div == 0)
                  continue;
                T v = dyp[(o0 * g.out[1] + o1) * g.out[2] + o2] / T(div);
                for (int64_t k0 = lo[0][o0]; k0 < hi[0][o0]; ++k0) {
                  int64_t i0 = o0 * g.s[0] - g.pl[0] + k0 * g.d[0];
                  for (int64_t k1 = lo[1][o1]; k1 < hi[1][o1]; ++k1) {
                    int64_t i1 = o1 * g.s[1] - g.pl[1] + k1 * g.d[1];
                    for (int64_t k2 = lo[2][o2]; k2 < hi[2][o2]; ++k2) {
                      int64_t i2 = o2 * g.s[2] - g.pl[2] + k2 * g.d[2];
                      dxp[(i0 * g.in[1] + i1) * g.in[2] + i2] += v;
                    }
                  }
                }
              }
        }
      });
    });
  });
  return poolGradKernel(spec, pg, false, std::move(direct));
}

} // namespace

void registerPoolGradKernels(KernelRegistry &r) {
  r.add("max_pool_grad", makeMaxPoolGrad);
  r.add("avg_pool_grad", makeAvgPoolGrad);
}

} // namespace kiln::rt::cpu
