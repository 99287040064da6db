//===- Shape.cpp - reshape, broadcast, transpose, slice, concat, pad, gather -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Data movement kernels. They only move elements, so they work on the
// element size (1, 2, 4 or 8 bytes) and take every dtype. broadcast,
// transpose and slice are strided copies through a loops::Walk (dims merged
// at factory time; innermost runs are memcpy, a fill or a strided gather).
// A transpose whose result's last dim is strided and second-to-last is
// contiguous in the input (2-D transposes, swaps of the last two dims) is
// done in cache-sized tiles. concat copies one contiguous chunk per input
// and outer row; pad maps each result index to a source index per dim
// (constant -> -1, edge: clamp, reflect: mirror) and copies row interiors
// with memcpy; gather validates (and wraps negative) indices serially, then
// copies rows in parallel.
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "Loops.h"
#include "ShapeCheck.h"

#include <memory>

namespace kiln::rt::cpu {
namespace {

using namespace loops;

void expectOperands(const KernelSpec &spec, size_t nin) {
  expectArity(spec, nin, 1);
  for (size_t i = 0; i < nin; ++i)
    if (!spec.inputs[i])
      throw Error("kernel '" + spec.kernel + "' is missing operand " +
                  std::to_string(i));
  if (!spec.outputs[0])
    throw Error("kernel '" + spec.kernel + "' is missing its result");
}

void expectSameType(const KernelSpec &spec, const TensorDesc &a,
                    const TensorDesc &b) {
  if (a.dtype != b.dtype)
    throw Error("kernel '" + spec.kernel + "' changes the element type: " +
                a.str() + " -> " + b.str());
}

void expectShape(const KernelSpec &spec, const TensorDesc &out,
                 const std::vector<int64_t> &want) {
  if (out.shape != want)
    throw Error("kernel '" + spec.kernel + "' result " + out.str() +
                " should have shape " + shapeStr(want));
}

//===----------------------------------------------------------------------===//
// Reshape
//===----------------------------------------------------------------------===//

class ReshapeKernel final : public Kernel {
public:
  explicit ReshapeKernel(size_t bytes) : bytes_(bytes) {}
  void run(ExecContext &, const void *const *in, void *const *out) override {
    if (in[0] != out[0] && bytes_)
      std::memcpy(out[0], in[0], bytes_);
  }

private:
  size_t bytes_;
};

std::unique_ptr<Kernel> makeReshape(const KernelSpec &spec) {
  expectOperands(spec, 1);
  const TensorDesc &in = *spec.inputs[0], &out = *spec.outputs[0];
  expectSameType(spec, in, out);
  if (in.numel() != out.numel())
    throw Error("cannot reshape " + in.str() + " to " + out.str());
  return std::make_unique<ReshapeKernel>(in.bytes());
}

//===----------------------------------------------------------------------===//
// Strided copies: broadcast, transpose, slice
//===----------------------------------------------------------------------===//

/// Operand 0 of the walk is the output (contiguous), operand 1 the input.
template <typename U> class CopyWalkKernel final : public Kernel {
public:
  explicit CopyWalkKernel(Walk w) : w_(std::move(w)) {}
  void run(ExecContext &, const void *const *in, void *const *out) override {
    const U *x = static_cast<const U *>(in[0]);
    U *y = static_cast<U *>(out[0]);
    const int64_t s = w_.inner(1);
    w_.parallelRuns([&](const int64_t *off, int64_t n) {
      const U *px = x + off[1];
      U *py = y + off[0];
      if (s == 1) {
        std::memcpy(py, px, (size_t)n * sizeof(U));
      } else if (s == 0) {
        U v = *px;
        for (int64_t i = 0; i < n; ++i)
          py[i] = v;
      } else {
        for (int64_t i = 0; i < n; ++i)
          py[i] = px[i * s];
      }
    });
  }

private:
  Walk w_;
};

std::unique_ptr<Kernel> copyWalk(DType t, Walk w) {
  return dispatchSize(t, [&](auto tag) -> std::unique_ptr<Kernel> {
    return std::make_unique<CopyWalkKernel<decltype(tag)>>(std::move(w));
  });
}

std::unique_ptr<Kernel> makeBroadcast(const KernelSpec &spec) {
  expectOperands(spec, 1);
  const TensorDesc &in = *spec.inputs[0], &out = *spec.outputs[0];
  expectSameType(spec, in, out);
  std::vector<int64_t> b;
  if (in.rank() > out.rank() ||
      !shape::broadcastShapes(in.shape, out.shape, b).empty() || b != out.shape)
    throw Error("cannot broadcast " + in.str() + " to " + out.str());
  Walk w(out.shape, {contiguousStrides(out.shape),
                     broadcastStrides(in.shape, out.shape)});
  return copyWalk(in.dtype, std::move(w));
}

/// A batch of [A, B] -> [B, A]-style tile transposes: output index (b, i, j)
/// at b-offset + i * B + j reads input b-offset + i + j * sj.
template <typename U> class TileTransposeKernel final : public Kernel {
public:
  static constexpr int64_t kT = 32;
  TileTransposeKernel(std::vector<int64_t> bdims, std::vector<int64_t> bout,
                      std::vector<int64_t> bin, int64_t rows, int64_t cols,
                      int64_t sj)
      : bdims_(std::move(bdims)), bout_(std::move(bout)), bin_(std::move(bin)),
        rows_(rows), cols_(cols), sj_(sj) {
    batches_ = 1;
    for (int64_t d : bdims_)
      batches_ *= d;
  }
  void run(ExecContext &, const void *const *in, void *const *out) override {
    const U *x = static_cast<const U *>(in[0]);
    U *y = static_cast<U *>(out[0]);
    const int64_t ti = (rows_ + kT - 1) / kT, tj = (cols_ + kT - 1) / kT;
    const int64_t units = batches_ * ti * tj;
    parallelRange(units, batches_ * rows_ * cols_, [&](int64_t b, int64_t e) {
      for (int64_t u = b; u < e; ++u) {
        int64_t bi = u / (ti * tj), t = u % (ti * tj);
        int64_t i0 = (t / tj) * kT, j0 = (t % tj) * kT;
        int64_t oo = 0, io = 0, rem = bi;
        for (int64_t d = (int64_t)bdims_.size() - 1; d >= 0; --d) {
          int64_t k = rem % bdims_[d];
          rem /= bdims_[d];
          oo += k * bout_[d];
          io += k * bin_[d];
        }
        int64_t ie = std::min(rows_, i0 + kT), je = std::min(cols_, j0 + kT);
        for (int64_t i = i0; i < ie; ++i) {
          U *py = y + oo + i * cols_;
          const U *px = x + io + i;
          for (int64_t j = j0; j < je; ++j)
            py[j] = px[j * sj_];
        }
      }
    });
  }

private:
  std::vector<int64_t> bdims_, bout_, bin_;
  int64_t rows_, cols_, sj_, batches_;
};

std::unique_ptr<Kernel> makeTranspose(const KernelSpec &spec) {
  expectOperands(spec, 1);
  const TensorDesc &in = *spec.inputs[0], &out = *spec.outputs[0];
  expectSameType(spec, in, out);
  std::vector<int64_t> perm = spec.attrs.getInts("perm");
  int64_t rank = in.rank();
  if ((int64_t)perm.size() != rank)
    throw Error("transpose perm has " + std::to_string(perm.size()) +
                " entries for rank " + std::to_string(rank));
  std::vector<bool> seen(rank, false);
  std::vector<int64_t> shape, istr, cs = contiguousStrides(in.shape);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p])
      throw Error("transpose perm " + shapeStr(perm) +
                  " is not a permutation of 0.." + std::to_string(rank - 1));
    seen[p] = true;
    shape.push_back(in.shape[p]);
    istr.push_back(cs[p]);
  }
  expectShape(spec, out, shape);
  Walk w(shape, {contiguousStrides(shape), istr});
  int r = w.rank();
  if (r >= 2 && w.inner(1) != 1 && w.stride(1, r - 2) == 1 &&
      w.numel() >= 1024) {
    std::vector<int64_t> bd, bo, bi;
    for (int i = 0; i < r - 2; ++i) {
      bd.push_back(w.dim(i));
      bo.push_back(w.stride(0, i));
      bi.push_back(w.stride(1, i));
    }
    int64_t rows = w.dim(r - 2), cols = w.dim(r - 1), sj = w.inner(1);
    return dispatchSize(in.dtype, [&](auto tag) -> std::unique_ptr<Kernel> {
      return std::make_unique<TileTransposeKernel<decltype(tag)>>(bd, bo, bi,
                                                                  rows, cols, sj);
    });
  }
  return copyWalk(in.dtype, std::move(w));
}

