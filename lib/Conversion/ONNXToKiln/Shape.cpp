//===- Shape.cpp - ONNX shape and data-movement ops to kiln -----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Constant, ConstantOfShape, Shape, Size, Range, Reshape, Flatten, Squeeze,
// Unsqueeze, Transpose, Concat, Split, Slice, Gather, Expand, Tile and Pad.
// Ops whose operands describe shapes (Reshape's shape, Slice's starts...)
// read them as constants; the ops that compute such values (Shape, Gather,
// Concat, arithmetic...) fold as they are created, so the exporters' shape
// subgraphs collapse to constants in graph order.
//===----------------------------------------------------------------------===//
#include "PatternUtils.h"

#include <limits>

using namespace mlir;
using namespace kiln;

namespace {

/// An attribute holding a list of numbers (value_ints/value_floats).
template <typename T>
FailureOr<DenseElementsAttr> listAttr(NodeRewriter &rw, Attribute a, Type elt) {
  auto arr = dyn_cast<ArrayAttr>(a);
  if (!arr)
    return rw.error("expected a list attribute");
  auto type = RankedTensorType::get({(int64_t)arr.size()}, elt);
  SmallVector<T> values;
  for (Attribute e : arr) {
    if constexpr (std::is_same_v<T, float>) {
      auto f = dyn_cast<FloatAttr>(e);
      if (!f)
        return rw.error("expected floats");
      values.push_back((float)f.getValueAsDouble());
    } else {
      auto i = dyn_cast<IntegerAttr>(e);
      if (!i)
        return rw.error("expected ints");
      values.push_back(i.getInt());
    }
  }
  return DenseElementsAttr::get(type, ArrayRef<T>(values));
}

LogicalResult convertConstant(onnx::NodeOp node, NodeRewriter &rw) {
  OpBuilder &b = rw.builder();
  DictionaryAttr attrs = node.getAttrs();
  if (attrs.size() != 1)
    return rw.error("expected exactly one value attribute");
  NamedAttribute a = *attrs.begin();
  StringRef name = a.getName().getValue();
  Attribute v = a.getValue();
  if (name == "value") {
    auto elements = dyn_cast<ElementsAttr>(v);
    if (!elements)
      return rw.error("'value' must be a tensor");
    return rw.replace(rw.constant(elements));
  }
  if (name == "value_float" || name == "value_int") {
    auto typed = dyn_cast<TypedAttr>(v);
    if (!typed || (name == "value_float") != isa<FloatAttr>(v))
      return rw.error("'" + name + "' has the wrong type");
    Type elt = name == "value_float" ? (Type)b.getF32Type() : (Type)b.getI64Type();
    if (auto f = dyn_cast<FloatAttr>(v))
      return rw.replace(rw.scalar(f.getValueAsDouble(), elt));
    return rw.replace(rw.scalar((double)cast<IntegerAttr>(v).getInt(), elt));
  }
  if (name == "value_floats")
    return rw.replace(rw.constant(KILN_TRY(listAttr<float>(rw, v, b.getF32Type()))));
  if (name == "value_ints")
    return rw.replace(rw.constant(KILN_TRY(listAttr<int64_t>(rw, v, b.getI64Type()))));
  return rw.error("constant attribute '" + name + "' is not supported");
}

LogicalResult convertConstantOfShape(onnx::NodeOp node, NodeRewriter &rw) {
  SmallVector<int64_t> shape = KILN_TRY(rw.constInts(0, "shape"));
  for (int64_t d : shape)
    if (d < 0)
      return rw.error("shape has a negative dimension");
  DenseElementsAttr fill;
  if (Attribute v = node.getONNXAttr("value")) {
    auto dense = dyn_cast<DenseElementsAttr>(v);
    if (!dense || dense.getNumElements() != 1)
      return rw.error("'value' must be a one-element tensor");
    fill = dense;
  }
  Type elt = fill ? fill.getElementType() : rw.builder().getF32Type();
  auto type = RankedTensorType::get(shape, elt);
  if (!fill)
    return rw.replace(rw.constant(DenseElementsAttr::get(type, rw.builder().getF32FloatAttr(0))));
  return rw.replace(rw.constant(DenseElementsAttr::get(type, fill.getValues<Attribute>()[0])));
}

LogicalResult convertShape(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  ArrayRef<int64_t> shape = NodeRewriter::shapeOf(x);
  int64_t rank = shape.size();
  int64_t start = KILN_TRY(rw.intAttr("start", 0));
  int64_t end = KILN_TRY(rw.intAttr("end", rank));
  auto clampDim = [&](int64_t v) {
    if (v < 0)
      v += rank;
    return std::clamp<int64_t>(v, 0, rank);
  };
  start = clampDim(start);
  end = clampDim(end);
  return rw.replace(rw.i64s(shape.slice(start, std::max<int64_t>(0, end - start))));
}

LogicalResult convertSize(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  return rw.replace(rw.scalar(NodeRewriter::typeOf(x).getNumElements(),
                              rw.builder().getI64Type()));
}

LogicalResult convertRange(onnx::NodeOp, NodeRewriter &rw) {
  Value startV = KILN_TRY(rw.required(0));
  Type elt = NodeRewriter::elementOf(startV);
  double start = KILN_TRY(rw.constFloats(0, "start")).front();
  double limit = KILN_TRY(rw.constFloats(1, "limit")).front();
  double delta = KILN_TRY(rw.constFloats(2, "delta")).front();
  if (delta == 0)
    return rw.error("delta is 0");
  double count = std::ceil((limit - start) / delta);
  if (!(count < (double)(1 << 24)))
    return rw.error("range has too many elements");
  int64_t n = std::max<int64_t>(0, (int64_t)count);
  auto type = RankedTensorType::get({n}, elt);
  if (isa<FloatType>(elt)) {
    SmallVector<APFloat> values;
    for (int64_t i = 0; i < n; ++i) {
      APFloat v(start + i * delta);
      bool lost;
      v.convert(cast<FloatType>(elt).getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      values.push_back(v);
    }
    return rw.replace(rw.constant(DenseElementsAttr::get(type, values)));
  }
  SmallVector<APInt> values;
  unsigned width = elt.getIntOrFloatBitWidth();
  for (int64_t i = 0; i < n; ++i)
    values.push_back(APInt(width, (uint64_t)((int64_t)start + i * (int64_t)delta),
                           /*isSigned=*/true, /*implicitTrunc=*/true));
  return rw.replace(rw.constant(DenseElementsAttr::get(type, values)));
}

LogicalResult convertReshape(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  SmallVector<int64_t> shape = KILN_TRY(rw.constInts(1, "shape"));
  bool allowZero = KILN_TRY(rw.intAttr("allowzero", 0)) != 0;
  ArrayRef<int64_t> in = NodeRewriter::shapeOf(x);
  int64_t inferred = -1, known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !allowZero) {
      if (i >= in.size())
        return rw.error("shape entry 0 at " + Twine(i) + " has no input dim to copy");
      shape[i] = in[i];
    }
    if (shape[i] == -1) {
      if (inferred >= 0)
        return rw.error("shape has more than one -1");
      inferred = i;
      continue;
    }
    if (shape[i] < 0)
      return rw.error("shape has a negative dimension " + Twine(shape[i]));
    known *= shape[i];
  }
  int64_t total = NodeRewriter::typeOf(x).getNumElements();
  if (inferred >= 0) {
    if (known == 0 || total % known)
      return rw.error("cannot infer the -1 dimension of the shape");
    shape[inferred] = total / known;
  }
  return rw.replace(KILN_TRY(rw.reshape(x, shape)));
}

