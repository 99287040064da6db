//===- ConvGrad.cpp - convolution gradients ---------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// conv_input_grad (dy, w -> dx) and conv_weight_grad (x, dy -> dw) of
// kiln.conv, with the forward's geometry (ShapeRules.h). In f32 they run on
// oneDNN's convolution_backward_data / _weights primitives (blocked layouts
// of its choice, with reorders built at factory time, as the forward conv
// does), and so does bf16 where the CPU has bf16 primitives (f16, and bf16
// elsewhere, go through f32 staging, Widen16.h). f64 keeps the direct loops, accumulating in double: they are the
// reference the f32 path is tested against and what the finite-difference
// check runs. Every parallel loop writes disjoint outputs, so results do not
// depend on the thread count.
//===----------------------------------------------------------------------===//
#include "Dnnl.h"
#include "GradUtil.h"
#include "Kernels.h"
#include "ShapeCheck.h"
#include "Widen16.h"
#include "kiln/runtime/ShapeRules.h"

#include <memory>
#include <unordered_map>
#include <vector>

namespace kiln::rt::cpu {
namespace {

using namespace grad;

//===----------------------------------------------------------------------===//
// Convolution (direct loops over up to 3 spatial dims)
//===----------------------------------------------------------------------===//

/// The forward convolution's geometry (ShapeRules.h): spatial arrays hold
/// the real dims last, after neutral entries.
using ConvGeom = shape::WindowGeometry;

/// The geometry of the forward conv of input `x` and weight `w`, checked
/// against its result `y` (the gradient's dy).
ConvGeom convGeom(const KernelSpec &spec, const TensorDesc &x, const TensorDesc &w,
                  const TensorDesc &y) {
  std::vector<int64_t> st = spec.attrs.getInts("strides"),
                       di = spec.attrs.getInts("dilations"),
                       pa = spec.attrs.getInts("padding");
  shape::WindowAttrs a;
  a.strides = st;
  a.dilations = di;
  a.padding = pa;
  a.groups = spec.attrs.getInt("groups", 1);
  ConvGeom g;
  checkRule(spec, shape::convGeometry(x.shape, w.shape, a, false, g));
  if (g.outShape() != y.shape)
    fail(spec, "dy " + y.str() + " does not match the convolution's result " +
                   shape::shapeStr(g.outShape()));
  return g;
}

/// Calls f(input offset, weight tap offset, output offset) for every
/// (output position, tap) pair of plane pairs whose input position is inside.
template <typename F> inline void forTaps(const ConvGeom &g, F &&f) {
  for (int64_t o0 = 0; o0 < g.out[0]; ++o0)
    for (int64_t k0 = 0; k0 < g.k[0]; ++k0) {
      int64_t i0 = o0 * g.s[0] - g.pl[0] + k0 * g.d[0];
      if (i0 < 0 || i0 >= g.in[0])
        continue;
      for (int64_t o1 = 0; o1 < g.out[1]; ++o1)
        for (int64_t k1 = 0; k1 < g.k[1]; ++k1) {
          int64_t i1 = o1 * g.s[1] - g.pl[1] + k1 * g.d[1];
          if (i1 < 0 || i1 >= g.in[1])
            continue;
          int64_t obase = (o0 * g.out[1] + o1) * g.out[2];
          int64_t ibase = (i0 * g.in[1] + i1) * g.in[2];
          int64_t kbase = (k0 * g.k[1] + k1) * g.k[2];
          for (int64_t k2 = 0; k2 < g.k[2]; ++k2)
            for (int64_t o2 = 0; o2 < g.out[2]; ++o2) {
              int64_t i2 = o2 * g.s[2] - g.pl[2] + k2 * g.d[2];
              if (i2 < 0 || i2 >= g.in[2])
                continue;
              f(ibase + i2, kbase + k2, obase + o2);
            }
        }
    }
}

/// conv_input_grad (dy, w -> dx) or conv_weight_grad (x, dy -> dw) in f32
/// on oneDNN's backward primitives.
class DnnlConvGrad {
public:
  DnnlConvGrad(const KernelSpec &spec, const ConvGeom &g, bool weights,
               dnnl::memory::data_type dt = dnnl::memory::data_type::f32)
      : dt_(dt) {
    try {
      build(g, weights);
    } catch (const dnnl::error &e) {
      throwDnnl(spec, weights ? "convolution backward (weights)"
                              : "convolution backward (data)", e);
    }
  }