std::unique_ptr<Kernel> makeSlice(const KernelSpec &spec) {
  expectOperands(spec, 1);
  const TensorDesc &in = *spec.inputs[0], &out = *spec.outputs[0];
  expectSameType(spec, in, out);
  std::vector<int64_t> starts = spec.attrs.getInts("starts"),
                       limits = spec.attrs.getInts("limits"),
                       strides = spec.attrs.getInts("strides");
  size_t rank = in.shape.size();
  if (starts.size() != rank || limits.size() != rank || strides.size() != rank)
    throw Error("slice starts, limits and strides need " + std::to_string(rank) +
                " entries each");
  std::vector<int64_t> shape, istr, cs = contiguousStrides(in.shape);
  int64_t base = 0;
  for (size_t i = 0; i < rank; ++i) {
    int64_t s = starts[i], l = limits[i], st = strides[i], d = in.shape[i];
    if (st == 0)
      throw Error("slice stride of dim " + std::to_string(i) + " is 0");
    if (st > 0 ? (s < 0 || s > d || l < 0 || l > d)
               : (s < 0 || s >= std::max<int64_t>(d, 1) || l < -1 || l >= d))
      throw Error("slice bounds [" + std::to_string(s) + ", " +
                  std::to_string(l) + ") of dim " + std::to_string(i) +
                  " are out of range for size " + std::to_string(d));
    // Overflow-free counts: |st| may be huge.
    uint64_t mag = st > 0 ? (uint64_t)st : 0 - (uint64_t)st;
    int64_t span = st > 0 ? l - s : s - l;
    int64_t n = span > 0 ? (int64_t)((uint64_t)(span - 1) / mag) + 1 : 0;
    shape.push_back(n);
    istr.push_back(n > 1 ? st * cs[i] : cs[i]);
    base += (n > 0 ? s : 0) * cs[i];
  }
  expectShape(spec, out, shape);
  Walk w(shape, {contiguousStrides(shape), istr}, {0, base});
  return copyWalk(in.dtype, std::move(w));
}

