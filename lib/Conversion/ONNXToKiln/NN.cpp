//===- NN.cpp - ONNX neural-network ops to kiln -----------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Conv, ConvTranspose, pooling, BatchNormalization (inference and training
// mode), LayerNormalization, Dropout and the ONNX loss ops. auto_pad and
// ceil_mode are resolved here into explicit pads, so kiln ops only know
// explicit padding.
//===----------------------------------------------------------------------===//
#include "PatternUtils.h"

#include "llvm/Support/xxhash.h"

using namespace mlir;
using namespace kiln;

namespace {

/// Window geometry of a conv or pool node, read from its attributes.
struct Window {
  SmallVector<int64_t> kernel, strides, dilations, pads;
};

/// Reads kernel_shape/strides/dilations/pads/auto_pad for `spatial` dims of
/// `inShape` ([N, C, D...]) and resolves auto_pad to explicit pads.
FailureOr<Window> readWindow(NodeRewriter &rw, ArrayRef<int64_t> inShape,
                             ArrayRef<int64_t> kernelDefault) {
  size_t spatial = inShape.size() - 2;
  Window w;
  w.kernel = KILN_TRY(rw.intsAttr("kernel_shape", kernelDefault));
  w.strides = KILN_TRY(rw.intsAttr("strides", SmallVector<int64_t>(spatial, 1)));
  w.dilations = KILN_TRY(rw.intsAttr("dilations", SmallVector<int64_t>(spatial, 1)));
  w.pads = KILN_TRY(rw.intsAttr("pads", SmallVector<int64_t>(2 * spatial, 0)));
  if (w.kernel.size() != spatial || w.strides.size() != spatial ||
      w.dilations.size() != spatial || w.pads.size() != 2 * spatial)
    return rw.error("kernel_shape, strides, dilations and pads must have one "
                    "entry per spatial dimension (pads two)");
  for (size_t i = 0; i < spatial; ++i)
    if (w.strides[i] < 1 || w.dilations[i] < 1 || w.kernel[i] < 1)
      return rw.error("kernel_shape, strides and dilations must be >= 1");
  std::string autoPad = KILN_TRY(rw.strAttr("auto_pad", "NOTSET"));
  if (autoPad == "NOTSET")
    return w;
  if (autoPad == "VALID") {
    std::fill(w.pads.begin(), w.pads.end(), 0);
    return w;
  }
  if (autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER")
    return rw.error("unknown auto_pad '" + autoPad + "'");
  for (size_t i = 0; i < spatial; ++i) {
    int64_t in = inShape[i + 2];
    int64_t out = (in + w.strides[i] - 1) / w.strides[i];
    int64_t span = (w.kernel[i] - 1) * w.dilations[i] + 1;
    int64_t total = std::max<int64_t>(0, (out - 1) * w.strides[i] + span - in);
    int64_t small = total / 2, large = total - small;
    w.pads[i] = autoPad == "SAME_UPPER" ? small : large;
    w.pads[i + spatial] = autoPad == "SAME_UPPER" ? large : small;
  }
  return w;
}

FailureOr<Value> spatialInput(NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  if (NodeRewriter::rankOf(x) < 3)
    return rw.error("input must be [N, C, D1, ...] with at least one spatial dim");
  return x;
}

/// Adds a per-channel bias [C] to a [N, C, ...] value.
FailureOr<Value> addChannelBias(NodeRewriter &rw, Value y, Value bias) {
  int64_t rank = NodeRewriter::rankOf(y);
  SmallVector<int64_t> shape(rank, 1);
  shape[1] = NodeRewriter::shapeOf(y)[1];
  if (NodeRewriter::shapeOf(bias) != ArrayRef<int64_t>{shape[1]})
    return rw.error("bias must have one entry per output channel");
  Value b = KILN_TRY(rw.reshape(bias, shape));
  return rw.create<AddOp>({y, b});
}

LogicalResult convertConv(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(spatialInput(rw));
  Value w = KILN_TRY(rw.required(1));
  if (NodeRewriter::rankOf(w) != NodeRewriter::rankOf(x))
    return rw.error("weight rank differs from input rank");
  Window win = KILN_TRY(readWindow(rw, NodeRewriter::shapeOf(x),
                                   NodeRewriter::shapeOf(w).drop_front(2)));
  if (ArrayRef<int64_t>(win.kernel) != NodeRewriter::shapeOf(w).drop_front(2))
    return rw.error("kernel_shape disagrees with the weight's shape");
  int64_t group = KILN_TRY(rw.intAttr("group", 1));
  Value y = KILN_TRY(rw.create<ConvOp>(
      {x, w}, {rw.arrayAttr("strides", win.strides),
               rw.arrayAttr("dilations", win.dilations),
               rw.arrayAttr("padding", win.pads), rw.i64Attr("groups", group)}));
  if (Value bias = rw.input(2))
    y = KILN_TRY(addChannelBias(rw, y, bias));
  return rw.replace(y);
}

LogicalResult convertConvTranspose(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(spatialInput(rw));
  Value w = KILN_TRY(rw.required(1));
  ArrayRef<int64_t> in = NodeRewriter::shapeOf(x);
  if (NodeRewriter::rankOf(w) != (int64_t)in.size())
    return rw.error("weight rank differs from input rank");
  size_t spatial = in.size() - 2;
  SmallVector<int64_t> kernel(NodeRewriter::shapeOf(w).drop_front(2));
  SmallVector<int64_t> strides =
      KILN_TRY(rw.intsAttr("strides", SmallVector<int64_t>(spatial, 1)));
  SmallVector<int64_t> dilations =
      KILN_TRY(rw.intsAttr("dilations", SmallVector<int64_t>(spatial, 1)));
  SmallVector<int64_t> pads =
      KILN_TRY(rw.intsAttr("pads", SmallVector<int64_t>(2 * spatial, 0)));
  SmallVector<int64_t> outPad =
      KILN_TRY(rw.intsAttr("output_padding", SmallVector<int64_t>(spatial, 0)));
  SmallVector<int64_t> outShape = KILN_TRY(rw.intsAttr("output_shape"));
  std::string autoPad = KILN_TRY(rw.strAttr("auto_pad", "NOTSET"));
  if (strides.size() != spatial || dilations.size() != spatial ||
      pads.size() != 2 * spatial || outPad.size() != spatial)
    return rw.error("strides, dilations, pads and output_padding must have one "
                    "entry per spatial dimension (pads two)");
  if (!outShape.empty() && outShape.size() != spatial)
    outShape = SmallVector<int64_t>(ArrayRef<int64_t>(outShape).take_back(spatial));
  if (!outShape.empty() || autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    // Pads follow from the requested output size (ONNX's total_padding):
    // SAME_UPPER puts the odd one at the end, anything else (SAME_LOWER, and
    // NOTSET with output_shape) at the beginning, as the spec's equations do.
    for (size_t i = 0; i < spatial; ++i) {
      int64_t target = outShape.empty() ? in[i + 2] * strides[i] : outShape[i];
      int64_t total = strides[i] * (in[i + 2] - 1) + outPad[i] +
                      ((kernel[i] - 1) * dilations[i] + 1) - target;
      if (total < 0) {
        // An output_shape beyond what the input covers (the ONNX test
        // convtranspose_output_shape): the extra end positions are the
        // zeros output_padding adds.
        outPad[i] -= total;
        pads[i] = pads[i + spatial] = 0;
        continue;
      }
      bool upper = autoPad == "SAME_UPPER";
      pads[i] = upper ? total / 2 : total - total / 2;
      pads[i + spatial] = total - pads[i];
    }
  } else if (autoPad == "VALID") {
    std::fill(pads.begin(), pads.end(), 0);
  }
  int64_t group = KILN_TRY(rw.intAttr("group", 1));
  Value y = KILN_TRY(rw.create<ConvTransposeOp>(
      {x, w}, {rw.arrayAttr("strides", strides), rw.arrayAttr("dilations", dilations),
               rw.arrayAttr("padding", pads), rw.arrayAttr("output_padding", outPad),
               rw.i64Attr("groups", group)}));
  if (Value bias = rw.input(2))
    y = KILN_TRY(addChannelBias(rw, y, bias));
  return rw.replace(y);
}

/// ceil_mode: the extra end padding per spatial dim that makes floor-mode
/// arithmetic produce the ceil-mode output size (a window must still start
/// inside the input or its begin padding, as in PyTorch).
SmallVector<int64_t> ceilPads(ArrayRef<int64_t> inShape, const Window &w) {
  size_t spatial = inShape.size() - 2;
  SmallVector<int64_t> extra(spatial, 0);
  for (size_t i = 0; i < spatial; ++i) {
    int64_t in = inShape[i + 2] + w.pads[i] + w.pads[i + spatial];
    int64_t span = (w.kernel[i] - 1) * w.dilations[i] + 1;
    if (in < span)
      continue;
    int64_t out = (in - span + w.strides[i] - 1) / w.strides[i] + 1;
    if ((out - 1) * w.strides[i] >= inShape[i + 2] + w.pads[i])
      --out;
    extra[i] = std::max<int64_t>(0, (out - 1) * w.strides[i] + span - in);
  }
  return extra;
}

template <bool IsMax>
LogicalResult convertPool(onnx::NodeOp node, NodeRewriter &rw) {
  Value x = KILN_TRY(spatialInput(rw));
  ArrayRef<int64_t> in = NodeRewriter::shapeOf(x);
  if (!rw.hasAttr("kernel_shape"))
    return rw.error("kernel_shape is required");
  Window w = KILN_TRY(readWindow(rw, in, {}));
  size_t spatial = in.size() - 2;
  SmallVector<int64_t> extra(spatial, 0);
  if (KILN_TRY(rw.intAttr("ceil_mode", 0)))
    extra = ceilPads(in, w);
  SmallVector<int64_t> pads = w.pads;
  for (size_t i = 0; i < spatial; ++i)
    pads[i + spatial] += extra[i];
  SmallVector<NamedAttribute> attrs = {
      rw.arrayAttr("kernel", w.kernel), rw.arrayAttr("strides", w.strides),
      rw.arrayAttr("dilations", w.dilations), rw.arrayAttr("padding", pads)};
  if constexpr (IsMax) {
    if (KILN_TRY(rw.intAttr("storage_order", 0)) != 0)
      return rw.error("storage_order = 1 is not supported");
    return rw.replace(KILN_TRY(rw.create<MaxPoolOp>({x}, attrs)));
  } else {
    bool includePad = KILN_TRY(rw.intAttr("count_include_pad", 0)) != 0;
    attrs.push_back(rw.attr("count_include_pad", rw.builder().getBoolAttr(includePad)));
    if (llvm::any_of(extra, [](int64_t e) { return e != 0; }))
      attrs.push_back(rw.arrayAttr("ceil_pad", extra));
    return rw.replace(KILN_TRY(rw.create<AvgPoolOp>({x}, attrs)));
  }
}

template <typename OpTy>
LogicalResult convertGlobalPool(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(spatialInput(rw));
  SmallVector<int64_t> axes;
  for (int64_t i = 2, e = NodeRewriter::rankOf(x); i < e; ++i)
    axes.push_back(i);
  return rw.replace(KILN_TRY(rw.create<OpTy>(
      {x}, {rw.arrayAttr("axes", axes), rw.attr("keepdims", rw.builder().getBoolAttr(true))})));
}

/// BatchNormalization. Training mode is the `training_mode` attribute from
/// opset 14; before, it is implied by a use of the running-statistics outputs.
/// ONNX's momentum weights the old running value (PyTorch's is 1 - that).
LogicalResult convertBatchNorm(onnx::NodeOp node, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  SmallVector<Value> params;
  for (unsigned i = 1; i <= 4; ++i) {
    Value p = KILN_TRY(rw.required(i));
    params.push_back(rw.cast(p, NodeRewriter::elementOf(x)));
  }
  float eps = KILN_TRY(rw.floatAttr("epsilon", 1e-5f));
  float momentum = KILN_TRY(rw.floatAttr("momentum", 0.9f));
  bool training;
  if (rw.opset() >= 14) {
    training = KILN_TRY(rw.intAttr("training_mode", 0)) != 0;
  } else {
    training = llvm::any_of(node.getResults().drop_front(),
                            [](Value r) { return !r.use_empty(); });
    for (unsigned i = 3; i < node.getNumResults(); ++i)
      if (!node.getResult(i).use_empty())
        return rw.error("the saved_mean/saved_var outputs are not supported");
  }
  if (!training)
    return rw.replace(KILN_TRY(rw.create<BatchNormOp>(
        {x, params[0], params[1], params[2], params[3]}, {rw.f32Attr("epsilon", eps)})));
  Operation *op = KILN_TRY(rw.createOp<BatchNormTrainOp>(
      {x, params[0], params[1], params[2], params[3]},
      {rw.f32Attr("epsilon", eps), rw.f32Attr("momentum", momentum)}));
  return rw.replace(op->getResults().take_front(
      std::min<unsigned>(3, node.getNumResults())));
}

/// InstanceNormalization: per (sample, channel), over the spatial dims,
/// y = scale * (x - mean) / sqrt(var + epsilon) + B, composed from kiln ops.
LogicalResult convertInstanceNorm(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  Value scale = KILN_TRY(rw.required(1));
  Value bias = KILN_TRY(rw.required(2));
  ArrayRef<int64_t> s = NodeRewriter::shapeOf(x);
  if (s.size() < 3)
    return rw.error("input must be [N, C, D...]");
  float eps = KILN_TRY(rw.floatAttr("epsilon", 1e-5f));
  Type elt = NodeRewriter::elementOf(x);
  SmallVector<int64_t> axes, cshape = {s[1]};
  for (size_t i = 2; i < s.size(); ++i) {
    axes.push_back(i);
    cshape.push_back(1);
  }
  OpBuilder &b = rw.builder();
  auto mean = [&](Value v) {
    return rw.create<ReduceMeanOp>({v}, {rw.arrayAttr("axes", axes),
                                         rw.attr("keepdims", b.getBoolAttr(true))});
  };
  Value m = KILN_TRY(mean(x));
  Value d = KILN_TRY(rw.create<SubOp>({x, m}));
  Value var = KILN_TRY(mean(KILN_TRY(rw.create<MulOp>({d, d}))));
  Value inv = KILN_TRY(rw.create<RsqrtOp>({KILN_TRY(rw.create<AddOp>({var, rw.scalar(eps, elt)}))}));
  Value y = KILN_TRY(rw.create<MulOp>({d, inv}));
  y = KILN_TRY(rw.create<MulOp>({y, KILN_TRY(rw.reshape(scale, cshape))}));
  return rw.replace(KILN_TRY(rw.create<AddOp>({y, KILN_TRY(rw.reshape(bias, cshape))})));
}

LogicalResult convertLayerNorm(onnx::NodeOp node, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  Value scale = KILN_TRY(rw.required(1));
  int64_t rank = NodeRewriter::rankOf(x);
  int64_t axis = KILN_TRY(rw.axis(KILN_TRY(rw.intAttr("axis", -1)), rank));
  float eps = KILN_TRY(rw.floatAttr("epsilon", 1e-5f));
  ArrayRef<int64_t> normShape = NodeRewriter::shapeOf(x).drop_front(axis);
  // Scale and bias broadcast to the normalised shape in ONNX.
  scale = KILN_TRY(rw.broadcast(scale, normShape));
  Value bias = rw.input(2);
  if (bias)
    bias = KILN_TRY(rw.broadcast(bias, normShape));
  else
    bias = KILN_TRY(rw.broadcast(rw.scalar(0.0, NodeRewriter::elementOf(x)), normShape));
  Operation *op = KILN_TRY(rw.createOp<LayerNormOp>(
      {x, scale, bias}, {rw.i64Attr("axis", axis), rw.f32Attr("epsilon", eps)}));
  return rw.replace(op->getResults().take_front(node.getNumResults()));
}

/// Dropout: from opset 12 the ratio and training_mode are (constant) inputs;
/// before, Dropout is the identity at run time. Outside training, or with
/// ratio 0, the output is the input and the mask all true.
LogicalResult convertDropout(onnx::NodeOp node, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  double ratio = 0.5;
  bool training = false;
  if (rw.opset() >= 12) {
    if (rw.input(1))
      ratio = KILN_TRY(rw.constFloats(1, "ratio")).front();
    if (rw.input(2))
      training = KILN_TRY(rw.constInts(2, "training_mode")).front() != 0;
  }
  if (!training || ratio == 0.0) {
    SmallVector<Value> results = {x};
    if (node.getNumResults() > 1) {
      auto maskType = RankedTensorType::get(NodeRewriter::shapeOf(x),
                                            rw.builder().getI1Type());
      results.push_back(rw.constant(DenseElementsAttr::get(maskType, true)));
    }
    return rw.replace(results);
  }
  // The mask stream is keyed by the node's name (its source position when the
  // name was lost), so it is stable across recompiles and independent of node
  // order, and no two Dropouts share a stream.
  int64_t seed = KILN_TRY(rw.intAttr(
      "seed", (int64_t)(llvm::xxh3_64bits(node.getNodeKey()) & 0x7fffffff)));
  Operation *op = KILN_TRY(rw.createOp<DropoutOp>(
      {x}, {rw.f32Attr("ratio", (float)ratio), rw.i64Attr("seed", seed)}));
  return rw.replace(op->getResults().take_front(node.getNumResults()));
}

/// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss: scores [N, C, D...]
/// with the class on axis 1, labels [N, D...], optional weights [C].
template <typename OpTy, bool WithLogProb>
LogicalResult convertLoss(onnx::NodeOp node, NodeRewriter &rw) {
  Value scores = KILN_TRY(rw.required(0));
  Value labels = KILN_TRY(rw.required(1));
  if (NodeRewriter::rankOf(scores) < 2)
    return rw.error("scores must be [N, C, ...]");
  SmallVector<Value> operands = {scores, labels};
  if (Value w = rw.input(2))
    operands.push_back(w);
  std::string reduction = KILN_TRY(rw.strAttr("reduction", "mean"));
  SmallVector<NamedAttribute> attrs = {
      rw.attr("reduction", rw.builder().getStringAttr(reduction)),
      rw.i64Attr("class_axis", 1)};
  if (rw.hasAttr("ignore_index"))
    attrs.push_back(rw.i64Attr("ignore_index", KILN_TRY(rw.intAttr("ignore_index", 0))));
  SmallVector<Value> results = {KILN_TRY(rw.create<OpTy>(operands, attrs))};
  if (WithLogProb && node.getNumResults() > 1 && !node.getResult(1).use_empty())
    results.push_back(KILN_TRY(rw.create<LogSoftmaxOp>({scores}, {rw.i64Attr("axis", 1)})));
  return rw.replace(results);
}

} // namespace

void kiln::populateONNXNNPatterns(ONNXPatternRegistry &r) {
  constexpr int64_t kMax = 22;
  r.add("Conv", 1, kMax, convertConv);
  r.add("ConvTranspose", 1, kMax, convertConvTranspose);
  r.add("MaxPool", 8, kMax, convertPool<true>);
  r.add("AveragePool", 7, kMax, convertPool<false>);
  r.add("GlobalAveragePool", 1, kMax, convertGlobalPool<ReduceMeanOp>);
  r.add("GlobalMaxPool", 1, kMax, convertGlobalPool<ReduceMaxOp>);
  r.add("BatchNormalization", 9, kMax, convertBatchNorm);
  r.add("LayerNormalization", 17, kMax, convertLayerNorm);
  r.add("InstanceNormalization", 6, kMax, convertInstanceNorm);
  r.add("Dropout", 7, kMax, convertDropout);
  r.add("SoftmaxCrossEntropyLoss", 12, kMax,
        convertLoss<SoftmaxCrossEntropyOp, /*WithLogProb=*/true>);
  r.add("NegativeLogLikelihoodLoss", 12, kMax,
        convertLoss<NllLossOp, /*WithLogProb=*/false>);
}
