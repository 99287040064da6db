//===- KilnFolds.cpp - constant folding of kiln ops -------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Folders for the ops that appear in the shape-computation subgraphs
// exporters emit (Shape -> Gather -> Unsqueeze -> Concat -> Reshape and the
// like). They evaluate small constant tensors exactly: integers as int64,
// floats as double, then round once to the result's element type. Folding is
// limited to kMaxFoldElements elements so a large constant is never
// duplicated in the IR.
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Kiln/IR/KilnOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/APFloat.h"

#include <cmath>

using namespace mlir;
using namespace kiln;

namespace {
constexpr int64_t kMaxFoldElements = 1 << 16;

/// A small constant tensor with its values widened to int64 or double.
struct Const {
  RankedTensorType type;
  bool isFloat = false;
  SmallVector<int64_t> ints;
  SmallVector<double> floats;

  int64_t size() const { return type.getNumElements(); }
  double f(int64_t i) const { return isFloat ? floats[i] : (double)ints[i]; }
  int64_t n(int64_t i) const { return isFloat ? (int64_t)floats[i] : ints[i]; }
};
} // namespace

static std::optional<Const> getConst(Attribute attr) {
  auto dense = dyn_cast_or_null<DenseElementsAttr>(attr);
  if (!dense)
    return std::nullopt;
  auto type = dyn_cast<RankedTensorType>(dense.getType());
  if (!type || !type.hasStaticShape() || type.getNumElements() > kMaxFoldElements)
    return std::nullopt;
  Const c;
  c.type = type;
  Type elt = type.getElementType();
  if (isa<FloatType>(elt)) {
    c.isFloat = true;
    for (APFloat v : dense.getValues<APFloat>()) {
      bool lost;
      v.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
      c.floats.push_back(v.convertToDouble());
    }
    return c;
  }
  auto intType = dyn_cast<IntegerType>(elt);
  if (!intType)
    return std::nullopt;
  bool zext = intType.getWidth() == 1 || intType.isUnsigned();
  for (APInt v : dense.getValues<APInt>())
    c.ints.push_back(zext ? (int64_t)v.getZExtValue() : v.getSExtValue());
  return c;
}

/// Builds a dense attribute of `type` from widened values (exactly one of the
/// two arrays is used, by the element type).
static Attribute makeAttr(RankedTensorType type, ArrayRef<double> floats,
                          ArrayRef<int64_t> ints) {
  Type elt = type.getElementType();
  if (auto ft = dyn_cast<FloatType>(elt)) {
    SmallVector<APFloat> values;
    for (double d : floats) {
      APFloat v(d);
      bool lost;
      v.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      values.push_back(v);
    }
    return DenseElementsAttr::get(type, values);
  }
  auto it = dyn_cast<IntegerType>(elt);
  if (!it)
    return {};
  SmallVector<APInt> values;
  for (int64_t v : ints)
    values.push_back(it.getWidth() == 1 ? APInt(1, v != 0)
                                        : APInt(it.getWidth(), (uint64_t)v,
                                                /*isSigned=*/!it.isUnsigned(),
                                                /*implicitTrunc=*/true));
  return DenseElementsAttr::get(type, values);
}

/// Result element i is source element map[i].
static Attribute gatherConst(const Const &src, RankedTensorType type,
                             ArrayRef<int64_t> map) {
  SmallVector<double> floats;
  SmallVector<int64_t> ints;
  for (int64_t i : map) {
    if (src.isFloat)
      floats.push_back(src.floats[i]);
    else
      ints.push_back(src.ints[i]);
  }
  if (src.isFloat != isa<FloatType>(type.getElementType()))
    return {};
  return makeAttr(type, floats, ints);
}

static SmallVector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> s(shape.size(), 1);
  for (int64_t i = (int64_t)shape.size() - 2; i >= 0; --i)
    s[i] = s[i + 1] * shape[i + 1];
  return s;
}

/// For each element of `out`, the linear index of the element of `in` that
/// NumPy broadcasting reads.
static SmallVector<int64_t> broadcastMap(ArrayRef<int64_t> in, ArrayRef<int64_t> out) {
  SmallVector<int64_t> inStrides = stridesOf(in);
  size_t off = out.size() - in.size();
  int64_t total = 1;
  for (int64_t d : out)
    total *= d;
  SmallVector<int64_t> map(total);
  SmallVector<int64_t> outStrides = stridesOf(out);
  for (int64_t lin = 0; lin < total; ++lin) {
    int64_t src = 0, rem = lin;
    for (size_t d = 0; d < out.size(); ++d) {
      int64_t idx = rem / outStrides[d];
      rem %= outStrides[d];
      if (d >= off && in[d - off] != 1)
        src += idx * inStrides[d - off];
    }
    map[lin] = src;
  }
  return map;
}