//===----------------------------------------------------------------------===//
// Concat
//===----------------------------------------------------------------------===//

class ConcatKernel final : public Kernel {
public:
  ConcatKernel(int64_t outer, std::vector<size_t> chunks)
      : outer_(outer), chunks_(std::move(chunks)) {
    row_ = 0;
    for (size_t c : chunks_)
      row_ += c;
  }
  void run(ExecContext &, const void *const *in, void *const *out) override {
    uint8_t *y = static_cast<uint8_t *>(out[0]);
    const size_t n = chunks_.size();
    parallelRange(outer_, outer_ * (int64_t)row_ / 4, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        uint8_t *py = y + (size_t)o * row_;
        for (size_t i = 0; i < n; ++i) {
          size_t c = chunks_[i];
          if (c)
            std::memcpy(py, static_cast<const uint8_t *>(in[i]) + (size_t)o * c, c);
          py += c;
        }
      }
    });
  }

private:
  int64_t outer_;
  std::vector<size_t> chunks_;
  size_t row_;
};

std::unique_ptr<Kernel> makeConcat(const KernelSpec &spec) {
  if (spec.inputs.empty() || spec.outputs.size() != 1 || !spec.outputs[0])
    throw Error("kernel 'concat' takes at least one input and one output");
  for (size_t i = 0; i < spec.inputs.size(); ++i)
    if (!spec.inputs[i])
      throw Error("kernel 'concat' is missing operand " + std::to_string(i));
  const TensorDesc &first = *spec.inputs[0], &out = *spec.outputs[0];
  int64_t rank = first.rank();
  int64_t axis = spec.attrs.getInt("axis");
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis >= rank)
    throw Error("concat axis " + std::to_string(spec.attrs.getInt("axis")) +
                " is out of range for rank " + std::to_string(rank));
  std::vector<int64_t> shape = first.shape;
  shape[axis] = 0;
  for (const TensorDesc *d : spec.inputs) {
    if (d->dtype != first.dtype || d->rank() != rank)
      throw Error("concat inputs differ in element type or rank: " + first.str() +
                  " and " + d->str());
    for (int64_t i = 0; i < rank; ++i)
      if (i != axis && d->shape[i] != first.shape[i])
        throw Error("concat inputs differ in dim " + std::to_string(i) + ": " +
                    first.str() + " and " + d->str());
    shape[axis] += d->shape[axis];
  }
  expectSameType(spec, first, out);
  expectShape(spec, out, shape);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= shape[i];
  for (int64_t i = axis + 1; i < rank; ++i)
    inner *= shape[i];
  std::vector<size_t> chunks;
  for (const TensorDesc *d : spec.inputs)
    chunks.push_back((size_t)(d->shape[axis] * inner) * dtypeSize(first.dtype));
  return std::make_unique<ConcatKernel>(outer, std::move(chunks));
}

