//===- ShapeRules.h - shape and window geometry rules, once -----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The shape rules that the kiln ops' type inference (lib/Dialect/Kiln/IR)
// and every target's kernel factories (runtime/cpu, later runtime/cuda)
// must agree on, written once: NumPy broadcasting, the result shape of a
// reduction, of gather and of gather_elements, and the geometry of a
// convolution, transposed convolution or pooling window (one struct, one
// convention for the spatial arrays, the output-size formulas, and the dims
// a oneDNN/cuDNN descriptor wants).
//
// Header-only, standard C++17 only and exception-free: the compiler is built
// with -fno-exceptions and links no runtime library, the runtime links no
// MLIR. Every check returns an error string, empty on success, in the
// compiler's wording; the compiler emits it as a diagnostic at the op, a
// kernel factory throws it as "kernel '<name>': <message>".
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_SHAPERULES_H
#define KILN_RUNTIME_SHAPERULES_H

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace kiln::shape {

/// A read-only view of int64 values: built from a std::vector, an
/// llvm::ArrayRef or any container with data() and size(), so the compiler
/// and the runtime pass what they hold without a copy.
class IntSpan {
public:
  IntSpan() = default;
  IntSpan(const int64_t *data, size_t size) : data_(data), size_(size) {}
  template <typename R>
  IntSpan(const R &r) : data_(r.data()), size_(r.size()) {}

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t operator[](size_t i) const { return data_[i]; }
  const int64_t *begin() const { return data_; }
  const int64_t *end() const { return data_ + size_; }
  std::vector<int64_t> vec() const { return {begin(), end()}; }

private:
  const int64_t *data_ = nullptr;
  size_t size_ = 0;
};

/// "[2,3,4]", the form diagnostics on both sides print shapes in.
inline std::string shapeStr(IntSpan s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i)
    r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

//===----------------------------------------------------------------------===//
// Broadcasting
//===----------------------------------------------------------------------===//

/// NumPy (and ONNX multidirectional) broadcasting of `a` and `b` into `out`.
inline std::string broadcastShapes(IntSpan a, IntSpan b, std::vector<int64_t> &out) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> r(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return "shapes " + shapeStr(a) + " and " + shapeStr(b) + " do not broadcast";
    r[i] = da == 1 ? db : da;
  }
  out = std::move(r);
  return {};
}

//===----------------------------------------------------------------------===//
// Axes, reductions, gathers
//===----------------------------------------------------------------------===//

/// Checks that `axis` indexes a tensor of `rank` dims (0 <= axis < rank).
inline std::string checkAxis(int64_t axis, int64_t rank, const char *what = "axis") {
  if (axis < 0 || axis >= rank)
    return std::string(what) + " " + std::to_string(axis) +
           " is out of range for rank " + std::to_string(rank);
  return {};
}

/// ONNX's negative axes: `axis` + `rank` when negative, then checked; the
/// message names the axis as written.
inline std::string normalizeAxis(int64_t &axis, int64_t rank,
                                 const char *what = "axis") {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    return checkAxis(axis, rank, what);
  axis = a;
  return {};
}

/// The result shape of reducing `in` over `axes` (sorted, unique, in
/// range); a reduced dim is kept as 1 with `keepdims`, else dropped.
/// `reduced`, when given, gets one flag per input dim.
inline std::string reducedShape(IntSpan in, IntSpan axes, bool keepdims,
                                std::vector<int64_t> &out,
                                std::vector<bool> *reduced = nullptr) {
  const int64_t rank = (int64_t)in.size();
  std::vector<bool> flags(rank, false);
  int64_t prev = -1;
  for (int64_t a : axes) {
    if (std::string err = checkAxis(a, rank); !err.empty())
      return err;
    if (a <= prev)
      return "axes must be sorted and unique";
    prev = a;
    flags[a] = true;
  }
  out.clear();
  for (int64_t i = 0; i < rank; ++i) {
    if (!flags[i])
      out.push_back(in[i]);
    else if (keepdims)
      out.push_back(1);
  }
  if (reduced)
    *reduced = std::move(flags);
  return {};
}

/// gather: `in` with dim `axis` replaced by the indices' shape.
inline std::string gatherShape(IntSpan in, IntSpan indices, int64_t axis,
                               std::vector<int64_t> &out) {
  if (std::string err = checkAxis(axis, (int64_t)in.size()); !err.empty())
    return err;
  out.assign(in.begin(), in.begin() + axis);
  out.insert(out.end(), indices.begin(), indices.end());
  out.insert(out.end(), in.begin() + axis + 1, in.end());
  return {};
}

