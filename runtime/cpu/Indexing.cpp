//===- Indexing.cpp - topk, cumsum and the scatter kernels -------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Kernels that select, scan or write along an axis by index:
//  - topk (k, axis, largest, sorted): the k largest (smallest) elements of
//    each line along `axis`, largest first, with i64 indices; equal elements
//    keep index order and NaN is larger than every number (ONNX TopK). Every
//    numeric type. Lines are independent (parallel).
//  - cumsum (axis, exclusive, reverse): a running sum per line, in double
//    for float types, wrapping for integers.
//  - scatter_elements (axis, reduction): the data with each update written
//    (or combined: add, mul, max, min) at its index along `axis`, in index
//    order; gather_elements_grad: zeros with dy added at the indices (the
//    gradient of gather_elements and of topk's values);
//  - scatter_nd (reduction): the data with the slice at each index tuple
//    replaced (or combined) by its update, in index order.
// An index out of range is an Error naming the op, checked before anything
// is written. The scatters run serially: repeated indices combine in order.
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "Loops.h"
#include "ShapeCheck.h"

#include <memory>
#include <numeric>

namespace kiln::rt::cpu {
namespace {

using namespace loops;

void expectIO(const KernelSpec &spec, size_t nin, size_t nout) {
  if (spec.inputs.size() != nin || spec.outputs.size() != nout)
    throw Error("kernel '" + spec.kernel + "' takes " + std::to_string(nin) +
                " operands and " + std::to_string(nout) + " results, got " +
                std::to_string(spec.inputs.size()) + " and " +
                std::to_string(spec.outputs.size()));
  for (const TensorDesc *d : spec.inputs)
    if (!d)
      throw Error("kernel '" + spec.kernel + "' is missing an operand");
  for (const TensorDesc *d : spec.outputs)
    if (!d)
      throw Error("kernel '" + spec.kernel + "' is missing a result");
}

void expectDesc(const KernelSpec &spec, const TensorDesc &got, const TensorDesc &want,
                const char *what) {
  if (got.dtype != want.dtype || got.shape != want.shape)
    throw Error("kernel '" + spec.kernel + "' " + what + " is " + got.str() +
                ", expected " + want.str());
}

void expectIndexType(const KernelSpec &spec, const TensorDesc &ids) {
  if (ids.dtype != DType::I32 && ids.dtype != DType::I64)
    throw Error("kernel '" + spec.kernel + "' indices must be i32 or i64, got " +
                ids.str());
}

/// [outer, axis, inner] of `shape` around `axis`.
void lines(const std::vector<int64_t> &shape, int64_t axis, int64_t &O, int64_t &A,
           int64_t &I) {
  O = 1, I = 1, A = shape[axis];
  for (int64_t d = 0; d < axis; ++d)
    O *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d)
    I *= shape[d];
}

int64_t indexAt(DType t, const void *p, int64_t i) {
  return t == DType::I64 ? static_cast<const int64_t *>(p)[i]
                         : static_cast<const int32_t *>(p)[i];
}

//===----------------------------------------------------------------------===//
// topk
//===----------------------------------------------------------------------===//

template <typename T, bool Largest> class TopKKernel final : public Kernel {
  using C = Calc<T>;

public:
  TopKKernel(int64_t O, int64_t A, int64_t I, int64_t k) : O_(O), A_(A), I_(I), k_(k) {}
  void run(ExecContext &, const void *const *in, void *const *out) override {
    const T *x = static_cast<const T *>(in[0]);
    T *v = static_cast<T *>(out[0]);
    int64_t *ix = static_cast<int64_t *>(out[1]);
    const int64_t O = O_, A = A_, I = I_, k = k_;
    parallelRange(O * I, O * I * A, [&](int64_t b, int64_t e) {
      std::vector<int64_t> order(A);
      for (int64_t u = b; u < e; ++u) {
        int64_t o = u / I, i = u % I;
        const T *line = x + o * A * I + i;
        auto before = [&](int64_t p, int64_t q) {
          C a = load(line, p * I), c = load(line, q * I);
          if constexpr (std::is_floating_point_v<C>) {
            bool an = a != a, cn = c != c;
            if (an || cn)
              return an && !cn ? Largest : (!an && cn ? !Largest : p < q);
          }
          if (a == c)
            return p < q;
          return Largest ? a > c : a < c;
        };
        std::iota(order.begin(), order.end(), int64_t(0));
        std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
        for (int64_t j = 0; j < k; ++j) {
          int64_t at = o * k * I + j * I + i;
          v[at] = line[order[j] * I];
          ix[at] = order[j];
        }
      }
    });
  }

private:
  int64_t O_, A_, I_, k_;
};

std::unique_ptr<Kernel> makeTopK(const KernelSpec &spec) {
  expectIO(spec, 1, 2);
  const TensorDesc &in = *spec.inputs[0];
  int64_t axis = spec.attrs.getInt("axis"), k = spec.attrs.getInt("k");
  std::vector<int64_t> shape;
  checkRule(spec, shape::topkShape(in.shape, k, axis, shape));
  expectDesc(spec, *spec.outputs[0], TensorDesc{in.dtype, shape}, "values");
  expectDesc(spec, *spec.outputs[1], TensorDesc{DType::I64, shape}, "indices");
  if (in.dtype == DType::Bool)
    throw Error("kernel 'topk' does not take " + in.str());
  int64_t O, A, I;
  lines(in.shape, axis, O, A, I);
  bool largest = spec.attrs.getBool("largest", true);
  return dispatchType(in.dtype, [&](auto tag) -> std::unique_ptr<Kernel> {
    using T = decltype(tag);
    if constexpr (kIsBool<T>)
      return nullptr;
    else if (largest)
      return std::make_unique<TopKKernel<T, true>>(O, A, I, k);
    else
      return std::make_unique<TopKKernel<T, false>>(O, A, I, k);
  });
}

//===----------------------------------------------------------------------===//
// cumsum
//===----------------------------------------------------------------------===//

template <typename T> class CumSumKernel final : public Kernel {
  using Acc = std::conditional_t<kIsFloat<T>, double, Calc<T>>;

public:
  CumSumKernel(int64_t O, int64_t A, int64_t I, bool exclusive, bool reverse)
      : O_(O), A_(A), I_(I), exclusive_(exclusive), reverse_(reverse) {}
  void run(ExecContext &, const void *const *in, void *const *out) override {
    const T *x = static_cast<const T *>(in[0]);
    T *y = static_cast<T *>(out[0]);
    const int64_t O = O_, A = A_, I = I_;
    parallelRange(O * I, O * I * A, [&](int64_t b, int64_t e) {
      for (int64_t u = b; u < e; ++u) {
        int64_t base = (u / I) * A * I + u % I;
        Acc s = Acc(0);
        for (int64_t j = 0; j < A; ++j) {
          int64_t at = base + (reverse_ ? A - 1 - j : j) * I;
          Acc v = static_cast<Acc>(load(x, at));
          if (!exclusive_)
            s = add(s, v);
          store(y, at, static_cast<Calc<T>>(s));
          if (exclusive_)
            s = add(s, v);
        }
      }
    });
  }

private:
  static Acc add(Acc a, Acc b) {
    if constexpr (std::is_integral_v<Acc>)
      return wrapAdd(a, b);
    else
      return a + b;
  }
  int64_t O_, A_, I_;
  bool exclusive_, reverse_;
};

std::unique_ptr<Kernel> makeCumSum(const KernelSpec &spec) {
  expectIO(spec, 1, 1);
  const TensorDesc &in = *spec.inputs[0];
  int64_t axis = spec.attrs.getInt("axis");
  checkRule(spec, shape::checkAxis(axis, in.rank()));
  expectDesc(spec, *spec.outputs[0], in, "result");
  if (in.dtype == DType::Bool)
    throw Error("kernel 'cumsum' does not take " + in.str());
  int64_t O, A, I;
  lines(in.shape, axis, O, A, I);
  bool ex = spec.attrs.getBool("exclusive", false), rev = spec.attrs.getBool("reverse", false);
  return dispatchType(in.dtype, [&](auto tag) -> std::unique_ptr<Kernel> {
    using T = decltype(tag);
    if constexpr (kIsBool<T>)
      return nullptr;
    else
      return std::make_unique<CumSumKernel<T>>(O, A, I, ex, rev);
  });
}

//===----------------------------------------------------------------------===//
// scatter_elements, gather_elements_grad, scatter_nd
//===----------------------------------------------------------------------===//

enum class Combine { None, Add, Mul, Max, Min };

Combine combineOf(const KernelSpec &spec) {
  std::string r = spec.attrs.getString("reduction", "none");
  checkRule(spec, shape::checkScatterReduction(r));
  return r == "add"   ? Combine::Add
         : r == "mul" ? Combine::Mul
         : r == "max" ? Combine::Max
         : r == "min" ? Combine::Min
                      : Combine::None;
}

template <typename T> void combineInto(T *y, int64_t at, const T *u, int64_t from, Combine c) {
  if (c == Combine::None) {
    y[at] = u[from];
    return;
  }
  Calc<T> a = load(y, at), b = load(u, from);
  if constexpr (kIsBool<T>) {
    store(y, at, c == Combine::Add || c == Combine::Max ? (a || b) : (a && b));
  } else if constexpr (std::is_integral_v<Calc<T>>) {
    store(y, at, c == Combine::Add   ? wrapAdd(a, b)
                 : c == Combine::Mul ? wrapMul(a, b)
                 : c == Combine::Max ? std::max(a, b)
                                     : std::min(a, b));
  } else {
    store(y, at, c == Combine::Add   ? a + b
                 : c == Combine::Mul ? a * b
                 : c == Combine::Max ? (a != a || b != b ? a + b : std::max(a, b))
                                     : (a != a || b != b ? a + b : std::min(a, b)));
  }
}

/// Walks the indices of a gather/scatter along `axis` (indices of the data's
/// rank, no larger off the axis): for element j of the indices, the offset
/// in the data of its target. Checks every index first.
struct ElementTargets {
  std::vector<int64_t> idxShape, dataStrides;
  int64_t axis = 0, axisDim = 0;