//===----------------------------------------------------------------------===//
// Pad
//===----------------------------------------------------------------------===//

template <typename U> class PadKernel final : public Kernel {
public:
  PadKernel(std::vector<int64_t> outShape, std::vector<int64_t> inStrides,
            std::vector<std::vector<int64_t>> maps, U value)
      : out_(std::move(outShape)), istr_(std::move(inStrides)),
        maps_(std::move(maps)), value_(value) {
    rows_ = 1;
    for (size_t i = 0; i + 1 < out_.size(); ++i)
      rows_ *= out_[i];
    if (!out_.empty()) {
      // The interior of the last dim: where the map is j - low, contiguous.
      const std::vector<int64_t> &m = maps_.back();
      int64_t n = out_.back();
      jb_ = 0;
      while (jb_ < n && !(m[jb_] >= 0 && (jb_ + 1 >= n || m[jb_ + 1] == m[jb_] + 1)))
        ++jb_;
      je_ = jb_;
      while (je_ < n && m[je_] >= 0 && m[je_] == m[jb_] + (je_ - jb_))
        ++je_;
    }
  }

  void run(ExecContext &, const void *const *in, void *const *out) override {
    const U *x = static_cast<const U *>(in[0]);
    U *y = static_cast<U *>(out[0]);
    if (out_.empty()) {
      y[0] = x[0];
      return;
    }
    const int64_t n = out_.back(), r = (int64_t)out_.size();
    const U v = value_;
    const int64_t *ml = maps_.back().data();
    parallelRange(rows_, rows_ * n, [&](int64_t b, int64_t e) {
      for (int64_t row = b; row < e; ++row) {
        U *py = y + row * n;
        int64_t rem = row, src = 0;
        bool fill = false;
        for (int64_t d = r - 2; d >= 0; --d) {
          int64_t k = rem % out_[d];
          rem /= out_[d];
          int64_t m = maps_[d][k];
          if (m < 0)
            fill = true;
          src += m * istr_[d];
        }
        if (fill) {
          for (int64_t j = 0; j < n; ++j)
            py[j] = v;
          continue;
        }
        const U *px = x + src;
        for (int64_t j = 0; j < jb_; ++j)
          py[j] = ml[j] < 0 ? v : px[ml[j]];
        if (je_ > jb_)
          std::memcpy(py + jb_, px + ml[jb_], (size_t)(je_ - jb_) * sizeof(U));
        for (int64_t j = je_; j < n; ++j)
          py[j] = ml[j] < 0 ? v : px[ml[j]];
      }
    });
  }

private:
  std::vector<int64_t> out_, istr_;
  std::vector<std::vector<int64_t>> maps_;
  U value_;
  int64_t rows_ = 1, jb_ = 0, je_ = 0;
};

