//===- Linalg.cpp - batched matrix product ----------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// kiln.matmul: `[..., M, K] x [..., K, N] -> [..., M, N]` with NumPy batch
// broadcasting and optional transposes of either operand's last two dims.
// f32 runs on one oneDNN matmul primitive built at factory time (transposes
// and broadcast batch dims are expressed as memory-descriptor strides; if
// oneDNN refuses the N-d problem, a 2-D primitive runs once per batch with
// pointer offsets). bf16 runs on oneDNN's bf16 matmul (AVX-512 BF16 dot
// products, f32 accumulation, the result rounded once) where the CPU has it;
// f16, and bf16 elsewhere, are staged through f32 scratch by widening16
// (Widen16.h; f32 accumulate); f64 uses a row-blocked loop in double.
//
// Measured on this machine (AMD EPYC, AVX-512, 2 threads), 2048^3 f32 GEMM:
// oneDNN 2.6 (brg:avx512_core) ~200 GFLOP/s, OpenBLAS 0.3.21 cblas_sgemm
// ~195 GFLOP/s; oneDNN is used.
//===----------------------------------------------------------------------===//
#include "Dnnl.h"
#include "Kernels.h"
#include "Widen16.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

namespace kiln::rt::cpu {
namespace {

using dnnl::memory;

/// A strided descriptor of type `dt`; a size-1 dim gets the stride a dense
/// layout would give it (oneDNN matches formats on strides).
memory::desc strided(const memory::dims &dims, memory::dims strides,
                     memory::data_type dt) {
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] != 1)
      continue;
    int64_t s = 1;
    for (size_t j = i + 1; j < dims.size(); ++j)
      s = std::max<int64_t>(s, strides[j] * dims[j]);
    strides[i] = s;
  }
  return memory::desc(dims, dt, strides);
}

/// The geometry of one matmul step, checked against the spec.
struct MatmulShape {
  int64_t m = 0, k = 0, n = 0;
  std::vector<int64_t> batch;         // the output's batch dims
  std::vector<int64_t> lhsBatch;      // lhs batch dims, left-padded with 1s
  std::vector<int64_t> rhsBatch;      // rhs batch dims, left-padded with 1s
  int64_t batchCount = 1;
  // Element strides of an operand's logical (post-transpose) matrix.
  int64_t lhsRowStride = 0, lhsColStride = 0; // (m, k)
  int64_t rhsRowStride = 0, rhsColStride = 0; // (k, n)
  // Per output batch index: element offsets into lhs and rhs.
  std::vector<int64_t> lhsOffsets, rhsOffsets;
};

