//===- Reduction.cpp - reduce_* and argmax/argmin kernels --------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// reduce_sum/mean/max/min/prod/sum_square over sorted unique `axes` (an
// empty list reduces nothing: the kiln op is then a copy, or the square),
// keepdims. At factory time
// size-1 dims are dropped and adjacent dims with the same role (kept or
// reduced) merged; each block of reduced dims, from the last, is one stage
// [O, R, I] (outer, reduced, inner) that reduces into an accumulator buffer:
// rows (I == 1) reduce contiguously (split over the threads when there are
// few rows), otherwise tiles of inner positions are reduced together so the
// loop vectorises across them. A last pass converts to the result type
// (dividing by the count for the mean).
//
// Accumulators: double for every float type (sum/mean/prod), the compute
// type for max/min (NaN propagates); integers in their own type, wrapping
// (the mean: in 64 bits, then truncated). Empty reductions give 0 (sum), 1 (prod),
// the lowest value / -inf (max), the highest / +inf (min), 0/0 (mean: NaN
// for floats, 0 for integers). Types: every float and integer type; max and
// min also i1.
//
// argmax/argmin (axis, keepdims, select_last_index) give i64 indices; NaN
// counts as greater than (argmax) or less than (argmin) every number, so the
// first NaN wins, as in NumPy (the last with select_last_index). An empty
// axis is an Error.
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "Loops.h"
#include "kiln/runtime/ShapeRules.h"

#include <memory>

namespace kiln::rt::cpu {
namespace {

using namespace loops;

template <typename A> constexpr A highest() {
  if constexpr (std::is_floating_point_v<A>)
    return std::numeric_limits<A>::infinity();
  else
    return std::numeric_limits<A>::max();
}
template <typename A> constexpr A lowest() {
  if constexpr (std::is_floating_point_v<A>)
    return -std::numeric_limits<A>::infinity();
  else
    return std::numeric_limits<A>::lowest();
}

struct SumR {
  template <typename A> static A init() { return A(0); }
  template <typename A> static A comb(A a, A x) {
    if constexpr (std::is_integral_v<A>)
      return wrapAdd(a, x);
    else
      return a + x;
  }
};
struct MeanR : SumR {};
/// A sum of the squared inputs: the first stage squares what it loads.
struct SumSquareR : SumR {};
struct ProdR {
  template <typename A> static A init() { return A(1); }
  template <typename A> static A comb(A a, A x) {
    if constexpr (std::is_integral_v<A>)
      return wrapMul(a, x);
    else
      return a * x;
  }
};
struct MaxR {
  template <typename A> static A init() { return lowest<A>(); }
  template <typename A> static A comb(A a, A x) {
    return (x > a || x != x) ? x : a;
  }
};
struct MinR {
  template <typename A> static A init() { return highest<A>(); }
  template <typename A> static A comb(A a, A x) {
    return (x < a || x != x) ? x : a;
  }
};

/// The accumulator type of reduction Op over storage type T.
/// (i1 max/min accumulate in a byte: no std::vector<bool>; integer means
/// sum in 64 bits.)
template <typename T, typename Op>
using AccFor = std::conditional_t<
    kIsBool<T>, uint8_t,
    std::conditional_t<
    kIsInt<T> && std::is_same_v<Op, MeanR>,
    std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>,
    std::conditional_t<kIsFloat<T> && !std::is_same_v<Op, MaxR> &&
                           !std::is_same_v<Op, MinR>,
                       double, Calc<T>>>>;

struct Stage {
  int64_t outer, red, inner;
};

constexpr int64_t kTile = 256;

template <typename T, typename Op> class ReduceKernel final : public Kernel {
  using A = AccFor<T, Op>;

public:
  ReduceKernel(std::vector<Stage> stages, int64_t outN, int64_t count,
               bool copy)
      : stages_(std::move(stages)), outN_(outN), count_(count), copy_(copy) {
    if (stages_.size() >= 1)
      buf_[0].resize((size_t)stages_[0].outer * stages_[0].inner);
    if (stages_.size() >= 2)
      buf_[1].resize((size_t)stages_[1].outer * stages_[1].inner);
    partial_.resize((size_t)std::max(1, omp_get_max_threads()));
  }

  void run(ExecContext &, const void *const *in, void *const *out) override {
    const T *x = static_cast<const T *>(in[0]);
    T *y = static_cast<T *>(out[0]);
    if (outN_ == 0)
      return;
    if (copy_) { // nothing reduced
      if constexpr (std::is_same_v<Op, SumSquareR>) {
        parallelRange(outN_, outN_, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i)
            store(y, i, castValue<T>(ldA<true>(x, i)));
        });
      } else if ((const void *)x != (void *)y) {
        std::memcpy(y, x, (size_t)outN_ * sizeof(T));
      }
      return;
    }
    const A *src = nullptr;
    for (size_t s = 0; s < stages_.size(); ++s) {
      A *dst = buf_[s % 2].data();
      if (s == 0)
        stage<true>(x, dst, stages_[s]);
      else
        stage<false>(src, dst, stages_[s]);
      src = dst;
    }
    const int64_t count = count_;
    parallelRange(outN_, outN_, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        store(y, i, castValue<T>(finish(src[i], count)));
    });
  }