LogicalResult convertFlatten(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  ArrayRef<int64_t> in = NodeRewriter::shapeOf(x);
  int64_t rank = in.size();
  int64_t axis = KILN_TRY(rw.intAttr("axis", 1));
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis > rank)
    return rw.error("axis is out of range");
  return rw.replace(KILN_TRY(
      rw.reshape(x, {product(in.take_front(axis)), product(in.drop_front(axis))})));
}

/// Squeeze/Unsqueeze axes: an attribute before opset 13, an input from then.
FailureOr<SmallVector<int64_t>> readAxes(NodeRewriter &rw, bool &present) {
  present = true;
  if (rw.opset() < 13) {
    present = rw.hasAttr("axes");
    return rw.intsAttr("axes");
  }
  if (!rw.input(1)) {
    present = false;
    return SmallVector<int64_t>();
  }
  return rw.constInts(1, "axes");
}

LogicalResult convertSqueeze(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  ArrayRef<int64_t> in = NodeRewriter::shapeOf(x);
  bool present;
  SmallVector<int64_t> axes = KILN_TRY(readAxes(rw, present));
  axes = KILN_TRY(normalizeAxes(rw, axes, in.size()));
  SmallVector<int64_t> out;
  for (int64_t i = 0, e = in.size(); i < e; ++i) {
    bool drop = present ? llvm::is_contained(axes, i) : in[i] == 1;
    if (drop && in[i] != 1)
      return rw.error("cannot squeeze dimension " + Twine(i) + " of size " + Twine(in[i]));
    if (!drop)
      out.push_back(in[i]);
  }
  return rw.replace(KILN_TRY(rw.reshape(x, out)));
}