std::unique_ptr<Kernel> makePad(const KernelSpec &spec) {
  expectOperands(spec, 1);
  const TensorDesc &in = *spec.inputs[0], &out = *spec.outputs[0];
  expectSameType(spec, in, out);
  std::vector<int64_t> low = spec.attrs.getInts("low"),
                       high = spec.attrs.getInts("high");
  std::string mode = spec.attrs.getString("mode", "constant");
  double value = spec.attrs.getFloat("value", 0.0);
  size_t rank = in.shape.size();
  if (low.size() != rank || high.size() != rank)
    throw Error("pad low and high need " + std::to_string(rank) + " entries each");
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    throw Error("pad mode must be constant, reflect or edge, got '" + mode + "'");
  std::vector<int64_t> shape;
  for (size_t i = 0; i < rank; ++i) {
    int64_t d = in.shape[i], lo = low[i], hi = high[i];
    const int64_t big = int64_t(1) << 40;
    if (lo < -big || lo > big || hi < -big || hi > big)
      throw Error("pad of dim " + std::to_string(i) + " is too large");
    int64_t n = d + lo + hi;
    if (n < 0)
      throw Error("pad gives a negative size in dim " + std::to_string(i));
    if (mode == "reflect" && (lo >= d || hi >= d))
      throw Error("reflect padding of dim " + std::to_string(i) +
                  " must be smaller than its size " + std::to_string(d));
    if (mode == "edge" && d == 0 && n > 0)
      throw Error("edge padding of the empty dim " + std::to_string(i));
    shape.push_back(n);
  }
  // Before the maps, whose sizes come from the attributes: a pad of 2^40
  // is refused by the result's shape, not allocated (issue 21, fuzzing).
  expectShape(spec, out, shape);
  std::vector<std::vector<int64_t>> maps;
  for (size_t i = 0; i < rank; ++i) {
    int64_t d = in.shape[i], lo = low[i], n = shape[i];
    std::vector<int64_t> m(n);
    for (int64_t j = 0; j < n; ++j) {
      int64_t p = j - lo;
      if (mode == "constant") {
        m[j] = (p >= 0 && p < d) ? p : -1;
      } else if (mode == "edge") {
        m[j] = std::clamp<int64_t>(p, 0, d - 1);
      } else {
        while (p < 0 || p >= d) // |p| < 2d: at most two steps
          p = p < 0 ? -p : 2 * (d - 1) - p;
        m[j] = p;
      }
    }
    maps.push_back(std::move(m));
  }
  // The pad value in the element type, as its bytes.
  uint64_t bits = 0;
  dispatchType(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    T v;
    store(&v, 0, castValue<T>(value));
    std::memcpy(&bits, &v, sizeof(T));
    return 0;
  });
  std::vector<int64_t> istr = contiguousStrides(in.shape);
  return dispatchSize(in.dtype, [&](auto tag) -> std::unique_ptr<Kernel> {
    using U = decltype(tag);
    U v;
    std::memcpy(&v, &bits, sizeof(U));
    return std::make_unique<PadKernel<U>>(shape, istr, maps, v);
  });
}

//===----------------------------------------------------------------------===//
// Gather
//===----------------------------------------------------------------------===//

