//===- KilnCanonicalize.cpp - canonicalization patterns of kiln ops -------===//
// SPDX-License-Identifier: Apache-2.0
//
// Rewrites that make a kiln op cheaper without changing what it computes.
//
// kiln.conv, dead kernel taps: when the input is small next to the kernel
// and its padding (a 3x3 convolution, padding 1, over a 1x1 or 2x2 feature
// map, as at the end of a ResNet on 32x32 images), some kernel taps only ever
// multiply padding zeros. The conv is rewritten to slice those taps off the
// weight and drop the padding they would have read:
//
//   conv(x, w[O, C, 3, 3], pad 1) over 1x1   ->   conv(x, slice(w)[O, C, 1, 1], pad 0)
//
// The result is the same sum without its zero terms. The forward, the
// input gradient and the weight gradient (through slice's VJP, which pads
// the kept taps' gradient with zeros) all shrink with it: 9x less work for
// the 1x1 case.
//
// kiln.matmul, operand transposes: a transpose that only swaps an operand's
// last two dimensions becomes the matmul's transpose flag (oneDNN reads the
// operand through strides), so a Linear layer's weight is not copied
// transposed every step:
//
//   matmul(x, transpose(w, [1, 0]))   ->   matmul(x, w) {transpose_rhs}
//
// Through a cast too (mixed precision's bf16 copy of a transposed weight):
// matmul(x, cast(transpose(w))) -> matmul(x, cast(w)) {transpose_rhs}, the
// cast then shared with the weight's other uses.
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Kiln/IR/KilnOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace kiln;

namespace {

struct ConvDropDeadTaps : OpRewritePattern<ConvOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ConvOp op, PatternRewriter &rewriter) const override {
    auto xt = dyn_cast<RankedTensorType>(op.getInput().getType());
    auto wt = dyn_cast<RankedTensorType>(op.getWeight().getType());
    auto yt = dyn_cast<RankedTensorType>(op.getType());
    if (!xt || !wt || !yt || !xt.hasStaticShape() || !wt.hasStaticShape() ||
        !yt.hasStaticShape())
      return failure();
    size_t nsp = xt.getRank() - 2;
    ArrayRef<int64_t> strides = op.getStrides(), dil = op.getDilations(),
                      pad = op.getPadding();
    SmallVector<int64_t> starts(wt.getRank(), 0), limits(wt.getShape()),
        steps(wt.getRank(), 1), newPad(pad);
    bool cropped = false;
    for (size_t i = 0; i < nsp; ++i) {
      int64_t in = xt.getDimSize(2 + i), out = yt.getDimSize(2 + i),
              k = wt.getDimSize(2 + i), s = strides[i], d = dil[i], p = pad[i];
      // Tap t reads input positions o*s - p + t*d, o in [0, out): it is live
      // when that range meets [0, in). Live taps form one interval.
      auto live = [&](int64_t t) {
        int64_t first = t * d - p, last = (out - 1) * s - p + t * d;
        return last >= 0 && first < in;
      };
      int64_t lo = 0, hi = k;
      while (lo < k && !live(lo))
        ++lo;
      while (hi > lo && !live(hi - 1))
        --hi;
      if (lo == hi || (lo == 0 && hi == k))
        continue;
      // The cropped kernel starts lo*d later: that much less begin padding,
      // and the end padding that keeps the output size.
      int64_t padLo = p - lo * d;
      int64_t span = d * (hi - lo - 1) + 1;
      int64_t padHi = (out - 1) * s + span - in - padLo;
      if (padLo < 0 || padHi < 0)
        continue;
      starts[2 + i] = lo;
      limits[2 + i] = hi;
      newPad[i] = padLo;
      newPad[i + nsp] = padHi;
      cropped = true;
    }
    if (!cropped)
      return failure();
    Location loc = op.getLoc();
    Value w = SliceOp::create(rewriter, loc, op.getWeight(),
                              rewriter.getDenseI64ArrayAttr(starts),
                              rewriter.getDenseI64ArrayAttr(limits),
                              rewriter.getDenseI64ArrayAttr(steps));
    rewriter.replaceOpWithNewOp<ConvOp>(op, yt, op.getInput(), w, op.getStridesAttr(),
                                        op.getDilationsAttr(),
                                        rewriter.getDenseI64ArrayAttr(newPad),
                                        op.getGroupsAttr());
    return success();
  }
};

/// Whether `perm` swaps the last two dimensions and keeps the others.
bool swapsLastTwo(ArrayRef<int64_t> perm) {
  int64_t n = (int64_t)perm.size();
  if (n < 2 || perm[n - 1] != n - 2 || perm[n - 2] != n - 1)
    return false;
  for (int64_t i = 0; i + 2 < n; ++i)
    if (perm[i] != i)
      return false;
  return true;
}

struct MatmulFoldTranspose : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  /// The operand without its last-two-dims transpose (through one cast),
  /// or null.
  static Value untransposed(PatternRewriter &rw, Value v) {
    if (auto t = v.getDefiningOp<TransposeOp>())
      return swapsLastTwo(t.getPerm()) ? t.getInput() : Value();
    auto c = v.getDefiningOp<CastOp>();
    auto t = c ? c.getInput().getDefiningOp<TransposeOp>() : TransposeOp();
    if (!t || !swapsLastTwo(t.getPerm()))
      return {};
    auto in = cast<RankedTensorType>(t.getInput().getType());
    rw.setInsertionPointAfterValue(t.getInput());
    return CastOp::create(rw, c.getLoc(),
                          RankedTensorType::get(in.getShape(),
                                                getElementTypeOrSelf(c.getType())),
                          t.getInput());
  }

  LogicalResult matchAndRewrite(MatmulOp op, PatternRewriter &rw) const override {
    OpBuilder::InsertionGuard guard(rw);
    Value lhs = untransposed(rw, op.getLhs());
    Value rhs = untransposed(rw, op.getRhs());
    if (!lhs && !rhs)
      return failure();
    rw.setInsertionPoint(op);
    auto m = MatmulOp::create(rw, op.getLoc(), op.getType(), lhs ? lhs : op.getLhs(),
                              rhs ? rhs : op.getRhs(),
                              rw.getBoolAttr(op.getTransposeLhs() != bool(lhs)),
                              rw.getBoolAttr(op.getTransposeRhs() != bool(rhs)));
    rw.replaceOp(op, m.getResult());
    return success();
  }
};

} // namespace

void MatmulOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                           MLIRContext *context) {
  results.add<MatmulFoldTranspose>(context);
}

void ConvOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                         MLIRContext *context) {
  results.add<ConvDropDeadTaps>(context);
}