LogicalResult convertUnsqueeze(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  ArrayRef<int64_t> in = NodeRewriter::shapeOf(x);
  bool present;
  SmallVector<int64_t> axes = KILN_TRY(readAxes(rw, present));
  if (!present)
    return rw.error("axes are required");
  int64_t rank = in.size() + axes.size();
  SmallVector<int64_t> sorted = KILN_TRY(normalizeAxes(rw, axes, rank));
  if (sorted.size() != axes.size())
    return rw.error("axes has duplicates");
  SmallVector<int64_t> out;
  for (int64_t i = 0, j = 0; i < rank; ++i)
    out.push_back(llvm::is_contained(sorted, i) ? 1 : in[j++]);
  return rw.replace(KILN_TRY(rw.reshape(x, out)));
}

LogicalResult convertTranspose(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  int64_t rank = NodeRewriter::rankOf(x);
  SmallVector<int64_t> reversed;
  for (int64_t i = rank - 1; i >= 0; --i)
    reversed.push_back(i);
  SmallVector<int64_t> perm = KILN_TRY(rw.intsAttr("perm", reversed));
  return rw.replace(KILN_TRY(rw.transpose(x, perm)));
}

LogicalResult convertConcat(onnx::NodeOp, NodeRewriter &rw) {
  SmallVector<Value> inputs;
  for (unsigned i = 0; i < rw.numInputs(); ++i)
    inputs.push_back(KILN_TRY(rw.required(i)));
  if (inputs.empty())
    return rw.error("needs at least one input");
  if (!rw.hasAttr("axis"))
    return rw.error("attribute 'axis' is required");
  int64_t axis =
      KILN_TRY(rw.axis(KILN_TRY(rw.intAttr("axis", 0)), NodeRewriter::rankOf(inputs[0])));
  return rw.replace(KILN_TRY(rw.create<ConcatOp>(inputs, {rw.i64Attr("axis", axis)})));
}

