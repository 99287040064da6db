//===- Conv.cpp - convolution and transposed convolution --------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// kiln.conv (`input [N, C, D...]`, `weight [O, C/groups, K...]`) and
// kiln.conv_transpose (`weight [C, O/groups, K...]`, ONNX ConvTranspose),
// with 1 to 3 spatial dims, strides, dilations, asymmetric padding and groups.
//
// f32 runs on oneDNN convolution_forward / deconvolution_forward primitives
// built at factory time with `format_tag::any`, so oneDNN picks its blocked
// layouts (brgconv); reorder primitives, also built at factory time, move
// the plain input, weight (every run: weights change while training) and
// output to and from them. Measured here (2 threads) that beats oneDNN's
// plain-layout gemm convolution by 1.3-2x even counting the reorders, except
// for pointwise (1x1, stride 1, unpadded) convolutions, a plain GEMM, which
// run on the plain layouts (2x faster than blocked + reorders). bf16 runs on
// oneDNN's bf16 primitives where the CPU has them; f16, and bf16 elsewhere,
// are staged through f32 scratch by widening16 (Widen16.h). f64 (and the
// rare transposed convolution oneDNN cannot express) uses a direct loop that
// accumulates in double.
//===----------------------------------------------------------------------===//
#include "Dnnl.h"
#include "Kernels.h"
#include "ShapeCheck.h"
#include "Widen16.h"

#include <cstring>
#include <unordered_map>