MatmulShape checkMatmul(const KernelSpec &spec) {
  expectArity(spec, 2, 1);
  const TensorDesc *l = spec.inputs[0], *r = spec.inputs[1];
  const TensorDesc *o = spec.outputs[0];
  if (!l || !r || !o)
    throw Error("kernel 'matmul': both operands are required");
  if (!isFloat(l->dtype))
    unsupportedType(spec, l->dtype);
  if (r->dtype != l->dtype || o->dtype != l->dtype)
    throw Error("kernel 'matmul': operands and result must have one element "
                "type, got " + l->str() + ", " + r->str() + " -> " + o->str());
  if (l->rank() < 2 || r->rank() < 2)
    throw Error("kernel 'matmul': operands need rank >= 2, got " + l->str() +
                " and " + r->str());
  for (const TensorDesc *d : {l, r, o})
    for (int64_t x : d->shape)
      if (x < 0)
        throw Error("kernel 'matmul': negative dimension in " + d->str());
  bool tl = spec.attrs.getBool("transpose_lhs", false);
  bool tr = spec.attrs.getBool("transpose_rhs", false);
  MatmulShape s;
  int64_t lr = l->rank(), rr = r->rank();
  int64_t l0 = l->shape[lr - 2], l1 = l->shape[lr - 1];
  int64_t r0 = r->shape[rr - 2], r1 = r->shape[rr - 1];
  s.m = tl ? l1 : l0;
  s.k = tl ? l0 : l1;
  int64_t kr = tr ? r1 : r0;
  s.n = tr ? r0 : r1;
  if (s.k != kr)
    throw Error("kernel 'matmul': contracting dimensions differ: " +
                std::to_string(s.k) + " vs " + std::to_string(kr));
  size_t nb = (size_t)std::max(lr, rr) - 2;
  s.lhsBatch.assign(nb, 1);
  s.rhsBatch.assign(nb, 1);
  std::copy(l->shape.begin(), l->shape.end() - 2,
            s.lhsBatch.begin() + (nb - (lr - 2)));
  std::copy(r->shape.begin(), r->shape.end() - 2,
            s.rhsBatch.begin() + (nb - (rr - 2)));
  s.batch.resize(nb);
  for (size_t i = 0; i < nb; ++i) {
    int64_t a = s.lhsBatch[i], b = s.rhsBatch[i];
    if (a != b && a != 1 && b != 1)
      throw Error("kernel 'matmul': batch dimensions of " + l->str() + " and " +
                  r->str() + " do not broadcast");
    s.batch[i] = a == 1 ? b : a;
    s.batchCount *= s.batch[i];
  }
  TensorDesc want{l->dtype, s.batch};
  want.shape.push_back(s.m);
  want.shape.push_back(s.n);
  if (*o != want)
    badOutput(spec, *o, want);
  // Stored matrices are [l0, l1] and [r0, r1], row-major.
  s.lhsRowStride = tl ? 1 : l1;
  s.lhsColStride = tl ? l1 : 1;
  s.rhsRowStride = tr ? 1 : r1;
  s.rhsColStride = tr ? r1 : 1;
  // Batch offsets (an odometer over the output's batch dims).
  if (s.batchCount > 0) {
    s.lhsOffsets.resize(s.batchCount);
    s.rhsOffsets.resize(s.batchCount);
    std::vector<int64_t> ls(nb), rs(nb), idx(nb, 0);
    int64_t la = l0 * l1, ra = r0 * r1;
    for (int64_t i = (int64_t)nb - 1; i >= 0; --i) {
      ls[i] = s.lhsBatch[i] == 1 ? 0 : la;
      rs[i] = s.rhsBatch[i] == 1 ? 0 : ra;
      la *= s.lhsBatch[i];
      ra *= s.rhsBatch[i];
    }
    int64_t lo = 0, ro = 0;
    for (int64_t b = 0; b < s.batchCount; ++b) {
      s.lhsOffsets[b] = lo;
      s.rhsOffsets[b] = ro;
      for (int64_t i = (int64_t)nb - 1; i >= 0; --i) {
        lo += ls[i];
        ro += rs[i];
        if (++idx[i] < s.batch[i])
          break;
        lo -= ls[i] * idx[i];
        ro -= rs[i] * idx[i];
        idx[i] = 0;
      }
    }
  }
  return s;
}

/// f64 (and any T): C[b] = A[b] x B[b], rows of C in parallel; a transposed
/// rhs is packed to [K, N] first so the inner loop is contiguous.
template <typename T> class MatmulLoop {
public:
  explicit MatmulLoop(const MatmulShape &s) : s_(s) {
    if (s_.rhsColStride != 1)
      pack_.resize((size_t)s_.k * s_.n * sizeof(T));
  }

  void run(const T *a, const T *b, T *c) const {
    const int64_t m = s_.m, n = s_.n, k = s_.k;
    const bool par = m * n * k > 32768;
    for (int64_t bi = 0; bi < s_.batchCount; ++bi) {
      const T *ab = a + s_.lhsOffsets[bi];
      const T *bb = b + s_.rhsOffsets[bi];
      T *cb = c + bi * m * n;
      int64_t bRow = s_.rhsRowStride;
      if (s_.rhsColStride != 1) {
        T *p = pack_.as<T>();
        const int64_t rs = s_.rhsRowStride, cs = s_.rhsColStride;
#pragma omp parallel for if (par) schedule(static)
        for (int64_t kk = 0; kk < k; ++kk)
          for (int64_t j = 0; j < n; ++j)
            p[kk * n + j] = bb[kk * rs + j * cs];
        bb = p;
        bRow = n;
      }
      const int64_t ars = s_.lhsRowStride, acs = s_.lhsColStride;
#pragma omp parallel for if (par) schedule(static)
      for (int64_t i = 0; i < m; ++i) {
        T *crow = cb + i * n;
        for (int64_t j = 0; j < n; ++j)
          crow[j] = T(0);
        // Block K by 4 so each pass over the C row does four FMAs.
        int64_t kk = 0;
        for (; kk + 4 <= k; kk += 4) {
          T a0 = ab[i * ars + kk * acs], a1 = ab[i * ars + (kk + 1) * acs];
          T a2 = ab[i * ars + (kk + 2) * acs], a3 = ab[i * ars + (kk + 3) * acs];
          const T *b0 = bb + kk * bRow, *b1 = b0 + bRow, *b2 = b1 + bRow,
                  *b3 = b2 + bRow;
#pragma omp simd
          for (int64_t j = 0; j < n; ++j)
            crow[j] += a0 * b0[j] + a1 * b1[j] + a2 * b2[j] + a3 * b3[j];
        }
        for (; kk < k; ++kk) {
          T av = ab[i * ars + kk * acs];
          const T *brow = bb + kk * bRow;
#pragma omp simd
          for (int64_t j = 0; j < n; ++j)
            crow[j] += av * brow[j];
        }
      }
    }
  }

private:
  MatmulShape s_;
  Scratch pack_;
};