LogicalResult convertSplit(onnx::NodeOp node, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  ArrayRef<int64_t> in = NodeRewriter::shapeOf(x);
  int64_t axis = KILN_TRY(rw.axis(KILN_TRY(rw.intAttr("axis", 0)), in.size()));
  int64_t n = node.getNumResults();
  SmallVector<int64_t> sizes;
  if (rw.opset() < 13)
    sizes = KILN_TRY(rw.intsAttr("split"));
  else if (rw.input(1))
    sizes = KILN_TRY(rw.constInts(1, "split"));
  if (sizes.empty()) {
    int64_t chunk = (in[axis] + n - 1) / n;
    if (rw.opset() < 18 && in[axis] % n)
      return rw.error("dimension " + Twine(in[axis]) + " does not split evenly into " +
                      Twine(n) + " outputs");
    for (int64_t i = 0, left = in[axis]; i < n; ++i, left -= chunk)
      sizes.push_back(std::min(chunk, left));
  }
  if ((int64_t)sizes.size() != n || llvm::any_of(sizes, [](int64_t s) { return s < 0; }) ||
      std::accumulate(sizes.begin(), sizes.end(), int64_t(0)) != in[axis])
    return rw.error("split sizes do not add up to dimension " + Twine(axis));
  SmallVector<Value> results;
  int64_t offset = 0;
  for (int64_t s : sizes) {
    SmallVector<int64_t> starts(in.size(), 0), limits(in), strides(in.size(), 1);
    starts[axis] = offset;
    limits[axis] = offset + s;
    offset += s;
    results.push_back(KILN_TRY(rw.create<SliceOp>(
        {x}, {rw.arrayAttr("starts", starts), rw.arrayAttr("limits", limits),
              rw.arrayAttr("strides", strides)})));
  }
  return rw.replace(results);
}