namespace kiln::rt::cpu {
namespace {

using dnnl::memory;

/// The geometry of a conv or conv_transpose step (ShapeRules.h): spatial
/// arrays hold the real dims last, after neutral entries (size 1, stride 1,
/// no padding), so the loops below cover 1 to 3 spatial dims alike.
using ConvGeom = shape::WindowGeometry;

ConvGeom checkConv(const KernelSpec &spec, bool transposed) {
  expectArity(spec, 2, 1);
  const TensorDesc *x = spec.inputs[0], *w = spec.inputs[1], *y = spec.outputs[0];
  const std::string &name = spec.kernel;
  if (!x || !w || !y)
    throw Error("kernel '" + name + "': input and weight are required");
  if (!isFloat(x->dtype))
    unsupportedType(spec, x->dtype);
  if (w->dtype != x->dtype || y->dtype != x->dtype)
    throw Error("kernel '" + name + "': input, weight and result must have one "
                "element type, got " + x->str() + ", " + w->str() + " -> " +
                y->str());
  std::vector<int64_t> strides = spec.attrs.getInts("strides"),
                       dil = spec.attrs.getInts("dilations"),
                       pad = spec.attrs.getInts("padding"), outPad;
  if (transposed)
    outPad = spec.attrs.getInts("output_padding");
  shape::WindowAttrs a;
  a.strides = strides;
  a.dilations = dil;
  a.padding = pad;
  a.outputPadding = outPad;
  a.groups = spec.attrs.getInt("groups", 1);
  ConvGeom g;
  checkRule(spec, shape::convGeometry(x->shape, w->shape, a, transposed, g));
  TensorDesc wantDesc{x->dtype, g.outShape()};
  if (*y != wantDesc)
    badOutput(spec, *y, wantDesc);
  return g;
}

/// Direct convolution, accumulating in double; rows of (batch, out channel)
/// in parallel.
template <typename T>
void convDirect(const ConvGeom &g, const T *x, const T *w, T *y) {
  const int64_t cpg = g.c / g.groups, opg = g.o / g.groups;
  const int64_t isz = g.inSize(), osz = g.outSize(), ksz = g.kSize();
  const int64_t rows = g.n * g.o;
  const bool par = rows * osz * cpg * ksz > 32768;
#pragma omp parallel for if (par) schedule(dynamic, 1)
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t nb = row / g.o, oc = row % g.o, grp = oc / opg;
    T *yp = y + row * osz;
    for (int64_t o0 = 0; o0 < g.out[0]; ++o0)
      for (int64_t o1 = 0; o1 < g.out[1]; ++o1)
        for (int64_t o2 = 0; o2 < g.out[2]; ++o2) {
          double acc = 0;
          for (int64_t ic = 0; ic < cpg; ++ic) {
            const T *xp = x + (nb * g.c + grp * cpg + ic) * isz;
            const T *wp = w + (oc * cpg + ic) * ksz;
            for (int64_t k0 = 0; k0 < g.k[0]; ++k0) {
              int64_t i0 = o0 * g.s[0] - g.pl[0] + k0 * g.d[0];
              if (i0 < 0 || i0 >= g.in[0])
                continue;
              for (int64_t k1 = 0; k1 < g.k[1]; ++k1) {
                int64_t i1 = o1 * g.s[1] - g.pl[1] + k1 * g.d[1];
                if (i1 < 0 || i1 >= g.in[1])
                  continue;
                for (int64_t k2 = 0; k2 < g.k[2]; ++k2) {
                  int64_t i2 = o2 * g.s[2] - g.pl[2] + k2 * g.d[2];
                  if (i2 < 0 || i2 >= g.in[2])
                    continue;
                  acc += (double)xp[(i0 * g.in[1] + i1) * g.in[2] + i2] *
                         (double)wp[(k0 * g.k[1] + k1) * g.k[2] + k2];
                }
              }
            }
          }
          yp[(o0 * g.out[1] + o1) * g.out[2] + o2] = (T)acc;
        }
  }
}

/// Direct transposed convolution (a gather over the input positions that
/// reach each output position), accumulating in double.
template <typename T>
void convTransposeDirect(const ConvGeom &g, const T *x, const T *w, T *y) {
  const int64_t cpg = g.c / g.groups, opg = g.o / g.groups;
  const int64_t isz = g.inSize(), osz = g.outSize(), ksz = g.kSize();
  const int64_t rows = g.n * g.o;
  const bool par = rows * osz * cpg * ksz > 32768;
#pragma omp parallel for if (par) schedule(dynamic, 1)
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t nb = row / g.o, oc = row % g.o, grp = oc / opg, ocg = oc % opg;
    T *yp = y + row * osz;
    for (int64_t o0 = 0; o0 < g.out[0]; ++o0)
      for (int64_t o1 = 0; o1 < g.out[1]; ++o1)
        for (int64_t o2 = 0; o2 < g.out[2]; ++o2) {
          double acc = 0;
          for (int64_t ic = grp * cpg; ic < (grp + 1) * cpg; ++ic) {
            const T *xp = x + (nb * g.c + ic) * isz;
            const T *wp = w + (ic * opg + ocg) * ksz;
            for (int64_t k0 = 0; k0 < g.k[0]; ++k0) {
              int64_t t0 = o0 + g.pl[0] - k0 * g.d[0];
              if (t0 < 0 || t0 % g.s[0] || t0 / g.s[0] >= g.in[0])
                continue;
              int64_t i0 = t0 / g.s[0];
              for (int64_t k1 = 0; k1 < g.k[1]; ++k1) {
                int64_t t1 = o1 + g.pl[1] - k1 * g.d[1];
                if (t1 < 0 || t1 % g.s[1] || t1 / g.s[1] >= g.in[1])
                  continue;
                int64_t i1 = t1 / g.s[1];
                for (int64_t k2 = 0; k2 < g.k[2]; ++k2) {
                  int64_t t2 = o2 + g.pl[2] - k2 * g.d[2];
                  if (t2 < 0 || t2 % g.s[2] || t2 / g.s[2] >= g.in[2])
                    continue;
                  int64_t i2 = t2 / g.s[2];
                  acc += (double)xp[(i0 * g.in[1] + i1) * g.in[2] + i2] *
                         (double)wp[(k0 * g.k[1] + k1) * g.k[2] + k2];
                }
              }
            }
          }
          yp[(o0 * g.out[1] + o1) * g.out[2] + o2] = (T)acc;
        }
  }
}

template <typename T>
void runDirect(const ConvGeom &g, const T *x, const T *w, T *y) {
  if (g.transposed)
    convTransposeDirect(g, x, w, y);
  else
    convDirect(g, x, w, y);
}