//===----------------------------------------------------------------------===//
// Constants and casts
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

OpFoldResult CastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // A round trip through a type that holds every value of the first:
  // cast(cast(x: bf16 -> f32) -> bf16) is x.
  if (auto inner = getInput().getDefiningOp<CastOp>()) {
    auto from = dyn_cast<FloatType>(getElementTypeOrSelf(inner.getInput()));
    auto via = dyn_cast<FloatType>(getElementTypeOrSelf(inner.getType()));
    if (from && via && inner.getInput().getType() == getType() &&
        llvm::APFloat::isRepresentableBy(from.getFloatSemantics(),
                                         via.getFloatSemantics()))
      return inner.getInput();
  }
  std::optional<Const> c = getConst(adaptor.getInput());
  if (!c)
    return {};
  auto type = cast<RankedTensorType>(getType());
  Type elt = type.getElementType();
  SmallVector<double> floats;
  SmallVector<int64_t> ints;
  for (int64_t i = 0; i < c->size(); ++i) {
    if (isa<FloatType>(elt))
      floats.push_back(c->f(i));
    else if (elt.isInteger(1))
      ints.push_back(c->f(i) != 0.0);
    else if (c->isFloat && !std::isfinite(c->floats[i]))
      return {};
    else
      ints.push_back(c->n(i));
  }
  return makeAttr(type, floats, ints);
}

//===----------------------------------------------------------------------===//
// Elementwise binary
//===----------------------------------------------------------------------===//

/// Folds a broadcasting binary op on constants. `ff` computes in double,
/// `fi` in int64 (returning nullopt where the result is undefined, e.g.
/// integer division by zero).
template <typename FloatFn, typename IntFn>
static OpFoldResult foldBinary(Operation *op, Attribute lhsAttr, Attribute rhsAttr,
                               FloatFn ff, IntFn fi) {
  std::optional<Const> l = getConst(lhsAttr), r = getConst(rhsAttr);
  if (!l || !r)
    return {};
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  SmallVector<int64_t> lm = broadcastMap(l->type.getShape(), type.getShape());
  SmallVector<int64_t> rm = broadcastMap(r->type.getShape(), type.getShape());
  bool floatResult = isa<FloatType>(type.getElementType());
  SmallVector<double> floats;
  SmallVector<int64_t> ints;
  for (size_t i = 0; i < lm.size(); ++i) {
    if (l->isFloat) {
      double v = ff(l->floats[lm[i]], r->floats[rm[i]]);
      if (floatResult)
        floats.push_back(v);
      else
        ints.push_back((int64_t)v);
    } else {
      std::optional<int64_t> v = fi(l->ints[lm[i]], r->ints[rm[i]]);
      if (!v)
        return {};
      ints.push_back(*v);
    }
  }
  return makeAttr(type, floats, ints);
}

using OptI = std::optional<int64_t>;

OpFoldResult AddOp::fold(FoldAdaptor a) {
  return foldBinary(*this, a.getLhs(), a.getRhs(),
                    [](double x, double y) { return x + y; },
                    [](int64_t x, int64_t y) -> OptI { return x + y; });
}
OpFoldResult SubOp::fold(FoldAdaptor a) {
  return foldBinary(*this, a.getLhs(), a.getRhs(),
                    [](double x, double y) { return x - y; },
                    [](int64_t x, int64_t y) -> OptI { return x - y; });
}
OpFoldResult MulOp::fold(FoldAdaptor a) {
  return foldBinary(*this, a.getLhs(), a.getRhs(),
                    [](double x, double y) { return x * y; },
                    [](int64_t x, int64_t y) -> OptI { return x * y; });
}
OpFoldResult DivOp::fold(FoldAdaptor a) {
  return foldBinary(*this, a.getLhs(), a.getRhs(),
                    [](double x, double y) { return x / y; },
                    [](int64_t x, int64_t y) -> OptI {
                      if (y == 0 || (x == INT64_MIN && y == -1))
                        return std::nullopt;
                      return x / y;
                    });
}
OpFoldResult PowOp::fold(FoldAdaptor a) {
  return foldBinary(*this, a.getLhs(), a.getRhs(),
                    [](double x, double y) { return std::pow(x, y); },
                    [](int64_t x, int64_t y) -> OptI {
                      if (y < 0 || y > 62)
                        return std::nullopt;
                      int64_t r = 1;
                      for (int64_t i = 0; i < y; ++i)
                        if (__builtin_mul_overflow(r, x, &r))
                          return std::nullopt;
                      return r;
                    });
}
OpFoldResult MaxOp::fold(FoldAdaptor a) {
  return foldBinary(*this, a.getLhs(), a.getRhs(),
                    [](double x, double y) { return std::fmax(x, y); },
                    [](int64_t x, int64_t y) -> OptI { return std::max(x, y); });
}
OpFoldResult MinOp::fold(FoldAdaptor a) {
  return foldBinary(*this, a.getLhs(), a.getRhs(),
                    [](double x, double y) { return std::fmin(x, y); },
                    [](int64_t x, int64_t y) -> OptI { return std::min(x, y); });
}