/// Slice: starts/ends/axes/steps are attributes before opset 10 and inputs
/// from then; they are clamped as ONNX specifies.
LogicalResult convertSlice(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  ArrayRef<int64_t> in = NodeRewriter::shapeOf(x);
  int64_t rank = in.size();
  SmallVector<int64_t> starts, ends, axes, steps;
  if (rw.opset() < 10) {
    starts = KILN_TRY(rw.intsAttr("starts"));
    ends = KILN_TRY(rw.intsAttr("ends"));
    axes = KILN_TRY(rw.intsAttr("axes"));
  } else {
    starts = KILN_TRY(rw.constInts(1, "starts"));
    ends = KILN_TRY(rw.constInts(2, "ends"));
    if (rw.input(3))
      axes = KILN_TRY(rw.constInts(3, "axes"));
    if (rw.input(4))
      steps = KILN_TRY(rw.constInts(4, "steps"));
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(i);
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return rw.error("starts, ends, axes and steps differ in length");
  SmallVector<int64_t> s(rank, 0), l(in), st(rank, 1);
  SmallVector<bool> seen(rank, false);
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t a = KILN_TRY(rw.axis(axes[i], rank));
    if (seen[a])
      return rw.error("axis " + Twine(a) + " is sliced twice");
    seen[a] = true;
    int64_t dim = in[a], step = steps[i];
    if (step == 0)
      return rw.error("step is 0");
    int64_t b = starts[i], e = ends[i];
    // Clamp in a way that cannot overflow on INT64_MAX/INT64_MIN.
    if (b < 0)
      b = b < -dim ? -dim - 1 : b;
    if (e < 0)
      e = e < -dim ? -dim - 1 : e;
    if (b < 0)
      b += dim;
    if (e < 0)
      e += dim;
    if (step > 0) {
      b = std::clamp<int64_t>(b, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
    } else if (dim == 0) { // Nothing to take.
      b = e = 0, step = 1;
    } else {
      // Walking backwards, a start before the beginning still takes
      // element 0 (the spec clamps starts to [0, dim - 1], unlike NumPy).
      b = std::clamp<int64_t>(b, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
    }
    s[a] = b;
    l[a] = e;
    st[a] = step;
  }
  return rw.replace(KILN_TRY(rw.create<SliceOp>(
      {x}, {rw.arrayAttr("starts", s), rw.arrayAttr("limits", l),
            rw.arrayAttr("strides", st)})));
}

LogicalResult convertGather(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  Value idx = KILN_TRY(rw.required(1));
  int64_t axis = KILN_TRY(rw.axis(KILN_TRY(rw.intAttr("axis", 0)), NodeRewriter::rankOf(x)));
  return rw.replace(KILN_TRY(rw.create<GatherOp>({x, idx}, {rw.i64Attr("axis", axis)})));
}

LogicalResult convertGatherElements(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  Value idx = KILN_TRY(rw.required(1));
  int64_t axis = KILN_TRY(rw.axis(KILN_TRY(rw.intAttr("axis", 0)), NodeRewriter::rankOf(x)));
  return rw.replace(
      KILN_TRY(rw.create<GatherElementsOp>({x, idx}, {rw.i64Attr("axis", axis)})));
}

LogicalResult convertScatterElements(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  Value idx = KILN_TRY(rw.required(1));
  Value upd = KILN_TRY(rw.required(2));
  int64_t axis = KILN_TRY(rw.axis(KILN_TRY(rw.intAttr("axis", 0)), NodeRewriter::rankOf(x)));
  std::string red = KILN_TRY(rw.strAttr("reduction", "none"));
  return rw.replace(KILN_TRY(rw.create<ScatterElementsOp>(
      {x, idx, upd}, {rw.i64Attr("axis", axis),
                      rw.attr("reduction", rw.builder().getStringAttr(red))})));
}

LogicalResult convertScatterND(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  Value idx = KILN_TRY(rw.required(1));
  Value upd = KILN_TRY(rw.required(2));
  std::string red = KILN_TRY(rw.strAttr("reduction", "none"));
  return rw.replace(KILN_TRY(rw.create<ScatterNDOp>(
      {x, idx, upd}, {rw.attr("reduction", rw.builder().getStringAttr(red))})));
}

/// TopK: k an attribute (opset 1) or a constant input (10+); `largest` and
/// `sorted` from opset 11.
LogicalResult convertTopK(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  int64_t k = 0;
  if (rw.opset() < 10) {
    k = KILN_TRY(rw.intAttr("k", -1));
  } else {
    SmallVector<int64_t> ks = KILN_TRY(rw.constInts(1, "K"));
    if (ks.size() != 1)
      return rw.error("K must hold one value");
    k = ks[0];
  }
  int64_t axis = KILN_TRY(rw.axis(KILN_TRY(rw.intAttr("axis", -1)), NodeRewriter::rankOf(x)));
  int64_t largest = KILN_TRY(rw.intAttr("largest", 1));
  int64_t sorted = KILN_TRY(rw.intAttr("sorted", 1));
  Operation *op = KILN_TRY(rw.createOp<TopKOp>(
      {x}, {rw.i64Attr("k", k), rw.i64Attr("axis", axis),
            rw.attr("largest", rw.builder().getBoolAttr(largest != 0)),
            rw.attr("sorted", rw.builder().getBoolAttr(sorted != 0))}));
  return rw.replace(op->getResults());
}

LogicalResult convertCumSum(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  SmallVector<int64_t> axes = KILN_TRY(rw.constInts(1, "axis"));
  if (axes.size() != 1)
    return rw.error("axis must hold one value");
  int64_t axis = KILN_TRY(rw.axis(axes[0], NodeRewriter::rankOf(x)));
  int64_t exclusive = KILN_TRY(rw.intAttr("exclusive", 0));
  int64_t reverse = KILN_TRY(rw.intAttr("reverse", 0));
  return rw.replace(KILN_TRY(rw.create<CumSumOp>(
      {x}, {rw.i64Attr("axis", axis),
            rw.attr("exclusive", rw.builder().getBoolAttr(exclusive != 0)),
            rw.attr("reverse", rw.builder().getBoolAttr(reverse != 0))})));
}

/// OneHot (composed): equal(indices normalised to [0, depth), inserted as a
/// size-1 axis, against 0..depth-1 along that axis), then select(on, off)
/// from `values` = [off, on]. An index outside [-depth, depth) matches
/// nothing: all off, as ONNX says.
LogicalResult convertOneHot(onnx::NodeOp, NodeRewriter &rw) {
  Value idx = KILN_TRY(rw.required(0));
  Value values = KILN_TRY(rw.required(2));
  int64_t depth = 0;
  Type depthElt = NodeRewriter::elementOf(KILN_TRY(rw.required(1)));
  if (isa<FloatType>(depthElt)) {
    SmallVector<double> d = KILN_TRY(rw.constFloats(1, "depth"));
    if (d.size() != 1)
      return rw.error("depth must hold one value");
    depth = (int64_t)d[0];
  } else {
    SmallVector<int64_t> d = KILN_TRY(rw.constInts(1, "depth"));
    if (d.size() != 1)
      return rw.error("depth must hold one value");
    depth = d[0];
  }
  if (depth < 1)
    return rw.error("depth must be at least 1, got " + std::to_string(depth));
  if (NodeRewriter::shapeOf(values) != ArrayRef<int64_t>{2})
    return rw.error("values must be a 2-element tensor [off, on]");
  int64_t rank = NodeRewriter::rankOf(idx);
  int64_t axis = KILN_TRY(rw.axis(KILN_TRY(rw.intAttr("axis", -1)), rank + 1));
  MLIRContext *ctx = rw.builder().getContext();
  Type i64 = IntegerType::get(ctx, 64);
  if (NodeRewriter::elementOf(idx) != i64)
    idx = rw.cast(idx, i64);
  Value zero = rw.scalar(0, i64), d = rw.scalar((double)depth, i64);
  Value neg = KILN_TRY(rw.create<LessOp>({idx, zero}));
  Value wrapped = KILN_TRY(rw.create<AddOp>({idx, d}));
  idx = KILN_TRY(rw.create<SelectOp>({neg, wrapped, idx}));
  SmallVector<int64_t> shape(NodeRewriter::shapeOf(idx));
  shape.insert(shape.begin() + axis, 1);
  idx = KILN_TRY(rw.reshape(idx, shape));
  SmallVector<int64_t> rshape(rank + 1, 1);
  rshape[axis] = depth;
  SmallVector<int64_t> iota(depth);
  for (int64_t i = 0; i < depth; ++i)
    iota[i] = i;
  Value range = KILN_TRY(rw.reshape(rw.i64s(iota), rshape));
  Value hit = KILN_TRY(rw.create<EqualOp>({idx, range}));
  auto pick = [&](int64_t i) -> FailureOr<Value> {
    Value v = KILN_TRY(rw.create<SliceOp>(
        {values}, {rw.arrayAttr("starts", {i}), rw.arrayAttr("limits", {i + 1}),
                   rw.arrayAttr("strides", {1})}));
    return rw.reshape(v, {});
  };
  Value off = KILN_TRY(pick(0)), on = KILN_TRY(pick(1));
  return rw.replace(KILN_TRY(rw.create<SelectOp>({hit, on, off})));
}

/// A constant i1 [n, m] mask, true where keep(i, j).
template <typename F>
Value constantMask(NodeRewriter &rw, int64_t n, int64_t m, F keep) {
  SmallVector<bool> bits;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j)
      bits.push_back(keep(i, j));
  auto t = RankedTensorType::get({n, m}, rw.builder().getI1Type());
  return rw.constant(DenseElementsAttr::get(t, ArrayRef<bool>(bits)));
}

/// Trilu: keeps the upper (upper = 1) or lower triangle of the last two
/// dims, shifted by the constant k, as a select with a constant mask.
LogicalResult convertTrilu(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  ArrayRef<int64_t> shape = NodeRewriter::shapeOf(x);
  if (shape.size() < 2)
    return rw.error("input must have rank >= 2");
  int64_t k = 0;
  if (rw.input(1)) {
    SmallVector<int64_t> ks = KILN_TRY(rw.constInts(1, "k"));
    if (ks.size() != 1)
      return rw.error("k must be a scalar");
    k = ks[0];
  }
  bool upper = KILN_TRY(rw.intAttr("upper", 1)) != 0;
  Value mask = constantMask(rw, shape[shape.size() - 2], shape.back(),
                            [&](int64_t i, int64_t j) {
                              return upper ? j - i >= k : j - i <= k;
                            });
  Type elt = NodeRewriter::elementOf(x);
  Value zero = isa<FloatType>(elt) ? rw.scalar(0.0, elt) : rw.scalar(0, elt);
  Value zeros = KILN_TRY(rw.broadcast(zero, shape));
  return rw.replace(KILN_TRY(rw.create<SelectOp>({mask, x, zeros})));
}

/// DepthToSpace (DCR or CRD) and SpaceToDepth: reshape, transpose, reshape.
template <bool ToSpace>
LogicalResult convertDepthSpace(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  ArrayRef<int64_t> s = NodeRewriter::shapeOf(x);
  if (s.size() != 4)
    return rw.error("input must be [N, C, H, W]");
  int64_t b = KILN_TRY(rw.intAttr("blocksize", 0));
  if (b < 1)
    return rw.error("blocksize must be >= 1");
  int64_t n = s[0], c = s[1], h = s[2], w = s[3];
  Value y;
  if (ToSpace) {
    if (c % (b * b))
      return rw.error("channels are not a multiple of blocksize^2");
    std::string mode = KILN_TRY(rw.strAttr("mode", "DCR"));
    if (mode != "DCR" && mode != "CRD")
      return rw.error("mode must be DCR or CRD");
    bool dcr = mode == "DCR";
    y = KILN_TRY(rw.reshape(x, dcr ? SmallVector<int64_t>{n, b, b, c / (b * b), h, w}
                                  : SmallVector<int64_t>{n, c / (b * b), b, b, h, w}));
    y = KILN_TRY(rw.transpose(y, dcr ? SmallVector<int64_t>{0, 3, 4, 1, 5, 2}
                                     : SmallVector<int64_t>{0, 1, 4, 2, 5, 3}));
    y = KILN_TRY(rw.reshape(y, {n, c / (b * b), h * b, w * b}));
  } else {
    if (h % b || w % b)
      return rw.error("height and width are not multiples of blocksize");
    y = KILN_TRY(rw.reshape(x, {n, c, h / b, b, w / b, b}));
    y = KILN_TRY(rw.transpose(y, {0, 3, 5, 1, 2, 4}));
    y = KILN_TRY(rw.reshape(y, {n, c * b * b, h / b, w / b}));
  }
  return rw.replace(y);
}

/// EyeLike: a constant identity (shifted by k) of the input's 2-D shape.
LogicalResult convertEyeLike(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  ArrayRef<int64_t> s = NodeRewriter::shapeOf(x);
  if (s.size() != 2)
    return rw.error("input must be 2-D");
  int64_t k = KILN_TRY(rw.intAttr("k", 0));
  Type elt = NodeRewriter::elementOf(x);
  if (rw.hasAttr("dtype")) {
    elt = onnx::getElementType(rw.builder().getContext(), KILN_TRY(rw.intAttr("dtype", 0)));
    if (!elt)
      return rw.error("unsupported dtype");
  }
  Value eye = constantMask(rw, s[0], s[1], [&](int64_t i, int64_t j) { return j - i == k; });
  return rw.replace(rw.cast(eye, elt));
}

LogicalResult convertExpand(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  SmallVector<int64_t> shape = KILN_TRY(rw.constInts(1, "shape"));
  SmallVector<int64_t> out;
  // Expand broadcasts both ways: the result is broadcast(input, shape).
  if (failed(broadcastShapes(NodeRewriter::shapeOf(x), shape, out)))
    return rw.error("input does not broadcast to the requested shape");
  return rw.replace(KILN_TRY(rw.broadcast(x, out)));
}

/// Tile as reshape [1, d0, 1, d1, ...] -> broadcast [r0, d0, r1, d1, ...] ->
/// reshape [r0*d0, r1*d1, ...].
LogicalResult convertTile(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  SmallVector<int64_t> repeats = KILN_TRY(rw.constInts(1, "repeats"));
  ArrayRef<int64_t> in = NodeRewriter::shapeOf(x);
  if (repeats.size() != in.size())
    return rw.error("repeats must have one entry per dimension");
  SmallVector<int64_t> split, wide, out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (repeats[i] < 0)
      return rw.error("repeats must be >= 0");
    split.append({1, in[i]});
    wide.append({repeats[i], in[i]});
    out.push_back(repeats[i] * in[i]);
  }
  Value y = KILN_TRY(rw.reshape(x, split));
  y = KILN_TRY(rw.broadcast(y, wide));
  return rw.replace(KILN_TRY(rw.reshape(y, out)));
}