/// With `split` (the input split on the gathered axis over those mesh
/// axes, `whole` its whole size): this rank holds rows [r A, (r + 1) A) of
/// the whole; indices count in the whole, and the rows it does not hold
/// are zero (-1 in idx_).
template <typename U, typename Idx> class GatherKernel final : public Kernel {
public:
  GatherKernel(int64_t outer, int64_t axisDim, int64_t n, int64_t inner,
               int64_t axis, std::string split, int64_t whole)
      : O_(outer), A_(axisDim), N_(n), I_(inner), axis_(axis), idx_(n),
        split_(std::move(split)), whole_(whole) {}
  void run(ExecContext &ctx, const void *const *in, void *const *out) override {
    const U *x = static_cast<const U *>(in[0]);
    const Idx *ids = static_cast<const Idx *>(in[1]);
    U *y = static_cast<U *>(out[0]);
    int64_t W = A_, first = 0;
    if (!split_.empty()) {
      int64_t ranks = ctx.collectives ? ctx.collectives->groupSize(split_) : 1;
      int64_t r = ctx.collectives ? ctx.collectives->groupRank(split_) : 0;
      if (ctx.collectives && ranks * A_ != whole_)
        throw Error("gather: axis " + std::to_string(axis_) + " holds " +
                    std::to_string(A_) + " of " + std::to_string(whole_) +
                    " rows, but mesh axis '" + split_ + "' has " +
                    std::to_string(ranks) + " ranks");
      if (ctx.collectives) {
        W = whole_;
        first = r * A_;
      }
    }
    for (int64_t j = 0; j < N_; ++j) {
      int64_t v = (int64_t)ids[j];
      int64_t w = v < 0 ? v + W : v;
      if (w < 0 || w >= W)
        throw Error("gather index " + std::to_string(v) +
                    " is out of range for axis " + std::to_string(axis_) +
                    " of size " + std::to_string(W));
      w -= first;
      idx_[j] = w >= 0 && w < A_ ? w : -1;
    }
    const int64_t *idx = idx_.data();
    const int64_t N = N_, I = I_, A = A_;
    parallelRange(O_ * N, O_ * N * I, [&](int64_t b, int64_t e) {
      for (int64_t u = b; u < e; ++u) {
        int64_t o = u / N, j = u % N;
        U *py = y + u * I;
        if (idx[j] < 0) {
          std::memset(py, 0, (size_t)I * sizeof(U));
          continue;
        }
        const U *px = x + (o * A + idx[j]) * I;
        if (I == 1)
          *py = *px;
        else
          std::memcpy(py, px, (size_t)I * sizeof(U));
      }
    });
  }

private:
  int64_t O_, A_, N_, I_, axis_;
  std::vector<int64_t> idx_;
  std::string split_;
  int64_t whole_;
};

std::unique_ptr<Kernel> makeGather(const KernelSpec &spec) {
  expectOperands(spec, 2);
  const TensorDesc &in = *spec.inputs[0], &ids = *spec.inputs[1],
                   &out = *spec.outputs[0];
  expectSameType(spec, in, out);
  if (ids.dtype != DType::I32 && ids.dtype != DType::I64)
    throw Error("gather indices must be i32 or i64, got " + ids.str());
  int64_t rank = in.rank();
  int64_t axis = spec.attrs.getInt("axis");
  std::vector<int64_t> want;
  checkRule(spec, shape::normalizeAxis(axis, rank));
  checkRule(spec, shape::gatherShape(in.shape, ids.shape, axis, want));
  expectShape(spec, out, want);
  int64_t O = 1, I = 1;
  for (int64_t i = 0; i < axis; ++i)
    O *= in.shape[i];
  for (int64_t i = axis + 1; i < rank; ++i)
    I *= in.shape[i];
  int64_t A = in.shape[axis], N = ids.numel();
  std::string split = spec.attrs.getString("split", "");
  int64_t whole = spec.attrs.getInt("whole_size", A);
  if (!split.empty() && (A < 1 || whole < A || whole % A))
    throw Error("gather: whole_size " + std::to_string(whole) +
                " is not a whole number of the input's " + std::to_string(A) +
                " rows on axis " + std::to_string(axis));
  return dispatchSize(in.dtype, [&](auto tag) -> std::unique_ptr<Kernel> {
    using U = decltype(tag);
    if (ids.dtype == DType::I32)
      return std::make_unique<GatherKernel<U, int32_t>>(O, A, N, I, axis, split, whole);
    return std::make_unique<GatherKernel<U, int64_t>>(O, A, N, I, axis, split, whole);
  });
}

