//===- Random.cpp - dropout -------------------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// dropout(input; ratio, seed) -> (result, mask): training-mode dropout with a
// counter-based mask (Philox-4x32-10, Philox.h), so the mask is a pure
// function of (run seed, op seed, step, element index): identical for any
// thread count, reproducible on resume and across ranks.
//
// The stream layout (training and multi-rank runs depend on it; do not
// change it without bumping the plan format):
//
//   key     = { lo32(ctx.seed), hi32(ctx.seed) }
//   counter = { i / 4,                          (element block, < 2^32)
//               lo32(ctx.step), hi32(ctx.step),
//               lo32(seed) ^ hi32(seed) }       (the op's `seed` attribute)
//   bits(i) = word (i % 4) of philox4x32_10(counter, key)
//   u(i)    = (bits(i) >> 8) * 2^-24            (uniform in [0, 1))
//   keep(i) = u(i) >= ratio
//   mask[i] = keep(i); result[i] = keep(i) ? input[i] / (1 - ratio) : 0
//
// where i is the row-major element index of the input in the whole batch:
// a data-parallel rank holding shard r of N along axis 0 (ExecContext::
// batchShardIndex/Count) numbers its elements from r * numel, so every
// sample gets the mask it gets in the 1-rank run. ratio = 0 keeps
// everything (result == input, mask all true). The comparison is done
// exactly in integers: keep iff (bits >> 8) >= ceil(ratio * 2^24). Inputs
// whose whole batch is above 2^34 elements are refused. f32, f64, f16, bf16 (16-bit scaled in
// float, f64 in double).
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "NormUtil.h"
#include "Philox.h"

#include <memory>
#include <string>
#include <vector>

namespace kiln::rt::cpu {
namespace {

using namespace norm;

constexpr int kLanes = 16;

/// Where a partitioned dropout's block lies in the whole tensor (the
/// `split` and `whole_shape` attributes): per dimension, the block's size,
/// the whole's, and the mesh axes splitting it ("" whole).
struct BlockPlace {
  std::vector<int64_t> local, whole;
  std::vector<std::string> axes;
  bool present() const { return !axes.empty(); }
};

template <typename S> class DropoutKernel final : public Kernel {
public:
  DropoutKernel(int64_t numel, float ratio, int64_t seed, BlockPlace place)
      : numel_(numel),
        threshold_((uint32_t)std::ceil((double)ratio * 16777216.0)),
        scale_(Acc<S>(1) / (Acc<S>(1) - Acc<S>(ratio))),
        seedWord_((uint32_t)(uint64_t)seed ^ (uint32_t)((uint64_t)seed >> 32)),
        place_(std::move(place)) {}

  void run(ExecContext &ctx, const void *const *in, void *const *out) override {
    const S *x = static_cast<const S *>(in[0]);
    S *y = static_cast<S *>(out[0]);
    uint8_t *mask = static_cast<uint8_t *>(out[1]);
    PhiloxKey key = {(uint32_t)ctx.seed, (uint32_t)(ctx.seed >> 32)};
    uint32_t stepLo = (uint32_t)ctx.step, stepHi = (uint32_t)(ctx.step >> 32);
    if (place_.present()) {
      runPlaced(ctx, x, y, mask, key, stepLo, stepHi);
      return;
    }
    if (ctx.batchShardCount < 1 || ctx.batchShardIndex < 0 ||
        ctx.batchShardIndex >= ctx.batchShardCount ||
        numel_ * ctx.batchShardCount > ((int64_t)1 << 34))
      throw Error("kernel 'dropout': batch shard " +
                  std::to_string(ctx.batchShardIndex) + " of " +
                  std::to_string(ctx.batchShardCount) + " of " +
                  std::to_string(numel_) + " elements is out of range");
    // This shard's first element in the whole batch.
    const int64_t offset = ctx.batchShardIndex * numel_;
    // Groups of kLanes Philox blocks (4 * kLanes elements), vectorised.
    int64_t groups = (numel_ + 4 * kLanes - 1) / (4 * kLanes);
    parallelRange(groups, numel_ * 4, [&](int64_t g0, int64_t g1) {
      fill(x, y, mask, offset, 0, numel_, g0, g1, key, stepLo, stepHi);
    });
  }

private:
  /// Elements [i0, i0 + n) of the block, whose first is element `global`
  /// of the whole tensor: groups [g0, g1) of 4 kLanes elements.
  void fill(const S *x, S *y, uint8_t *mask, int64_t global, int64_t i0,
            int64_t n, int64_t g0, int64_t g1, PhiloxKey key, uint32_t stepLo,
            uint32_t stepHi) const {
    const int64_t shift = global % 4;
    uint32_t thr = threshold_;
    Acc<S> scale = scale_;
    uint32_t words[8 * kLanes];
    for (int64_t g = g0; g < g1; ++g) {
      // Elements [e0, e0 + 4 kLanes) are global [global + e0, ...): the
      // blocks from (global + e0) / 4, one group more when the run does
      // not start on a block.
      int64_t e0 = g * 4 * kLanes;
      int64_t b0 = (global + e0) / 4;
      philox4x32_10Lanes<kLanes>((uint32_t)b0, stepLo, stepHi, seedWord_, key,
                                 words);
      if (shift)
        philox4x32_10Lanes<kLanes>((uint32_t)(b0 + kLanes), stepLo, stepHi,
                                   seedWord_, key, words + 4 * kLanes);
      const uint32_t *bits = words + shift;
      int64_t m = std::min<int64_t>(4 * kLanes, n - e0);
      const S *xg = x + i0 + e0;
      S *yg = y + i0 + e0;
      uint8_t *mg = mask + i0 + e0;
#pragma omp simd
      for (int64_t e = 0; e < m; ++e) {
        bool keep = (bits[e] >> 8) >= thr;
        Acc<S> v = ld(xg, e);
        mg[e] = keep ? 1 : 0;
        st(yg, e, keep ? v * scale : Acc<S>(0));
      }
    }
  }

  /// A block of a tensor split along any dimensions: runs of its innermost
  /// unsplit dimensions are contiguous in the whole tensor's numbering.
  void runPlaced(ExecContext &ctx, const S *x, S *y, uint8_t *mask, PhiloxKey key,
                 uint32_t stepLo, uint32_t stepHi) const {
    const size_t rank = place_.local.size();
    std::vector<int64_t> offset(rank, 0);
    int64_t last = -1; // the innermost split dimension
    for (size_t d = 0; d < rank; ++d) {
      if (place_.axes[d].empty())
        continue;
      int64_t parts = place_.whole[d] / place_.local[d];
      int64_t size = ctx.collectives ? ctx.collectives->groupSize(place_.axes[d]) : 1;
      int64_t idx = ctx.collectives ? ctx.collectives->groupRank(place_.axes[d]) : 0;
      if (size != parts && ctx.collectives)
        throw Error("kernel 'dropout': dimension " + std::to_string(d) +
                    " splits into " + std::to_string(parts) +
                    " blocks, but mesh axis '" + place_.axes[d] + "' has " +
                    std::to_string(size) + " ranks");
      offset[d] = idx * place_.local[d];
      last = (int64_t)d;
    }
    // Whole-tensor strides.
    std::vector<int64_t> stride(rank, 1);
    for (int64_t d = (int64_t)rank - 2; d >= 0; --d)
      stride[d] = stride[d + 1] * place_.whole[d + 1];
    int64_t runLen = 1, runs = 1;
    for (size_t d = 0; d < rank; ++d)
      ((int64_t)d > last ? runLen : runs) *= place_.local[d];
    int64_t groups = (runLen + 4 * kLanes - 1) / (4 * kLanes);
    parallelRange(runs, numel_ * 4, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        int64_t global = 0;
        for (int64_t d = last, q = r; d >= 0; --d) {
          global += (q % place_.local[d] + offset[d]) * stride[d];
          q /= place_.local[d];
        }
        fill(x, y, mask, global, r * runLen, runLen, 0, groups, key, stepLo,
             stepHi);
      }
    });
  }