LogicalResult convertPad(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  int64_t rank = NodeRewriter::rankOf(x);
  std::string mode = KILN_TRY(rw.strAttr("mode", "constant"));
  SmallVector<int64_t> pads;
  double value = 0;
  if (rw.opset() < 11) {
    pads = KILN_TRY(rw.intsAttr("pads"));
    value = KILN_TRY(rw.floatAttr("value", 0.0f));
  } else {
    pads = KILN_TRY(rw.constInts(1, "pads"));
    if (rw.input(2))
      value = KILN_TRY(rw.constFloats(2, "constant_value")).front();
  }
  SmallVector<int64_t> low(rank, 0), high(rank, 0);
  if (rw.opset() >= 18 && rw.input(3)) {
    SmallVector<int64_t> axes = KILN_TRY(rw.constInts(3, "axes"));
    if (pads.size() != 2 * axes.size())
      return rw.error("pads must have two entries per axis");
    for (size_t i = 0; i < axes.size(); ++i) {
      int64_t a = KILN_TRY(rw.axis(axes[i], rank));
      low[a] = pads[i];
      high[a] = pads[i + axes.size()];
    }
  } else {
    if ((int64_t)pads.size() != 2 * rank)
      return rw.error("pads must have two entries per dimension");
    for (int64_t i = 0; i < rank; ++i) {
      low[i] = pads[i];
      high[i] = pads[i + rank];
    }
  }
  return rw.replace(KILN_TRY(rw.create<PadOp>(
      {x}, {rw.arrayAttr("low", low), rw.arrayAttr("high", high),
            rw.attr("mode", rw.builder().getStringAttr(mode)),
            rw.attr("value", rw.builder().getF64FloatAttr(value))})));
}

} // namespace