#define KILN_COMPARE_FOLD(OP, EXPR)                                              \
  OpFoldResult OP::fold(FoldAdaptor a) {                                         \
    return foldBinary(                                                           \
        *this, a.getLhs(), a.getRhs(),                                           \
        [](double x, double y) { return (double)(EXPR); },                       \
        [](int64_t x, int64_t y) -> OptI { return (int64_t)(EXPR); });           \
  }
KILN_COMPARE_FOLD(EqualOp, x == y)
KILN_COMPARE_FOLD(LessOp, x < y)
KILN_COMPARE_FOLD(LessEqualOp, x <= y)
KILN_COMPARE_FOLD(GreaterOp, x > y)
KILN_COMPARE_FOLD(GreaterEqualOp, x >= y)
KILN_COMPARE_FOLD(AndOp, x && y)
KILN_COMPARE_FOLD(OrOp, x || y)
KILN_COMPARE_FOLD(XorOp, (x != 0) != (y != 0))
#undef KILN_COMPARE_FOLD

OpFoldResult SelectOp::fold(FoldAdaptor a) {
  std::optional<Const> c = getConst(a.getCond()), t = getConst(a.getOnTrue()),
                       f = getConst(a.getOnFalse());
  if (!c || !t || !f)
    return {};
  auto type = cast<RankedTensorType>(getType());
  SmallVector<int64_t> cm = broadcastMap(c->type.getShape(), type.getShape());
  SmallVector<int64_t> tm = broadcastMap(t->type.getShape(), type.getShape());
  SmallVector<int64_t> fm = broadcastMap(f->type.getShape(), type.getShape());
  SmallVector<double> floats;
  SmallVector<int64_t> ints;
  for (size_t i = 0; i < cm.size(); ++i) {
    const Const &src = c->ints[cm[i]] ? *t : *f;
    int64_t idx = c->ints[cm[i]] ? tm[i] : fm[i];
    if (src.isFloat)
      floats.push_back(src.floats[idx]);
    else
      ints.push_back(src.ints[idx]);
  }
  return makeAttr(type, floats, ints);
}

//===----------------------------------------------------------------------===//
// Reductions (only those shape arithmetic uses)
//===----------------------------------------------------------------------===//

template <typename Fn>
static OpFoldResult foldReduce(Operation *op, Attribute input, ArrayRef<int64_t> axes,
                               double init, Fn fn) {
  std::optional<Const> c = getConst(input);
  if (!c)
    return {};
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  ArrayRef<int64_t> in = c->type.getShape();
  SmallVector<int64_t> inStrides = stridesOf(in);
  // The output index of each input element: drop (or zero) reduced dims.
  SmallVector<int64_t> keptShape;
  for (int64_t d = 0, e = in.size(); d < e; ++d)
    keptShape.push_back(llvm::is_contained(axes, d) ? 1 : in[d]);
  SmallVector<int64_t> keptStrides = stridesOf(keptShape);
  SmallVector<double> acc(type.getNumElements(), init);
  for (int64_t lin = 0; lin < c->size(); ++lin) {
    int64_t out = 0, rem = lin;
    for (size_t d = 0; d < in.size(); ++d) {
      int64_t idx = rem / inStrides[d];
      rem %= inStrides[d];
      if (!llvm::is_contained(axes, (int64_t)d))
        out += idx * keptStrides[d];
    }
    acc[out] = fn(acc[out], c->f(lin));
  }
  SmallVector<int64_t> ints(acc.begin(), acc.end());
  return makeAttr(type, acc, ints);
}

OpFoldResult ReduceSumOp::fold(FoldAdaptor a) {
  return foldReduce(*this, a.getInput(), getAxes(), 0.0,
                    [](double x, double y) { return x + y; });
}
OpFoldResult ReduceProdOp::fold(FoldAdaptor a) {
  return foldReduce(*this, a.getInput(), getAxes(), 1.0,
                    [](double x, double y) { return x * y; });
}

//===----------------------------------------------------------------------===//
// Shape and data movement
//===----------------------------------------------------------------------===//

OpFoldResult ReshapeOp::fold(FoldAdaptor a) {
  if (getInput().getType() == getType())
    return getInput();
  if (auto inner = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(inner.getInput());
    return getResult();
  }
  if (auto dense = dyn_cast_or_null<DenseElementsAttr>(a.getInput()))
    return dense.reshape(cast<ShapedType>(getType()));
  return {};
}