  void compute(const KernelSpec &spec, DType t, const void *ids,
               std::vector<int64_t> &targets) const {
    int64_t n = 1;
    for (int64_t d : idxShape)
      n *= d;
    targets.resize(n);
    std::vector<int64_t> pos(idxShape.size(), 0);
    for (int64_t j = 0; j < n; ++j) {
      int64_t v = indexAt(t, ids, j);
      if (v < -axisDim || v >= axisDim)
        throw Error(spec.kernel + " index " + std::to_string(v) +
                    " is out of range for axis " + std::to_string(axis) + " of size " +
                    std::to_string(axisDim));
      if (v < 0)
        v += axisDim;
      int64_t off = 0;
      for (size_t d = 0; d < pos.size(); ++d)
        off += ((int64_t)d == axis ? v : pos[d]) * dataStrides[d];
      targets[j] = off;
      for (int64_t d = (int64_t)pos.size() - 1; d >= 0; --d) {
        if (++pos[d] < idxShape[d])
          break;
        pos[d] = 0;
      }
    }
  }
};

ElementTargets elementTargets(const KernelSpec &spec, const TensorDesc &data,
                              const TensorDesc &ids, int64_t axis) {
  std::vector<int64_t> unused;
  checkRule(spec, shape::gatherElementsShape(data.shape, ids.shape, axis, unused));
  ElementTargets t;
  t.idxShape = ids.shape;
  t.axis = axis;
  t.axisDim = data.shape[axis];
  t.dataStrides.assign(data.rank(), 1);
  for (int64_t d = data.rank() - 2; d >= 0; --d)
    t.dataStrides[d] = t.dataStrides[d + 1] * data.shape[d + 1];
  return t;
}

/// scatter_elements (data, indices, updates) and gather_elements_grad (dy,
/// indices): the first copies the data and combines, the second zeroes and
/// adds.
template <typename T> class ScatterElementsKernel final : public Kernel {
public:
  ScatterElementsKernel(ElementTargets t, DType idxType, int64_t outNumel, bool fromZero,
                        Combine c, KernelSpec spec)
      : t_(std::move(t)), idxType_(idxType), n_(outNumel), fromZero_(fromZero), c_(c),
        spec_(std::move(spec)) {}
  void run(ExecContext &, const void *const *in, void *const *out) override {
    T *y = static_cast<T *>(out[0]);
    const void *ids = in[1];
    const T *u = static_cast<const T *>(in[fromZero_ ? 0 : 2]);
    t_.compute(spec_, idxType_, ids, targets_);
    if (fromZero_)
      std::memset(static_cast<void *>(y), 0, sizeof(T) * n_);
    else if (static_cast<const void *>(y) != in[0])
      std::memcpy(static_cast<void *>(y), in[0], sizeof(T) * n_);
    for (size_t j = 0; j < targets_.size(); ++j)
      combineInto(y, targets_[j], u, (int64_t)j, c_);
  }

private:
  ElementTargets t_;
  DType idxType_;
  int64_t n_;
  bool fromZero_;
  Combine c_;
  KernelSpec spec_;
  std::vector<int64_t> targets_;
};

std::unique_ptr<Kernel> makeScatterElements(const KernelSpec &spec) {
  expectIO(spec, 3, 1);
  const TensorDesc &data = *spec.inputs[0], &ids = *spec.inputs[1], &upd = *spec.inputs[2];
  expectIndexType(spec, ids);
  int64_t axis = spec.attrs.getInt("axis");
  checkRule(spec, shape::scatterElementsShape(data.shape, ids.shape, upd.shape, axis));
  expectDesc(spec, upd, TensorDesc{data.dtype, upd.shape}, "updates");
  expectDesc(spec, *spec.outputs[0], data, "result");
  Combine c = combineOf(spec);
  ElementTargets t = elementTargets(spec, data, ids, axis);
  return dispatchType(data.dtype, [&](auto tag) -> std::unique_ptr<Kernel> {
    using T = decltype(tag);
    return std::make_unique<ScatterElementsKernel<T>>(t, ids.dtype, data.numel(), false, c,
                                                      spec);
  });
}

std::unique_ptr<Kernel> makeGatherElementsGrad(const KernelSpec &spec) {
  expectIO(spec, 2, 1);
  const TensorDesc &dy = *spec.inputs[0], &ids = *spec.inputs[1], &out = *spec.outputs[0];
  expectIndexType(spec, ids);
  int64_t axis = spec.attrs.getInt("axis");
  checkRule(spec, shape::checkAxis(axis, out.rank()));
  ElementTargets t = elementTargets(spec, out, ids, axis);
  expectDesc(spec, dy, TensorDesc{out.dtype, ids.shape}, "dy");
  if (!isFloat(out.dtype))
    throw Error("kernel 'gather_elements_grad' needs a float type, got " + out.str());
  return dispatchType(out.dtype, [&](auto tag) -> std::unique_ptr<Kernel> {
    using T = decltype(tag);
    return std::make_unique<ScatterElementsKernel<T>>(t, ids.dtype, out.numel(), true,
                                                      Combine::Add, spec);
  });
}

template <typename T> class ScatterNDKernel final : public Kernel {
public:
  ScatterNDKernel(std::vector<int64_t> dataShape, int64_t tuples, int64_t q, int64_t slice,
                  Combine c, KernelSpec spec)
      : shape_(std::move(dataShape)), tuples_(tuples), q_(q), slice_(slice), c_(c),
        spec_(std::move(spec)) {}
  void run(ExecContext &, const void *const *in, void *const *out) override {
    T *y = static_cast<T *>(out[0]);
    const int64_t *ids = static_cast<const int64_t *>(in[1]);
    const T *u = static_cast<const T *>(in[2]);
    int64_t n = slice_;
    for (int64_t d = 0; d < (int64_t)shape_.size(); ++d)
      n *= d < q_ ? shape_[d] : 1;
    std::vector<int64_t> offs(tuples_);
    for (int64_t j = 0; j < tuples_; ++j) {
      int64_t off = 0;
      for (int64_t d = 0; d < q_; ++d) {
        int64_t v = ids[j * q_ + d], dim = shape_[d];
        if (v < -dim || v >= dim)
          throw Error("scatter_nd index " + std::to_string(v) + " is out of range for "
                      "dimension " + std::to_string(d) + " of size " + std::to_string(dim));
        off = off * dim + (v < 0 ? v + dim : v);
      }
      offs[j] = off * slice_;
    }
    if (static_cast<const void *>(y) != in[0])
      std::memcpy(static_cast<void *>(y), in[0], sizeof(T) * n);
    for (int64_t j = 0; j < tuples_; ++j)
      for (int64_t e = 0; e < slice_; ++e)
        combineInto(y, offs[j] + e, u, j * slice_ + e, c_);
  }

private:
  std::vector<int64_t> shape_;
  int64_t tuples_, q_, slice_;
  Combine c_;
  KernelSpec spec_;
};

std::unique_ptr<Kernel> makeScatterND(const KernelSpec &spec) {
  expectIO(spec, 3, 1);
  const TensorDesc &data = *spec.inputs[0], &ids = *spec.inputs[1], &upd = *spec.inputs[2];
  if (ids.dtype != DType::I64)
    throw Error("kernel 'scatter_nd' indices must be i64, got " + ids.str());
  checkRule(spec, shape::scatterNDShape(data.shape, ids.shape, upd.shape));
  expectDesc(spec, upd, TensorDesc{data.dtype, upd.shape}, "updates");
  expectDesc(spec, *spec.outputs[0], data, "result");
  Combine c = combineOf(spec);
  int64_t q = ids.shape.back(), tuples = 1, slice = 1;
  for (size_t d = 0; d + 1 < ids.shape.size(); ++d)
    tuples *= ids.shape[d];
  for (size_t d = q; d < data.shape.size(); ++d)
    slice *= data.shape[d];
  return dispatchType(data.dtype, [&](auto tag) -> std::unique_ptr<Kernel> {
    using T = decltype(tag);
    return std::make_unique<ScatterNDKernel<T>>(data.shape, tuples, q, slice, c, spec);
  });
}

} // namespace

void registerIndexingKernels(KernelRegistry &r) {
  r.add("topk", makeTopK);
  r.add("cumsum", makeCumSum);
  r.add("scatter_elements", makeScatterElements);
  r.add("gather_elements_grad", makeGatherElementsGrad);
  r.add("scatter_nd", makeScatterND);
}

} // namespace kiln::rt::cpu