  /// The kernel's operands. Data: a = dy, b = w, r = dx. Weights: a = x,
  /// b = dy, r = dw.
  void run(const void *const *in, void *const *out) {
    dnnl::stream &st = dnnlStream();
    a_.bind(in[0]);
    b_.bind(in[1]);
    r_.bind(out[0]);
    a_.toPrim(st);
    b_.toPrim(st);
    prim_.execute(st, args_);
    r_.toUser(st);
    st.wait();
  }

private:
  void build(const ConvGeom &g, bool weights) {
    using dnnl::memory;
    DnnlWindow w(g);
    const memory::dims &sd = w.src, &dd = w.dst, &wd = w.weights,
                       &strides = w.strides, &dil = w.holes, &pl = w.padL,
                       &pr = w.padR;
    auto any = memory::format_tag::any;
    memory::desc anyS(sd, dt_, any), anyW(wd, dt_, any), anyD(dd, dt_, any);
    dnnl::engine &eng = dnnlEngine();
    dnnl::primitive_attr attr = userScratchpadAttr();
    // The backward primitives take the forward's descriptor as a hint.
    dnnl::convolution_forward::primitive_desc hint(
        dnnl::convolution_forward::desc(
            dnnl::prop_kind::forward_training,
            dnnl::algorithm::convolution_direct, anyS, anyW, anyD, strides, dil,
            pl, pr),
        eng);
    memory::desc pad;
    if (weights) {
      // bf16: the weight gradient accumulates in f32 inside the primitive
      // anyway; asking for it in f32 (the reorder to the plain bf16 result
      // rounds once) picks oneDNN's faster bf16 backward-weights kernels.
      memory::desc diffW =
          dt_ == memory::data_type::bf16 ? memory::desc(wd, memory::data_type::f32, any)
                                         : anyW;
      dnnl::convolution_backward_weights::primitive_desc pd(
          dnnl::convolution_backward_weights::desc(
              dnnl::algorithm::convolution_direct, anyS, diffW, anyD, strides,
              dil, pl, pr),
          attr, eng, hint);
      prim_ = dnnl::convolution_backward_weights(pd);
      a_.init(plainF32(sd, dt_), pd.src_desc(), true);
      b_.init(plainF32(dd, dt_), pd.diff_dst_desc(), true);
      r_.init(plainF32(wd, dt_), pd.diff_weights_desc(), false);
      pad = pd.scratchpad_desc();
      args_ = {{DNNL_ARG_SRC, a_.prim},
               {DNNL_ARG_DIFF_DST, b_.prim},
               {DNNL_ARG_DIFF_WEIGHTS, r_.prim}};
    } else {
      dnnl::convolution_backward_data::primitive_desc pd(
          dnnl::convolution_backward_data::desc(
              dnnl::algorithm::convolution_direct, anyS, anyW, anyD, strides,
              dil, pl, pr),
          attr, eng, hint);
      prim_ = dnnl::convolution_backward_data(pd);
      a_.init(plainF32(dd, dt_), pd.diff_dst_desc(), true);
      b_.init(plainF32(wd, dt_), pd.weights_desc(), true);
      r_.init(plainF32(sd, dt_), pd.diff_src_desc(), false);
      pad = pd.scratchpad_desc();
      args_ = {{DNNL_ARG_DIFF_DST, a_.prim},
               {DNNL_ARG_WEIGHTS, b_.prim},
               {DNNL_ARG_DIFF_SRC, r_.prim}};
    }
    scratch_.resize(pad.get_size());
    args_[DNNL_ARG_SCRATCHPAD] = memory(pad, eng, scratch_.data());
  }