OpFoldResult BroadcastOp::fold(FoldAdaptor a) {
  if (getInput().getType() == getType())
    return getInput();
  auto type = cast<RankedTensorType>(getType());
  if (auto dense = dyn_cast_or_null<DenseElementsAttr>(a.getInput()))
    if (dense.isSplat())
      return DenseElementsAttr::get(type, dense.getSplatValue<Attribute>());
  std::optional<Const> c = getConst(a.getInput());
  if (!c || type.getNumElements() > kMaxFoldElements)
    return {};
  return gatherConst(*c, type, broadcastMap(c->type.getShape(), type.getShape()));
}

OpFoldResult TransposeOp::fold(FoldAdaptor a) {
  ArrayRef<int64_t> perm = getPerm();
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i)
    identity &= perm[i] == (int64_t)i;
  if (identity)
    return getInput();
  std::optional<Const> c = getConst(a.getInput());
  if (!c)
    return {};
  auto type = cast<RankedTensorType>(getType());
  SmallVector<int64_t> inStrides = stridesOf(c->type.getShape());
  SmallVector<int64_t> outStrides = stridesOf(type.getShape());
  SmallVector<int64_t> map(type.getNumElements());
  for (int64_t lin = 0; lin < type.getNumElements(); ++lin) {
    int64_t src = 0, rem = lin;
    for (size_t d = 0; d < perm.size(); ++d) {
      src += (rem / outStrides[d]) * inStrides[perm[d]];
      rem %= outStrides[d];
    }
    map[lin] = src;
  }
  return gatherConst(*c, type, map);
}

OpFoldResult SliceOp::fold(FoldAdaptor a) {
  if (getInput().getType() == getType() &&
      llvm::all_of(getStarts(), [](int64_t s) { return s == 0; }) &&
      llvm::all_of(getStrides(), [](int64_t s) { return s == 1; }))
    return getInput();
  std::optional<Const> c = getConst(a.getInput());
  if (!c)
    return {};
  auto type = cast<RankedTensorType>(getType());
  SmallVector<int64_t> inStrides = stridesOf(c->type.getShape());
  SmallVector<int64_t> outStrides = stridesOf(type.getShape());
  SmallVector<int64_t> map(type.getNumElements());
  for (int64_t lin = 0; lin < type.getNumElements(); ++lin) {
    int64_t src = 0, rem = lin;
    for (size_t d = 0; d < outStrides.size(); ++d) {
      int64_t idx = rem / outStrides[d];
      rem %= outStrides[d];
      src += (getStarts()[d] + idx * getStrides()[d]) * inStrides[d];
    }
    map[lin] = src;
  }
  return gatherConst(*c, type, map);
}

OpFoldResult ConcatOp::fold(FoldAdaptor a) {
  if (getInputs().size() == 1)
    return getInputs().front();
  auto type = cast<RankedTensorType>(getType());
  if (type.getNumElements() > kMaxFoldElements)
    return {};
  SmallVector<Const> parts;
  for (Attribute attr : a.getInputs()) {
    std::optional<Const> c = getConst(attr);
    if (!c)
      return {};
    parts.push_back(std::move(*c));
  }
  int64_t axis = getAxis();
  ArrayRef<int64_t> out = type.getShape();
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= out[d];
  SmallVector<double> floats;
  SmallVector<int64_t> ints;
  for (int64_t o = 0; o < outer; ++o)
    for (const Const &p : parts) {
      int64_t chunk = p.size() / std::max<int64_t>(outer, 1);
      for (int64_t i = 0; i < chunk; ++i) {
        if (p.isFloat)
          floats.push_back(p.floats[o * chunk + i]);
        else
          ints.push_back(p.ints[o * chunk + i]);
      }
    }
  return makeAttr(type, floats, ints);
}

OpFoldResult GatherOp::fold(FoldAdaptor a) {
  std::optional<Const> data = getConst(a.getInput()), idx = getConst(a.getIndices());
  if (!data || !idx)
    return {};
  auto type = cast<RankedTensorType>(getType());
  ArrayRef<int64_t> in = data->type.getShape();
  int64_t axis = getAxis();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= in[d];
  for (size_t d = axis + 1; d < in.size(); ++d)
    inner *= in[d];
  SmallVector<int64_t> map;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < idx->size(); ++j) {
      int64_t k = idx->ints[j];
      if (k < 0)
        k += in[axis];
      if (k < 0 || k >= in[axis])
        return {}; // Out of range: left for the runtime check to report.
      for (int64_t i = 0; i < inner; ++i)
        map.push_back((o * in[axis] + k) * inner + i);
    }
  return gatherConst(*data, type, map);
}