/// conv / conv_transpose through oneDNN, in f32 or bf16.
class DnnlConv {
public:
  DnnlConv(const KernelSpec &spec, const ConvGeom &g,
           memory::data_type dt = memory::data_type::f32)
      : dt_(dt) {
    try {
      bool pointwise = !g.transposed;
      for (int i = g.first(); i < shape::kMaxSpatial; ++i)
        pointwise &= g.k[i] == 1 && g.s[i] == 1 && g.pl[i] == 0 && g.ph[i] == 0;
      if (!pointwise || !build(g, false))
        build(g, true);
    } catch (const dnnl::error &e) {
      throwDnnl(spec, g.transposed ? "deconvolution" : "convolution", e);
    }
  }

  void run(const void *x, const void *w, void *y) {
    dnnl::stream &st = dnnlStream();
    src_.bind(x);
    wei_.bind(w);
    dst_.bind(y);
    src_.toPrim(st);
    wei_.toPrim(st);
    prim_.execute(st, args_);
    dst_.toUser(st);
    st.wait();
  }

private:
  /// Builds the primitive on the plain layouts or (`anyLayout`) on
  /// oneDNN's choice; false if the plain-layout primitive is a reference
  /// implementation.
  bool build(const ConvGeom &g, bool anyLayout) {
    const int nsp = g.nsp;
    const bool grouped = g.groups > 1;
    DnnlWindow dims(g);
    const memory::dims &sd = dims.src, &dd = dims.dst, &wd = dims.weights,
                       &strides = dims.strides, &dil = dims.holes, &pl = dims.padL;
    memory::dims pr = dims.padR;
    const int64_t cpg = g.cpg(), opg = g.opg();
    memory::desc userW;
    if (!g.transposed) {
      // [O, C/G, K...] == [G, O/G, C/G, K...], dense.
      userW = plainF32(wd, dt_);
    } else {
      // Stored [C, O/G, K...] == [G][C/G][O/G][K...]; oneDNN's logical order
      // is [G, O/G, C/G, K...].
      memory::dims ws(wd.size());
      int64_t ksz = g.kSize();
      size_t base = grouped ? 1 : 0;
      for (int i = 0; i < nsp; ++i) {
        int64_t st = 1;
        for (int j = g.dim(i) + 1; j < shape::kMaxSpatial; ++j)
          st *= g.k[j];
        ws[base + 2 + i] = st;
      }
      ws[base] = ksz;                 // out channel within the group
      ws[base + 1] = opg * ksz;       // in channel within the group
      if (grouped)
        ws[0] = cpg * opg * ksz;
      userW = memory::desc(wd, dt_, ws);
      // ONNX allows output_padding < stride; that keeps oneDNN's
      // consistency check (integer division) satisfied with the plain end
      // pads. Beyond that, shrink the end pad (oneDNN accepts pad_r > -stride).
      for (int i = 0; i < nsp; ++i)
        if (g.op[g.dim(i)] >= g.s[g.dim(i)])
          pr[i] = g.ph[g.dim(i)] - g.op[g.dim(i)];
    }
    memory::desc userS = plainF32(sd, dt_), userD = plainF32(dd, dt_);
    auto any = memory::format_tag::any;
    memory::desc anyS = anyLayout ? memory::desc(sd, dt_, any) : userS;
    memory::desc anyW = anyLayout ? memory::desc(wd, dt_, any) : userW;
    memory::desc anyD = anyLayout ? memory::desc(dd, dt_, any) : userD;
    std::string impl;
    dnnl::primitive_attr attr = userScratchpadAttr();
    dnnl::engine &eng = dnnlEngine();
    memory::desc ps, pw, pdst, pad;
    if (!g.transposed) {
      dnnl::convolution_forward::desc desc(
          dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
          anyS, anyW, anyD, strides, dil, pl, pr);
      dnnl::convolution_forward::primitive_desc pd(desc, attr, eng);
      impl = pd.impl_info_str();
      if (!anyLayout && impl.rfind("ref", 0) == 0)
        return false;
      prim_ = dnnl::convolution_forward(pd);
      ps = pd.src_desc();
      pw = pd.weights_desc();
      pdst = pd.dst_desc();
      pad = pd.scratchpad_desc();
    } else {
      dnnl::deconvolution_forward::desc desc(
          dnnl::prop_kind::forward_inference,
          dnnl::algorithm::deconvolution_direct, anyS, anyW, anyD, strides, dil,
          pl, pr);
      dnnl::deconvolution_forward::primitive_desc pd(desc, attr, eng);
      impl = pd.impl_info_str();
      if (!anyLayout && impl.rfind("ref", 0) == 0)
        return false;
      prim_ = dnnl::deconvolution_forward(pd);
      ps = pd.src_desc();
      pw = pd.weights_desc();
      pdst = pd.dst_desc();
      pad = pd.scratchpad_desc();
    }
    src_.init(userS, ps, true);
    wei_.init(userW, pw, true);
    dst_.init(userD, pdst, false);
    scratch_.resize(pad.get_size());
    pad_ = memory(pad, eng, scratch_.data());
    args_ = {{DNNL_ARG_SRC, src_.prim},
             {DNNL_ARG_WEIGHTS, wei_.prim},
             {DNNL_ARG_DST, dst_.prim},
             {DNNL_ARG_SCRATCHPAD, pad_}};
    return true;
  }