/// A matmul through oneDNN in f32, or in bf16 (bf16 operands and result,
/// f32 accumulation).
class MatmulDnnl {
public:
  MatmulDnnl(const KernelSpec &spec, const MatmulShape &s,
             memory::data_type dt = memory::data_type::f32)
      : s_(s), dt_(dt), elt_(dt == memory::data_type::f32 ? 4 : 2) {
    if (s_.batchCount == 0 || s_.m == 0 || s_.n == 0 || s_.k == 0)
      return; // nothing to run (or a zero fill)
    try {
      if (s_.batch.size() + 2 <= DNNL_MAX_NDIMS && tryBatched(spec))
        return;
      buildPerBatch();
    } catch (const dnnl::error &e) {
      throwDnnl(spec, "matmul", e);
    }
  }

  void run(const void *a, const void *b, void *c) {
    if (s_.batchCount == 0 || s_.m == 0 || s_.n == 0)
      return;
    if (s_.k == 0) {
      std::memset(c, 0, elt_ * s_.batchCount * s_.m * s_.n);
      return;
    }
    auto at = [](const void *p, int64_t bytes) {
      return const_cast<char *>(static_cast<const char *>(p)) + bytes;
    };
    dnnl::stream &st = dnnlStream();
    if (batched_) {
      src_.set_data_handle(const_cast<void *>(a));
      wei_.set_data_handle(const_cast<void *>(b));
      dst_.set_data_handle(c);
      prim_.execute(st, args_);
    } else {
      for (int64_t bi = 0; bi < s_.batchCount; ++bi) {
        src_.set_data_handle(at(a, elt_ * s_.lhsOffsets[bi]));
        wei_.set_data_handle(at(b, elt_ * s_.rhsOffsets[bi]));
        dst_.set_data_handle(at(c, elt_ * bi * s_.m * s_.n));
        prim_.execute(st, args_);
      }
    }
    st.wait();
  }

private:
  /// The N-d primitive with broadcast batch dims; false if oneDNN has no
  /// implementation for it.
  bool tryBatched(const KernelSpec &) {
    size_t nb = s_.batch.size();
    memory::dims sd, wd, dd, ss(nb + 2), ws(nb + 2);
    for (size_t i = 0; i < nb; ++i) {
      sd.push_back(s_.lhsBatch[i]);
      wd.push_back(s_.rhsBatch[i]);
      dd.push_back(s_.batch[i]);
    }
    sd.insert(sd.end(), {s_.m, s_.k});
    wd.insert(wd.end(), {s_.k, s_.n});
    dd.insert(dd.end(), {s_.m, s_.n});
    ss[nb] = s_.lhsRowStride;
    ss[nb + 1] = s_.lhsColStride;
    ws[nb] = s_.rhsRowStride;
    ws[nb + 1] = s_.rhsColStride;
    int64_t la = s_.m * s_.k, ra = s_.k * s_.n;
    for (int64_t i = (int64_t)nb - 1; i >= 0; --i) {
      ss[i] = la;
      ws[i] = ra;
      la *= s_.lhsBatch[i];
      ra *= s_.rhsBatch[i];
    }
    memory::desc smd = strided(sd, ss, dt_);
    memory::desc wmd = strided(wd, ws, dt_);
    memory::desc dmd = plainF32(dd, dt_);
    dnnl::matmul::primitive_desc pd;
    try {
      pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(smd, wmd, dmd),
                                        userScratchpadAttr(), dnnlEngine());
    } catch (const dnnl::error &) {
      return false;
    }
    build(pd, smd, wmd, dmd);
    batched_ = true;
    return true;
  }

  void buildPerBatch() {
    memory::desc smd =
        strided({s_.m, s_.k}, {s_.lhsRowStride, s_.lhsColStride}, dt_);
    memory::desc wmd =
        strided({s_.k, s_.n}, {s_.rhsRowStride, s_.rhsColStride}, dt_);
    memory::desc dmd = plainF32({s_.m, s_.n}, dt_);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(smd, wmd, dmd),
                                    userScratchpadAttr(), dnnlEngine());
    build(pd, smd, wmd, dmd);
  }

  void build(const dnnl::matmul::primitive_desc &pd, const memory::desc &smd,
             const memory::desc &wmd, const memory::desc &dmd) {
    dnnl::engine &eng = dnnlEngine();
    prim_ = dnnl::matmul(pd);
    src_ = memory(smd, eng, nullptr);
    wei_ = memory(wmd, eng, nullptr);
    dst_ = memory(dmd, eng, nullptr);
    scratch_.resize(pd.scratchpad_desc().get_size());
    pad_ = memory(pd.scratchpad_desc(), eng, scratch_.data());
    args_ = {{DNNL_ARG_SRC, src_},
             {DNNL_ARG_WEIGHTS, wei_},
             {DNNL_ARG_DST, dst_},
             {DNNL_ARG_SCRATCHPAD, pad_}};
  }

  MatmulShape s_;
  memory::data_type dt_;
  int64_t elt_; // bytes per element
  bool batched_ = false;
  dnnl::matmul prim_;
  memory src_, wei_, dst_, pad_;
  Scratch scratch_;
  std::unordered_map<int, memory> args_;
};