private:
  static A finish(A a, int64_t count) {
    if constexpr (!std::is_same_v<Op, MeanR>) {
      return a;
    } else if constexpr (std::is_floating_point_v<A>) {
      return a / A(count);
    } else {
      using W = std::conditional_t<std::is_signed_v<A>, int64_t, uint64_t>;
      return count == 0 ? A(0) : A(W(a) / W(count));
    }
  }

  /// Element i as an accumulator; squared when `First` (reading the input)
  /// for a sum of squares.
  template <bool First, typename S> static A ldA(const S *p, int64_t i) {
    A v = static_cast<A>(load(p, i));
    if constexpr (First && std::is_same_v<Op, SumSquareR>) {
      if constexpr (std::is_integral_v<A>)
        return wrapMul(v, v);
      else
        return v * v;
    } else {
      return v;
    }
  }

  template <bool First, typename S> void stage(const S *x, A *y, const Stage &st) {
    const int64_t O = st.outer, R = st.red, I = st.inner;
    if (R == 0) {
      for (int64_t i = 0; i < O * I; ++i)
        y[i] = Op::template init<A>();
      return;
    }
    if (I == 1) {
      int nt = (int)partial_.size();
      if (O < 2 * nt && O * R >= kParallelWork && nt > 1) {
        // Few long rows: split each row over the threads.
        for (int64_t o = 0; o < O; ++o) {
          const S *row = x + o * R;
          for (auto &p : partial_)
            p = Op::template init<A>();
          A *part = partial_.data();
#pragma omp parallel num_threads(nt)
          {
            int64_t t = omp_get_thread_num(), n = omp_get_num_threads();
            int64_t b = R * t / n, e = R * (t + 1) / n;
            part[t] = reduceRow<First>(row + b, e - b);
          }
          A acc = Op::template init<A>();
          for (const A &p : partial_)
            acc = Op::comb(acc, p);
          y[o] = acc;
        }
        return;
      }
      parallelRange(O, O * R, [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o)
          y[o] = reduceRow<First>(x + o * R, R);
      });
      return;
    }
    const int64_t tiles = (I + kTile - 1) / kTile;
    parallelRange(O * tiles, O * R * I, [&](int64_t b, int64_t e) {
      for (int64_t u = b; u < e; ++u) {
        int64_t o = u / tiles, k0 = (u % tiles) * kTile;
        int64_t kw = std::min(kTile, I - k0);
        A *acc = y + o * I + k0;
        const S *base = x + o * R * I + k0;
        for (int64_t k = 0; k < kw; ++k)
          acc[k] = ldA<First>(base, k);
        for (int64_t j = 1; j < R; ++j) {
          const S *r = base + j * I;
          for (int64_t k = 0; k < kw; ++k)
            acc[k] = Op::comb(acc[k], ldA<First>(r, k));
        }
      }
    });
  }

  template <bool First, typename S> static A reduceRow(const S *x, int64_t n) {
    A acc = Op::template init<A>();
    if constexpr (std::is_base_of_v<SumR, Op> && std::is_floating_point_v<A>) {
#pragma omp simd reduction(+ : acc)
      for (int64_t j = 0; j < n; ++j)
        acc += ldA<First>(x, j);
    } else {
      for (int64_t j = 0; j < n; ++j)
        acc = Op::comb(acc, ldA<First>(x, j));
    }
    return acc;
  }

  std::vector<Stage> stages_;
  int64_t outN_, count_;
  bool copy_;
  std::vector<A> buf_[2];
  std::vector<A> partial_;
};