  memory::data_type dt_;
  dnnl::primitive prim_;
  Staged src_, wei_, dst_;
  memory pad_;
  Scratch scratch_;
  std::unordered_map<int, memory> args_;
};

/// Whether oneDNN can run `g` (it cannot when a channel count is zero, or
/// when output_padding is too large for its padding convention).
bool dnnlCan(const ConvGeom &g) {
  if (g.c == 0 || g.o == 0)
    return false;
  if (g.transposed)
    for (int i = g.first(); i < shape::kMaxSpatial; ++i)
      if (g.op[i] >= g.s[i] && g.ph[i] - g.op[i] + g.s[i] <= 0)
        return false;
  return true;
}

/// f32, f64 and (where oneDNN has bf16 primitives) bf16; other 16-bit specs
/// come through widening16 (makeConvOf).
class ConvKernel : public Kernel {
public:
  ConvKernel(const KernelSpec &spec, const ConvGeom &g)
      : g_(g), type_(spec.inputs[0]->dtype), ny_(spec.outputs[0]->numel()) {
    if (ny_ == 0 || type_ == DType::F64)
      return;
    if (dnnlCan(g_))
      dnnl_ = std::make_unique<DnnlConv>(spec, g_, dnnlType(type_));
  }

  void run(ExecContext &, const void *const *in, void *const *out) override {
    if (ny_ == 0)
      return;
    if (type_ == DType::F64) {
      runDirect(g_, static_cast<const double *>(in[0]),
                static_cast<const double *>(in[1]), static_cast<double *>(out[0]));
      return;
    }
    if (dnnl_)
      dnnl_->run(in[0], in[1], out[0]);
    else
      runDirect(g_, static_cast<const float *>(in[0]),
                static_cast<const float *>(in[1]), static_cast<float *>(out[0]));
  }

private:
  ConvGeom g_;
  DType type_;
  int64_t ny_;
  std::unique_ptr<DnnlConv> dnnl_;
};

/// conv (or conv_transpose): bf16 on oneDNN's bf16 primitive where the CPU
/// has it, f16 and other bf16 through f32 staging.
std::unique_ptr<Kernel> makeConvOf(const KernelSpec &spec, bool transposed) {
  ConvGeom g = checkConv(spec, transposed);
  DType t = spec.inputs[0]->dtype;
  bool native = !is16BitFloat(t) ||
                (t == DType::BF16 && dnnlHasBf16() && dnnlCan(g)) ||
                spec.outputs[0]->numel() == 0;
  if (!native)
    return widening16([transposed](const KernelSpec &s) {
      return makeConvOf(s, transposed);
    })(spec);
  return std::make_unique<ConvKernel>(spec, g);
}

std::unique_ptr<Kernel> makeConv(const KernelSpec &spec) {
  return makeConvOf(spec, false);
}

std::unique_ptr<Kernel> makeConvTranspose(const KernelSpec &spec) {
  return makeConvOf(spec, true);
}

} // namespace

void registerConvKernels(KernelRegistry &r) {
  r.add("conv", makeConv);
  r.add("conv_transpose", makeConvTranspose);
}

} // namespace kiln::rt::cpu