  dnnl::memory::data_type dt_;
  dnnl::primitive prim_;
  Staged a_, b_, r_;
  Scratch scratch_;
  std::unordered_map<int, dnnl::memory> args_;
};

std::unique_ptr<Kernel> convGradKernel(const KernelSpec &spec, const ConvGeom &g,
                                       bool weights, std::unique_ptr<Kernel> direct) {
  std::unique_ptr<DnnlConvGrad> dnnl;
  if (spec.inputs[0]->dtype == DType::F32 && g.n > 0 && g.c > 0 && g.o > 0)
    dnnl = std::make_unique<DnnlConvGrad>(spec, g, weights);
  return dnnlOrDirect(std::move(dnnl), std::move(direct));
}

/// bf16 on oneDNN's bf16 backward primitive; null where that is not how
/// `spec` runs (f16, or no bf16 primitives: widening16 stages it).
std::unique_ptr<Kernel> nativeBf16Grad(const KernelSpec &spec, bool weights) {
  for (const TensorDesc *d : {spec.inputs[0], spec.inputs[1], spec.outputs[0]})
    if (!d || d->dtype != DType::BF16)
      return nullptr;
  if (!dnnlHasBf16())
    return nullptr;
  ConvGeom g = weights ? convGeom(spec, *spec.inputs[0], *spec.outputs[0], *spec.inputs[1])
                       : convGeom(spec, *spec.outputs[0], *spec.inputs[1], *spec.inputs[0]);
  if (g.n == 0 || g.c == 0 || g.o == 0)
    return nullptr;
  auto dnnl = std::make_shared<DnnlConvGrad>(spec, g, weights,
                                             dnnl::memory::data_type::bf16);
  return make([dnnl](ExecContext &, const void *const *in, void *const *out) {
    dnnl->run(in, out);
  });
}

std::unique_ptr<Kernel> makeConvInputGrad(const KernelSpec &spec);
std::unique_ptr<Kernel> makeConvWeightGrad(const KernelSpec &spec);

/// The 16-bit cases: native bf16, else f32 staging.
std::unique_ptr<Kernel> convGrad16(const KernelSpec &spec, bool weights) {
  expectArity(spec, 2, 1);
  if (std::unique_ptr<Kernel> k = nativeBf16Grad(spec, weights))
    return k;
  return widening16(weights ? makeConvWeightGrad : makeConvInputGrad)(spec);
}


std::unique_ptr<Kernel> makeConvInputGrad(const KernelSpec &spec) {
  if (has16BitFloat(spec))
    return convGrad16(spec, false);
  expectArity(spec, 2, 1);
  need(spec, spec.inputs[0], "dy");
  need(spec, spec.inputs[1], "weight");
  need(spec, spec.outputs[0], "the result");
  ConvGeom g = convGeom(spec, *spec.outputs[0], *spec.inputs[1], *spec.inputs[0]);
  auto direct = byFloat(spec, spec.inputs[0]->dtype, [&](auto tag) {
    using T = decltype(tag);
    return make([g](ExecContext &, const void *const *in, void *const *out) {
      const T *dy = static_cast<const T *>(in[0]), *w = static_cast<const T *>(in[1]);
      T *dx = static_cast<T *>(out[0]);
      int64_t IS = g.inSize(), OS = g.outSize(), KS = g.kSize();
      parallelRange(g.n * g.c, g.n * g.c * IS * g.opg() * KS, [&](int64_t b, int64_t e) {
        std::vector<double> acc(IS);
        for (int64_t nc = b; nc < e; ++nc) {
          int64_t n = nc / g.c, c = nc % g.c, grp = c / g.cpg(), cl = c % g.cpg();
          std::fill(acc.begin(), acc.end(), 0.0);
          for (int64_t ol = 0; ol < g.opg(); ++ol) {
            int64_t o = grp * g.opg() + ol;
            const T *dyp = dy + (n * g.o + o) * OS;
            const T *wp = w + (o * g.cpg() + cl) * KS;
            forTaps(g, [&](int64_t i, int64_t k, int64_t op) {
              acc[i] += double(dyp[op]) * double(wp[k]);
            });
          }
          T *dxp = dx + nc * IS;
          for (int64_t i = 0; i < IS; ++i)
            dxp[i] = T(acc[i]);
        }
      });
    });
  });
  return convGradKernel(spec, g, false, std::move(direct));
}

std::unique_ptr<Kernel> makeConvWeightGrad(const KernelSpec &spec) {
  if (has16BitFloat(spec))
    return convGrad16(spec, true);
  expectArity(spec, 2, 1);
  need(spec, spec.inputs[0], "input");
  need(spec, spec.inputs[1], "dy");
  need(spec, spec.outputs[0], "the result");
  ConvGeom g = convGeom(spec, *spec.inputs[0], *spec.outputs[0], *spec.inputs[1]);
  auto direct = byFloat(spec, spec.inputs[0]->dtype, [&](auto tag) {
    using T = decltype(tag);
    return make([g](ExecContext &, const void *const *in, void *const *out) {
      const T *x = static_cast<const T *>(in[0]), *dy = static_cast<const T *>(in[1]);
      T *dw = static_cast<T *>(out[0]);
      int64_t IS = g.inSize(), OS = g.outSize(), KS = g.kSize();
      parallelRange(g.o * g.cpg(), g.n * g.o * g.cpg() * OS * KS, [&](int64_t b, int64_t e) {
        std::vector<double> acc(KS);
        for (int64_t oc = b; oc < e; ++oc) {
          int64_t o = oc / g.cpg(), cl = oc % g.cpg(), c = (o / g.opg()) * g.cpg() + cl;
          std::fill(acc.begin(), acc.end(), 0.0);
          for (int64_t n = 0; n < g.n; ++n) {
            const T *xp = x + (n * g.c + c) * IS;
            const T *dyp = dy + (n * g.o + o) * OS;
            forTaps(g, [&](int64_t i, int64_t k, int64_t op) {
              acc[k] += double(dyp[op]) * double(xp[i]);
            });
          }
          for (int64_t k = 0; k < KS; ++k)
            dw[oc * KS + k] = T(acc[k]);
        }
      });
    });
  });
  return convGradKernel(spec, g, true, std::move(direct));
}

} // namespace

void registerConvGradKernels(KernelRegistry &r) {
  r.add("conv_input_grad", makeConvInputGrad);
  r.add("conv_weight_grad", makeConvWeightGrad);
}

} // namespace kiln::rt::cpu