/// gather_elements: the indices' shape, which has the input's rank and is no
/// larger than the input outside `axis`.
inline std::string gatherElementsShape(IntSpan in, IntSpan indices, int64_t axis,
                                       std::vector<int64_t> &out) {
  if (std::string err = checkAxis(axis, (int64_t)in.size()); !err.empty())
    return err;
  if (indices.size() != in.size())
    return "indices have rank " + std::to_string(indices.size()) +
           ", the input rank " + std::to_string(in.size());
  for (size_t d = 0; d < in.size(); ++d)
    if ((int64_t)d != axis && indices[d] > in[d])
      return "indices dimension " + std::to_string(d) + " (" +
             std::to_string(indices[d]) + ") is larger than the input's (" +
             std::to_string(in[d]) + ")";
  out = indices.vec();
  return {};
}

/// ScatterElements: indices and updates of one shape, of the data's rank, no
/// larger than the data off `axis`; the result is the data's shape.
inline std::string scatterElementsShape(IntSpan data, IntSpan indices, IntSpan updates,
                                        int64_t axis) {
  if (indices.vec() != updates.vec())
    return "indices and updates must have one shape";
  std::vector<int64_t> unused;
  return gatherElementsShape(data, indices, axis, unused);
}

/// ScatterND: indices [i..., q] with 1 <= q <= rank(data); updates
/// [i..., data[q:]...].
inline std::string scatterNDShape(IntSpan data, IntSpan indices, IntSpan updates) {
  if (indices.size() < 1)
    return "indices need at least one dimension";
  int64_t q = indices[indices.size() - 1];
  if (q < 1 || q > (int64_t)data.size())
    return "the indices' last dimension (" + std::to_string(q) +
           ") must be in [1, " + std::to_string(data.size()) + "], the data's rank";
  std::vector<int64_t> want(indices.begin(), indices.end() - 1);
  want.insert(want.end(), data.begin() + q, data.end());
  if (updates.vec() != want)
    return "updates must have shape " + shapeStr(want) + " (the indices' batch, then "
           "the data's dimensions from " + std::to_string(q) + ")";
  return {};
}

/// TopK: `k` elements along `axis`, 0 <= k <= the axis's size.
inline std::string topkShape(IntSpan in, int64_t k, int64_t axis, std::vector<int64_t> &out) {
  if (std::string err = checkAxis(axis, (int64_t)in.size()); !err.empty())
    return err;
  if (k < 0 || k > in[axis])
    return "k (" + std::to_string(k) + ") must be in [0, " + std::to_string(in[axis]) +
           "], the size of axis " + std::to_string(axis);
  out = in.vec();
  out[axis] = k;
  return {};
}

/// A scatter's reduction: none, add, mul, max or min.
inline std::string checkScatterReduction(const std::string &r) {
  if (r == "none" || r == "add" || r == "mul" || r == "max" || r == "min")
    return {};
  return "reduction must be none, add, mul, max or min, got '" + r + "'";
}

//===----------------------------------------------------------------------===//
// Convolution and pooling windows
//===----------------------------------------------------------------------===//

/// Spatial dims a window op may have: 1 to 3 (1d, 2d, 3d).
constexpr int kMaxSpatial = 3;

/// The extent of a dilated window: d * (k - 1) + 1.
inline int64_t windowSpan(int64_t k, int64_t dilation) {
  return dilation * (k - 1) + 1;
}

/// Output size along one dim of a convolution or pooling window over `in`
/// elements padded by `padLo` and `padHi`: floor((padded - span) / stride)
/// + 1, or 0 when the window does not fit the padded input.
inline int64_t windowOutputSize(int64_t in, int64_t k, int64_t stride,
                                int64_t dilation, int64_t padLo, int64_t padHi) {
  int64_t padded = in + padLo + padHi, span = windowSpan(k, dilation);
  if (padded < span)
    return 0;
  return (padded - span) / stride + 1;
}

/// Output size along one dim of a transposed convolution (ONNX
/// ConvTranspose): stride * (in - 1) + output_padding + span - pads; < 1
/// means an empty output.
inline int64_t transposedOutputSize(int64_t in, int64_t k, int64_t stride,
                                    int64_t dilation, int64_t padLo,
                                    int64_t padHi, int64_t outputPadding) {
  return stride * (in - 1) + outputPadding + windowSpan(k, dilation) - padLo -
         padHi;
}