/// Checks `axes` (ShapeRules.h's reduction rule, as the ops' type inference
/// applies it) and the reduced result shape of `in` against `out`; returns
/// one flag per input dim, true where reduced.
std::vector<bool> expectReducedShape(const KernelSpec &spec, const TensorDesc &in,
                                     const std::vector<int64_t> &axes, bool keepdims,
                                     const TensorDesc &out, DType outType) {
  std::vector<int64_t> want;
  std::vector<bool> reduced;
  std::string err = shape::reducedShape(in.shape, axes, keepdims, want, &reduced);
  if (!err.empty())
    throw Error("kernel '" + spec.kernel + "' " + err);
  if (out.shape != want || out.dtype != outType)
    throw Error("kernel '" + spec.kernel + "' result " + out.str() +
                " should be " + dtypeName(outType) + shapeStr(want));
  return reduced;
}

template <typename Op> KernelFactory reduceFactory() {
  return [](const KernelSpec &spec) -> std::unique_ptr<Kernel> {
    expectArity(spec, 1, 1);
    if (!spec.inputs[0] || !spec.outputs[0])
      throw Error("kernel '" + spec.kernel + "' is missing its operand");
    const TensorDesc &in = *spec.inputs[0];
    std::vector<int64_t> axes = spec.attrs.getInts("axes");
    bool keepdims = spec.attrs.getBool("keepdims", true);
    int64_t rank = in.rank();
    std::vector<bool> reduced =
        expectReducedShape(spec, in, axes, keepdims, *spec.outputs[0], in.dtype);
    // Blocks of (size, reduced) without size-1 dims, same roles merged.
    std::vector<std::pair<int64_t, bool>> blocks;
    int64_t count = 1;
    for (int64_t i = 0; i < rank; ++i) {
      if (reduced[i])
        count *= in.shape[i];
      if (in.shape[i] == 1)
        continue;
      if (!blocks.empty() && blocks.back().second == reduced[i])
        blocks.back().first *= in.shape[i];
      else
        blocks.push_back({in.shape[i], reduced[i]});
    }
    std::vector<Stage> stages;
    while (true) {
      int64_t p = (int64_t)blocks.size() - 1;
      while (p >= 0 && !blocks[p].second)
        --p;
      if (p < 0)
        break;
      Stage st{1, blocks[p].first, 1};
      for (int64_t i = 0; i < p; ++i)
        st.outer *= blocks[i].first;
      for (size_t i = p + 1; i < blocks.size(); ++i)
        st.inner *= blocks[i].first;
      stages.push_back(st);
      // The stage's result: the blocks without p, kept neighbours merged.
      blocks.erase(blocks.begin() + p);
      if (p > 0 && p < (int64_t)blocks.size() && !blocks[p - 1].second &&
          !blocks[p].second) {
        blocks[p - 1].first *= blocks[p].first;
        blocks.erase(blocks.begin() + p);
      }
    }
    int64_t outN = spec.outputs[0]->numel();
    bool copy = stages.empty();
    if (count == 0) { // an empty reduction: one stage that only fills
      stages.assign(1, Stage{outN, 0, 1});
      copy = false;
    }
    constexpr bool kSumLike = !std::is_same_v<Op, MaxR> && !std::is_same_v<Op, MinR>;
    DType t = in.dtype;
    return dispatchType(t, [&](auto tag) -> std::unique_ptr<Kernel> {
      using T = decltype(tag);
      if constexpr (!kIsBool<T> || !kSumLike)
        return std::make_unique<ReduceKernel<T, Op>>(std::move(stages), outN,
                                                     count, copy);
      unsupportedType(spec, t);
    });
  };
}

