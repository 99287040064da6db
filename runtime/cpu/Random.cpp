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

namespace kiln::rt::cpu {
namespace {

using namespace norm;

constexpr int kLanes = 16;

template <typename S> class DropoutKernel final : public Kernel {
public:
  DropoutKernel(int64_t numel, float ratio, int64_t seed)
      : numel_(numel),
        threshold_((uint32_t)std::ceil((double)ratio * 16777216.0)),
        scale_(Acc<S>(1) / (Acc<S>(1) - Acc<S>(ratio))),
        seedWord_((uint32_t)(uint64_t)seed ^ (uint32_t)((uint64_t)seed >> 32)) {}

  void run(ExecContext &ctx, const void *const *in, void *const *out) override {
    const S *x = static_cast<const S *>(in[0]);
    S *y = static_cast<S *>(out[0]);
    uint8_t *mask = static_cast<uint8_t *>(out[1]);
    PhiloxKey key = {(uint32_t)ctx.seed, (uint32_t)(ctx.seed >> 32)};
    uint32_t stepLo = (uint32_t)ctx.step, stepHi = (uint32_t)(ctx.step >> 32);
    if (ctx.batchShardCount < 1 || ctx.batchShardIndex < 0 ||
        ctx.batchShardIndex >= ctx.batchShardCount ||
        numel_ * ctx.batchShardCount > ((int64_t)1 << 34))
      throw Error("kernel 'dropout': batch shard " +
                  std::to_string(ctx.batchShardIndex) + " of " +
                  std::to_string(ctx.batchShardCount) + " of " +
                  std::to_string(numel_) + " elements is out of range");
    // This shard's first element in the whole batch.
    const int64_t offset = ctx.batchShardIndex * numel_;
    const int64_t shift = offset % 4;
    // Groups of kLanes Philox blocks (4 * kLanes elements), vectorised.
    int64_t groups = (numel_ + 4 * kLanes - 1) / (4 * kLanes);
    uint32_t thr = threshold_;
    Acc<S> scale = scale_;
    parallelRange(groups, numel_ * 4, [&](int64_t g0, int64_t g1) {
      uint32_t words[8 * kLanes];
      for (int64_t g = g0; g < g1; ++g) {
        // Elements [i0, i0 + 4 kLanes) are global [offset + i0, ...): the
        // blocks from (offset + i0) / 4, one group more when the shard does
        // not start on a block.
        int64_t b0 = (offset + g * 4 * kLanes) / 4;
        philox4x32_10Lanes<kLanes>((uint32_t)b0, stepLo, stepHi, seedWord_,
                                   key, words);
        if (shift)
          philox4x32_10Lanes<kLanes>((uint32_t)(b0 + kLanes), stepLo, stepHi,
                                     seedWord_, key, words + 4 * kLanes);
        const uint32_t *bits = words + shift;
        int64_t i0 = g * 4 * kLanes;
        int64_t n = std::min<int64_t>(4 * kLanes, numel_ - i0);
        const S *xg = x + i0;
        S *yg = y + i0;
        uint8_t *mg = mask + i0;
#pragma omp simd
        for (int64_t e = 0; e < n; ++e) {
          bool keep = (bits[e] >> 8) >= thr;
          Acc<S> v = ld(xg, e);
          mg[e] = keep ? 1 : 0;
          st(yg, e, keep ? v * scale : Acc<S>(0));
        }
      }
    });
  }

private:
  int64_t numel_;
  uint32_t threshold_;
  Acc<S> scale_;
  uint32_t seedWord_;
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
  return dispatchFloat(spec, x->dtype, [&](auto tag) -> std::unique_ptr<Kernel> {
    using S = decltype(tag);
    return std::make_unique<DropoutKernel<S>>(x->numel(), ratio, seed);
  });
}

} // namespace

void registerRandomKernels(KernelRegistry &r) { r.add("dropout", makeDropout); }

} // namespace kiln::rt::cpu