  int64_t numel_;
  uint32_t threshold_;
  Acc<S> scale_;
  uint32_t seedWord_;
  BlockPlace place_;
};

std::unique_ptr<Kernel> makeDropout(const KernelSpec &spec) {
  expectArity(spec, 1, 2);
  const TensorDesc *x = spec.inputs[0];
  expectFloat(spec, x, "input");
  expectDesc(spec, spec.outputs[0], *x, "result");
  expectDesc(spec, spec.outputs[1], TensorDesc{DType::Bool, x->shape}, "mask");
  float ratio = (float)spec.attrs.getFloat("ratio", 0.5);
  if (!(ratio >= 0.0f && ratio < 1.0f))
    throw Error("kernel 'dropout': ratio must be in [0, 1), got " +
                std::to_string(ratio));
  int64_t seed = spec.attrs.getInt("seed", 0);
  if (x->numel() > ((int64_t)1 << 34))
    throw Error("kernel 'dropout': input " + x->str() +
                " has more than 2^34 elements");
  // A block of a partitioned tensor (DropoutOp::localizeAttributes).
  BlockPlace place;
  place.axes = spec.attrs.getStrings("split", {});
  if (!place.axes.empty()) {
    place.local = x->shape;
    place.whole = spec.attrs.getInts("whole_shape", {});
    if (place.axes.size() != x->shape.size() || place.whole.size() != x->shape.size())
      throw Error("kernel 'dropout': 'split' and 'whole_shape' need one entry "
                  "per dimension of " + x->str());
    int64_t n = 1;
    for (size_t d = 0; d < x->shape.size(); ++d) {
      if (place.local[d] < 1 || place.whole[d] % place.local[d] ||
          (place.axes[d].empty() && place.whole[d] != place.local[d]))
        throw Error("kernel 'dropout': the whole shape's dimension " +
                    std::to_string(d) + " (" + std::to_string(place.whole[d]) +
                    ") is not a whole number of " + x->str() + "'s");
      if (place.whole[d] > ((int64_t)1 << 34) / n)
        throw Error("kernel 'dropout': the whole tensor has more than 2^34 elements");
      n *= place.whole[d];
    }
  }
  return dispatchFloat(spec, x->dtype, [&](auto tag) -> std::unique_ptr<Kernel> {
    using S = decltype(tag);
    return std::make_unique<DropoutKernel<S>>(x->numel(), ratio, seed, place);
  });
}

} // namespace

void registerRandomKernels(KernelRegistry &r) { r.add("dropout", makeDropout); }

} // namespace kiln::rt::cpu