//===----------------------------------------------------------------------===//
// argmax / argmin
//===----------------------------------------------------------------------===//

template <typename C, bool Max, bool Last> inline bool better(C v, C best) {
  if constexpr (Max) {
    if constexpr (Last)
      return v >= best || v != v;
    else
      return v > best || (v != v && best == best);
  } else {
    if constexpr (Last)
      return v <= best || v != v;
    else
      return v < best || (v != v && best == best);
  }
}

template <typename T, bool Max, bool Last>
class ArgReduceKernel final : public Kernel {
  using C = Calc<T>;

public:
  ArgReduceKernel(int64_t outer, int64_t red, int64_t inner)
      : O_(outer), R_(red), I_(inner) {}

  void run(ExecContext &, const void *const *in, void *const *out) override {
    const T *x = static_cast<const T *>(in[0]);
    int64_t *y = static_cast<int64_t *>(out[0]);
    const int64_t O = O_, R = R_, I = I_;
    const int64_t tiles = (I + kTile - 1) / kTile;
    parallelRange(O * tiles, O * R * I, [&](int64_t b, int64_t e) {
      C best[kTile];
      for (int64_t u = b; u < e; ++u) {
        int64_t o = u / tiles, k0 = (u % tiles) * kTile;
        int64_t kw = std::min(kTile, I - k0);
        const T *base = x + o * R * I + k0;
        int64_t *idx = y + o * I + k0;
        for (int64_t k = 0; k < kw; ++k) {
          best[k] = load(base, k);
          idx[k] = 0;
        }
        for (int64_t j = 1; j < R; ++j) {
          const T *r = base + j * I;
          for (int64_t k = 0; k < kw; ++k) {
            C v = load(r, k);
            bool t = better<C, Max, Last>(v, best[k]);
            best[k] = t ? v : best[k];
            idx[k] = t ? j : idx[k];
          }
        }
      }
    });
  }

private:
  int64_t O_, R_, I_;
};

template <bool Max> std::unique_ptr<Kernel> makeArgReduce(const KernelSpec &spec) {
  expectArity(spec, 1, 1);
  if (!spec.inputs[0] || !spec.outputs[0])
    throw Error("kernel '" + spec.kernel + "' is missing its operand");
  const TensorDesc &in = *spec.inputs[0];
  int64_t rank = in.rank();
  int64_t axis = spec.attrs.getInt("axis");
  if (std::string err = shape::normalizeAxis(axis, rank); !err.empty())
    throw Error("kernel '" + spec.kernel + "' " + err);
  bool keepdims = spec.attrs.getBool("keepdims", true);
  bool last = spec.attrs.getBool("select_last_index", false);
  expectReducedShape(spec, in, {axis}, keepdims, *spec.outputs[0], DType::I64);
  int64_t O = 1, I = 1, R = in.shape[axis];
  for (int64_t i = 0; i < axis; ++i)
    O *= in.shape[i];
  for (int64_t i = axis + 1; i < rank; ++i)
    I *= in.shape[i];
  if (R == 0 && O * I != 0)
    throw Error("kernel '" + spec.kernel + "' cannot reduce the empty axis " +
                std::to_string(axis));
  return dispatchType(in.dtype, [&](auto tag) -> std::unique_ptr<Kernel> {
    using T = decltype(tag);
    if (last)
      return std::make_unique<ArgReduceKernel<T, Max, true>>(O, R, I);
    return std::make_unique<ArgReduceKernel<T, Max, false>>(O, R, I);
  });
}

} // namespace

void registerReductionKernels(KernelRegistry &r) {
  r.add("reduce_sum", reduceFactory<SumR>());
  r.add("reduce_mean", reduceFactory<MeanR>());
  r.add("reduce_max", reduceFactory<MaxR>());
  r.add("reduce_min", reduceFactory<MinR>());
  r.add("reduce_prod", reduceFactory<ProdR>());
  r.add("reduce_sum_square", reduceFactory<SumSquareR>());
  r.add("argmax", makeArgReduce<true>);
  r.add("argmin", makeArgReduce<false>);
}

} // namespace kiln::rt::cpu
