//===- Quantize.cpp - ONNX QuantizeLinear/DequantizeLinear to kiln -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The QDQ ops a quantized model (kiln-train --export-onnx of a --qat model,
// or another tool's) is made of, as kiln elementwise ops in float32:
//
// - QuantizeLinear: saturate(round(x / scale) + zero_point) to the zero
//   point's type (uint8 [0, 255] or int8 [-128, 127]; uint8 without one),
//   rounding halves to even;
// - DequantizeLinear: (x - zero_point) * scale.
//
// scale and zero_point are scalars (per tensor) or 1-D along `axis`
// (opset 13: per channel, default axis 1).
//===----------------------------------------------------------------------===//
#include "PatternUtils.h"

using namespace mlir;
using namespace kiln;

namespace {

/// `v` ([C] along `axis`, or a scalar) shaped to broadcast against a tensor
/// of rank `rank`.
FailureOr<Value> alongAxis(NodeRewriter &rw, Value v, int64_t rank, const char *what) {
  ArrayRef<int64_t> s = NodeRewriter::shapeOf(v);
  if (s.empty())
    return v;
  if (s.size() != 1)
    return rw.error(Twine(what) + " must be a scalar or 1-D, got rank " + Twine(s.size()));
  if (rw.opset() < 13)
    return rw.error(Twine(what) + " must be a scalar before opset 13 (per-axis "
                    "quantization)");
  int64_t axis = KILN_TRY(rw.axis(KILN_TRY(rw.intAttr("axis", 1)), rank));
  SmallVector<int64_t> shape(rank, 1);
  shape[axis] = s[0];
  return rw.reshape(v, shape);
}

/// The range of a quantized element type.
FailureOr<std::pair<double, double>> quantRange(NodeRewriter &rw, Type t) {
  auto i = dyn_cast<IntegerType>(t);
  if (i && i.getWidth() == 8)
    return i.isUnsigned() ? std::make_pair(0.0, 255.0) : std::make_pair(-128.0, 127.0);
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return rw.error("the quantized type must be uint8 or int8, got " + os.str());
}

LogicalResult convertQuantizeLinear(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  Value scale = KILN_TRY(rw.required(1));
  Value zp = rw.input(2);
  Type ft = NodeRewriter::elementOf(x);
  if (!isa<FloatType>(ft))
    return rw.error("x must be floating-point");
  Type qt = zp ? NodeRewriter::elementOf(zp)
               : IntegerType::get(rw.builder().getContext(), 8, IntegerType::Unsigned);
  auto [lo, hi] = KILN_TRY(quantRange(rw, qt));
  int64_t rank = NodeRewriter::rankOf(x);
  Value s = KILN_TRY(alongAxis(rw, rw.cast(scale, ft), rank, "y_scale"));
  Value v = KILN_TRY(rw.create<RoundOp>({KILN_TRY(rw.create<DivOp>({x, s}))}));
  if (zp)
    v = KILN_TRY(rw.create<AddOp>(
        {v, KILN_TRY(alongAxis(rw, rw.cast(zp, ft), rank, "y_zero_point"))}));
  v = KILN_TRY(rw.create<MaxOp>({v, rw.scalar(lo, ft)}));
  v = KILN_TRY(rw.create<MinOp>({v, rw.scalar(hi, ft)}));
  return rw.replace(rw.cast(v, qt));
}

LogicalResult convertDequantizeLinear(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  Value scale = KILN_TRY(rw.required(1));
  Value zp = rw.input(2);
  Type ft = NodeRewriter::elementOf(scale);
  if (!isa<FloatType>(ft))
    return rw.error("x_scale must be floating-point");
  int64_t rank = NodeRewriter::rankOf(x);
  Value v = rw.cast(x, ft);
  if (zp)
    v = KILN_TRY(rw.create<SubOp>(
        {v, KILN_TRY(alongAxis(rw, rw.cast(zp, ft), rank, "x_zero_point"))}));
  return rw.replace(
      KILN_TRY(rw.create<MulOp>({v, KILN_TRY(alongAxis(rw, scale, rank, "x_scale"))})));
}

} // namespace

void kiln::populateONNXQuantizePatterns(ONNXPatternRegistry &r) {
  // Opset 19 adds float8 types and saturate, 21 blocked quantization.
  constexpr int64_t kMax = 18;
  r.add("QuantizeLinear", 10, kMax, convertQuantizeLinear);
  r.add("DequantizeLinear", 10, kMax, convertDequantizeLinear);
}