/// Checks the per-spatial-dim attribute arrays of a conv or pool op over an
/// input of `spatial` spatial dims: counts, strides and dilations >= 1,
/// pads >= 0.
inline std::string checkWindowAttrs(size_t spatial, IntSpan strides,
                                    IntSpan dilations, IntSpan padding) {
  if (strides.size() != spatial || dilations.size() != spatial ||
      padding.size() != 2 * spatial)
    return "expected " + std::to_string(spatial) + " strides, " +
           std::to_string(spatial) + " dilations and " +
           std::to_string(2 * spatial) + " pads, got " +
           std::to_string(strides.size()) + ", " +
           std::to_string(dilations.size()) + " and " +
           std::to_string(padding.size());
  for (size_t i = 0; i < spatial; ++i) {
    if (strides[i] < 1 || dilations[i] < 1)
      return "strides and dilations must be >= 1";
    if (padding[i] < 0 || padding[i + spatial] < 0)
      return "pads must be >= 0";
  }
  return {};
}

/// The attributes of a window op, as the ops and the plan name them.
struct WindowAttrs {
  IntSpan kernel;        // pool only: the window; conv takes it from the weight
  IntSpan strides, dilations;
  IntSpan padding;       // begin pads of every spatial dim, then the end pads
  IntSpan outputPadding; // conv_transpose only
  int64_t groups = 1;    // conv only
};

/// The geometry of one conv, conv_transpose or pooling step: batch and
/// channels, and per spatial dim the input and output sizes, the window,
/// strides, dilations, begin/end pads and output padding.
///
/// The spatial arrays hold the `nsp` real dims in their LAST entries; the
/// leading ones are neutral (size 1, stride 1, dilation 1, no padding). A
/// loop nest over all three entries then covers 1d, 2d and 3d alike with
/// the innermost loop on the real innermost (contiguous) dim.
struct WindowGeometry {
  bool transposed = false;
  int nsp = 0;
  /// Batch, input channels, output channels (= c for pooling), groups.
  int64_t n = 0, c = 0, o = 0, groups = 1;
  std::array<int64_t, kMaxSpatial> in{1, 1, 1}, out{1, 1, 1}, k{1, 1, 1},
      s{1, 1, 1}, d{1, 1, 1}, pl{0, 0, 0}, ph{0, 0, 0}, op{0, 0, 0};

  /// The array index of spatial dim `i` (0 <= i < nsp).
  int dim(int i) const { return kMaxSpatial - nsp + i; }
  /// The first array index holding a real dim.
  int first() const { return kMaxSpatial - nsp; }
  int64_t inSize() const { return in[0] * in[1] * in[2]; }
  int64_t outSize() const { return out[0] * out[1] * out[2]; }
  int64_t kSize() const { return k[0] * k[1] * k[2]; }
  /// Input and output channels per group.
  int64_t cpg() const { return c / groups; }
  int64_t opg() const { return o / groups; }

  /// The input [N, C, D...] and output [N, O, D...] shapes.
  std::vector<int64_t> inShape() const { return withSpatial({n, c}, in); }
  std::vector<int64_t> outShape() const { return withSpatial({n, o}, out); }

  // The dims of a oneDNN (or cuDNN) descriptor. Both libraries index the
  // forward convolution: src = the input, dst = the output; weights are
  // [G, O/G, C/G, K...] when grouped, [O, C/G, K...] otherwise (for a
  // transposed convolution, O and C are the deconvolution's own output and
  // input channels); dilations count the holes (d - 1).
  std::vector<int64_t> srcDims() const { return inShape(); }
  std::vector<int64_t> dstDims() const { return outShape(); }
  std::vector<int64_t> weightDims() const {
    return withSpatial(groups > 1 ? std::vector<int64_t>{groups, opg(), cpg()}
                                  : std::vector<int64_t>{o, cpg()},
                       k);
  }
  std::vector<int64_t> kernelDims() const { return withSpatial({}, k); }
  std::vector<int64_t> strideDims() const { return withSpatial({}, s); }
  std::vector<int64_t> holeDims() const {
    std::vector<int64_t> r;
    for (int i = first(); i < kMaxSpatial; ++i)
      r.push_back(d[i] - 1);
    return r;
  }
  std::vector<int64_t> padLoDims() const { return withSpatial({}, pl); }
  std::vector<int64_t> padHiDims() const { return withSpatial({}, ph); }

private:
  std::vector<int64_t> withSpatial(std::vector<int64_t> lead,
                                   const std::array<int64_t, kMaxSpatial> &a) const {
    for (int i = first(); i < kMaxSpatial; ++i)
      lead.push_back(a[i]);
    return lead;
  }
};