class MatmulF32Kernel : public Kernel {
public:
  MatmulF32Kernel(const KernelSpec &spec, const MatmulShape &s) : mm_(spec, s) {}
  void run(ExecContext &, const void *const *in, void *const *out) override {
    mm_.run(in[0], in[1], out[0]);
  }

private:
  MatmulDnnl mm_;
};

/// bf16 on oneDNN's bf16 matmul.
class MatmulBf16Kernel : public Kernel {
public:
  MatmulBf16Kernel(const KernelSpec &spec, const MatmulShape &s)
      : mm_(spec, s, memory::data_type::bf16) {}
  void run(ExecContext &, const void *const *in, void *const *out) override {
    mm_.run(in[0], in[1], out[0]);
  }

private:
  MatmulDnnl mm_;
};

class MatmulF64Kernel : public Kernel {
public:
  explicit MatmulF64Kernel(const MatmulShape &s) : mm_(s) {}
  void run(ExecContext &, const void *const *in, void *const *out) override {
    mm_.run(static_cast<const double *>(in[0]), static_cast<const double *>(in[1]),
            static_cast<double *>(out[0]));
  }

private:
  MatmulLoop<double> mm_;
};

std::unique_ptr<Kernel> makeMatmul(const KernelSpec &spec) {
  MatmulShape s = checkMatmul(spec);
  switch (spec.inputs[0]->dtype) {
  case DType::F32:
    return std::make_unique<MatmulF32Kernel>(spec, s);
  case DType::BF16:
    if (dnnlHasBf16())
      return std::make_unique<MatmulBf16Kernel>(spec, s);
    return widening16(makeMatmul)(spec);
  case DType::F16:
    return widening16(makeMatmul)(spec);
  case DType::F64:
    return std::make_unique<MatmulF64Kernel>(s);
  default:
    unsupportedType(spec, spec.inputs[0]->dtype);
  }
}

} // namespace

void registerLinalgKernels(KernelRegistry &r) { r.add("matmul", makeMatmul); }

} // namespace kiln::rt::cpu