void kiln::populateONNXShapePatterns(ONNXPatternRegistry &r) {
  constexpr int64_t kMax = 22;
  r.add("Constant", 1, kMax, convertConstant);
  r.add("ConstantOfShape", 9, kMax, convertConstantOfShape);
  r.add("Shape", 1, kMax, convertShape);
  r.add("Size", 1, kMax, convertSize);
  r.add("Range", 11, kMax, convertRange);
  r.add("Reshape", 5, kMax, convertReshape);
  r.add("Flatten", 1, kMax, convertFlatten);
  r.add("Squeeze", 1, kMax, convertSqueeze);
  r.add("Unsqueeze", 1, kMax, convertUnsqueeze);
  r.add("Transpose", 1, kMax, convertTranspose);
  r.add("Concat", 4, kMax, convertConcat);
  r.add("Split", 2, kMax, convertSplit);
  r.add("Slice", 1, kMax, convertSlice);
  r.add("Gather", 1, kMax, convertGather);
  r.add("GatherElements", 11, kMax, convertGatherElements);
  r.add("Scatter", 9, 10, convertScatterElements);
  r.add("ScatterElements", 11, kMax, convertScatterElements);
  r.add("ScatterND", 11, kMax, convertScatterND);
  r.add("TopK", 1, kMax, convertTopK);
  r.add("CumSum", 11, kMax, convertCumSum);
  r.add("OneHot", 9, kMax, convertOneHot);
  r.add("Trilu", 14, kMax, convertTrilu);
  r.add("DepthToSpace", 1, kMax, convertDepthSpace<true>);
  r.add("SpaceToDepth", 1, kMax, convertDepthSpace<false>);
  r.add("EyeLike", 9, kMax, convertEyeLike);
  r.add("Expand", 8, kMax, convertExpand);
  r.add("Tile", 6, kMax, convertTile);
  r.add("Pad", 2, kMax, convertPad);
}