namespace detail {
/// Whether the window arithmetic of one spatial dim stays inside int64_t:
/// windowSpan, and windowOutputSize's padded size or transposedOutputSize's
/// every step. The operands are checked already (in >= 0, k, s, d >= 1,
/// pads and op >= 0) but may come from a hostile plan or model.
inline bool windowFits(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pl,
                       int64_t ph, int64_t op, bool transposed) {
  int64_t span, t;
  if (__builtin_mul_overflow(d, k - 1, &span) ||
      __builtin_add_overflow(span, 1, &span))
    return false;
  if (!transposed)
    return !__builtin_add_overflow(in, pl, &t) &&
           !__builtin_add_overflow(t, ph, &t);
  return !__builtin_mul_overflow(s, in - 1, &t) &&
         !__builtin_add_overflow(t, op, &t) &&
         !__builtin_add_overflow(t, span, &t) &&
         !__builtin_sub_overflow(t, pl, &t) &&
         !__builtin_sub_overflow(t, ph, &t);
}

/// Whether the product of `dims` fits in int64_t (all >= 0).
inline bool productFits(std::initializer_list<int64_t> dims) {
  int64_t p = 1;
  for (int64_t v : dims)
    if (__builtin_mul_overflow(p, v, &p))
      return false;
  return true;
}

/// After the spatial dims are set: the sizes kernels multiply (input,
/// output and window elements, and the work of a whole op: batch x output
/// channels x outputs x `perOutput` (a convolution's input channels per
/// group, 1 for pooling) x window) fit in int64_t.
inline std::string checkWindowWork(const WindowGeometry &g, int64_t perOutput) {
  const auto &i = g.in, &o = g.out, &k = g.k;
  if (!productFits({i[0], i[1], i[2]}) || !productFits({o[0], o[1], o[2]}) ||
      !productFits({k[0], k[1], k[2]}) ||
      !productFits({g.n, g.o, o[0], o[1], o[2], perOutput, k[0], k[1], k[2]}))
    return "the window's sizes overflow 64-bit arithmetic";
  return {};
}

/// Fills the spatial attributes of `g` (nsp already set) from `a`, checked.
inline std::string setWindow(WindowGeometry &g, const WindowAttrs &a) {
  size_t nsp = g.nsp;
  if (std::string err = checkWindowAttrs(nsp, a.strides, a.dilations, a.padding);
      !err.empty())
    return err;
  for (size_t i = 0; i < nsp; ++i) {
    int j = g.dim((int)i);
    g.s[j] = a.strides[i];
    g.d[j] = a.dilations[i];
    g.pl[j] = a.padding[i];
    g.ph[j] = a.padding[i + nsp];
  }
  return {};
}
} // namespace detail