//===----------------------------------------------------------------------===//
// GatherElements
//===----------------------------------------------------------------------===//

/// Walks the indices' shape: operand 0 is the result and the indices (both
/// contiguous in that shape), operand 1 the input with stride 0 on `axis`;
/// each element then adds index * the axis stride.
template <typename U, typename Idx> class GatherElementsKernel final : public Kernel {
public:
  GatherElementsKernel(Walk w, int64_t n, int64_t axisDim, int64_t axisStride,
                       int64_t axis)
      : w_(std::move(w)), n_(n), A_(axisDim), S_(axisStride), axis_(axis) {}
  void run(ExecContext &, const void *const *in, void *const *out) override {
    const U *x = static_cast<const U *>(in[0]);
    const Idx *ids = static_cast<const Idx *>(in[1]);
    U *y = static_cast<U *>(out[0]);
    for (int64_t j = 0; j < n_; ++j) {
      int64_t v = (int64_t)ids[j];
      if (v < -A_ || v >= A_)
        throw Error("gather_elements index " + std::to_string(v) +
                    " is out of range for axis " + std::to_string(axis_) +
                    " of size " + std::to_string(A_));
    }
    const int64_t s = w_.inner(1), A = A_, S = S_;
    w_.parallelRuns([&](const int64_t *off, int64_t n) {
      const Idx *pi = ids + off[0];
      const U *px = x + off[1];
      U *py = y + off[0];
      for (int64_t i = 0; i < n; ++i) {
        int64_t v = (int64_t)pi[i];
        py[i] = px[i * s + (v < 0 ? v + A : v) * S];
      }
    });
  }

private:
  Walk w_;
  int64_t n_, A_, S_, axis_;
};

std::unique_ptr<Kernel> makeGatherElements(const KernelSpec &spec) {
  expectOperands(spec, 2);
  const TensorDesc &in = *spec.inputs[0], &ids = *spec.inputs[1],
                   &out = *spec.outputs[0];
  expectSameType(spec, in, out);
  if (ids.dtype != DType::I32 && ids.dtype != DType::I64)
    throw Error("gather_elements indices must be i32 or i64, got " + ids.str());
  int64_t rank = in.rank();
  int64_t axis = spec.attrs.getInt("axis");
  std::vector<int64_t> want;
  checkRule(spec, shape::normalizeAxis(axis, rank));
  checkRule(spec, shape::gatherElementsShape(in.shape, ids.shape, axis, want));
  expectShape(spec, out, want);
  std::vector<int64_t> xs = contiguousStrides(in.shape), ys = contiguousStrides(ids.shape);
  int64_t axisStride = xs[axis], axisDim = in.shape[axis];
  xs[axis] = 0;
  Walk w(ids.shape, {ys, xs});
  int64_t n = ids.numel();
  if (axisDim == 0 && n > 0)
    throw Error("gather_elements: axis " + std::to_string(axis) + " of " +
                in.str() + " is empty");
  return dispatchSize(in.dtype, [&](auto tag) -> std::unique_ptr<Kernel> {
    using U = decltype(tag);
    if (ids.dtype == DType::I32)
      return std::make_unique<GatherElementsKernel<U, int32_t>>(std::move(w), n, axisDim,
                                                                axisStride, axis);
    return std::make_unique<GatherElementsKernel<U, int64_t>>(std::move(w), n, axisDim,
                                                              axisStride, axis);
  });
}

} // namespace

void registerShapeKernels(KernelRegistry &r) {
  r.add("reshape", makeReshape);
  r.add("broadcast", makeBroadcast);
  r.add("transpose", makeTranspose);
  r.add("slice", makeSlice);
  r.add("concat", makeConcat);
  r.add("pad", makePad);
  r.add("gather", makeGather);
  r.add("gather_elements", makeGatherElements);
}

} // namespace kiln::rt::cpu