/// The geometry of kiln.conv (`transposed` false: input [N, C, D...],
/// weight [O, C/groups, K...]) or kiln.conv_transpose (weight
/// [C, O/groups, K...]), with the output shape it implies.
inline std::string convGeometry(IntSpan input, IntSpan weight,
                                const WindowAttrs &a, bool transposed,
                                WindowGeometry &g) {
  g = WindowGeometry();
  g.transposed = transposed;
  if (input.size() < 3 || weight.size() != input.size())
    return "input " + shapeStr(input) + " and weight " + shapeStr(weight) +
           " must both have rank N+2 with N >= 1";
  for (IntSpan t : {input, weight})
    for (int64_t v : t)
      if (v < 0)
        return "negative dimension in " + shapeStr(t);
  size_t nsp = input.size() - 2;
  if (nsp > (size_t)kMaxSpatial)
    return std::to_string(nsp) + " spatial dims, at most " +
           std::to_string(kMaxSpatial) + " are supported";
  g.nsp = (int)nsp;
  if (std::string err = detail::setWindow(g, a); !err.empty())
    return err;
  if (transposed && a.outputPadding.size() != nsp)
    return "expected " + std::to_string(nsp) + " output_padding values";
  if (transposed)
    for (int64_t v : a.outputPadding)
      if (v < 0)
        return "output_padding must be >= 0";
  g.n = input[0];
  g.c = input[1];
  g.groups = a.groups;
  if (transposed) {
    if (g.groups < 1 || weight[0] != g.c || g.c % g.groups)
      return "channels do not match: input has " + std::to_string(g.c) +
             ", weight has " + std::to_string(weight[0]);
    if (__builtin_mul_overflow(weight[1], g.groups, &g.o))
      return "output channels overflow: " + std::to_string(weight[1]) +
             " x " + std::to_string(g.groups) + " groups";
  } else {
    g.o = weight[0];
    if (g.groups < 1 || g.c % g.groups || g.o % g.groups ||
        g.c / g.groups != weight[1])
      return "channels do not match: input has " + std::to_string(g.c) +
             ", weight expects " + std::to_string(weight[1]) + " x " +
             std::to_string(g.groups) + " groups";
  }
  for (size_t i = 0; i < nsp; ++i) {
    int j = g.dim((int)i);
    g.in[j] = input[i + 2];
    g.k[j] = weight[i + 2];
    if (g.k[j] < 1)
      return "empty kernel in " + shapeStr(weight);
    if (!detail::windowFits(g.in[j], g.k[j], g.s[j], g.d[j], g.pl[j], g.ph[j],
                            transposed ? a.outputPadding[i] : 0, transposed))
      return "window of spatial dim " + std::to_string(i) +
             " overflows 64-bit arithmetic (kernel " + std::to_string(g.k[j]) +
             ", stride " + std::to_string(g.s[j]) + ", dilation " +
             std::to_string(g.d[j]) + ", pads " + std::to_string(g.pl[j]) +
             " and " + std::to_string(g.ph[j]) + ")";
    if (transposed) {
      g.op[j] = a.outputPadding[i];
      g.out[j] = transposedOutputSize(g.in[j], g.k[j], g.s[j], g.d[j], g.pl[j],
                                      g.ph[j], g.op[j]);
      if (g.out[j] < 1)
        return "empty output in spatial dim " + std::to_string(i);
    } else {
      g.out[j] = windowOutputSize(g.in[j], g.k[j], g.s[j], g.d[j], g.pl[j], g.ph[j]);
      if (g.out[j] < 1)
        return "kernel larger than padded input in spatial dim " + std::to_string(i);
    }
  }
  return detail::checkWindowWork(g, g.cpg());
}

/// The geometry of kiln.max_pool / kiln.avg_pool over `input` [N, C, D...].
inline std::string poolGeometry(IntSpan input, const WindowAttrs &a,
                                WindowGeometry &g) {
  g = WindowGeometry();
  if (input.size() < 3)
    return "input must have rank N+2 with N >= 1, got " + shapeStr(input);
  for (int64_t v : input)
    if (v < 0)
      return "negative dimension in " + shapeStr(input);
  size_t nsp = input.size() - 2;
  if (nsp > (size_t)kMaxSpatial)
    return std::to_string(nsp) + " spatial dims, at most " +
           std::to_string(kMaxSpatial) + " are supported";
  g.nsp = (int)nsp;
  if (a.kernel.size() != nsp)
    return "expected " + std::to_string(nsp) + " kernel sizes, got " +
           std::to_string(a.kernel.size());
  if (std::string err = detail::setWindow(g, a); !err.empty())
    return err;
  g.n = input[0];
  g.c = g.o = input[1];
  for (size_t i = 0; i < nsp; ++i) {
    int j = g.dim((int)i);
    if (a.kernel[i] < 1)
      return "kernel sizes must be >= 1";
    g.in[j] = input[i + 2];
    g.k[j] = a.kernel[i];
    if (!detail::windowFits(g.in[j], g.k[j], g.s[j], g.d[j], g.pl[j], g.ph[j],
                            0, false))
      return "window of spatial dim " + std::to_string(i) +
             " overflows 64-bit arithmetic (kernel " + std::to_string(g.k[j]) +
             ", dilation " + std::to_string(g.d[j]) + ", pads " +
             std::to_string(g.pl[j]) + " and " + std::to_string(g.ph[j]) + ")";
    g.out[j] = windowOutputSize(g.in[j], g.k[j], g.s[j], g.d[j], g.pl[j], g.ph[j]);
    if (g.out[j] < 1)
      return "window larger than padded input in spatial dim " + std::to_string(i);
  }
  return detail::checkWindowWork(g, 1);
}

} // namespace kiln::shape

#endif // KILN_RUNTIME_SHAPERULES_H
