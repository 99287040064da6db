//===- Augment.h - per-sample data augmentation -----------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// `--augment SPEC` transforms every training sample after the loader has
// gathered it (docs/Training.md, "Augmentation"). Each transform is a pure
// function of (seed, epoch, sample id, its place in SPEC) and the data, so
// a resumed run, any number of loader threads and any number of ranks see
// the same augmented samples as one uninterrupted 1-rank run.
//
// SPEC
// ----
//   SPEC   := CLAUSE (';' CLAUSE)*
//   CLAUSE := [INPUT ':'] ITEM (',' ITEM)*
//   ITEM   := KEY ['=' VALUE]
// A clause transforms one data input: INPUT names it, or, without a prefix,
// the only non-label input of the kind its transforms need (float for
// image transforms, integer for token transforms). A VALUE may hold commas:
// a comma-separated piece that does not start with a KEY continues the
// value before it ("jitter=0.4,0.4,0.4,flip" is jitter 0.4/0.4/0.4, then
// flip). Each KEY appears at most once per clause; transforms run in the
// order written.
//
//   Options of the clause (not transforms):
//     image=CxHxW | HxW  read the input's samples as C×H×W images, channel
//                        first (a flat [64] digit is image=1x8x8). Without
//                        it, samples of shape [C,H,W] or [H,W] are images.
//     max=V | none       the pixel range [0, V] jitter clamps to (default 1;
//                        torchvision's bound for float images); none: no
//                        clamping.
//     pad=P              zero padding of crop (default 0).
//     ignore=V           with mask: the labels input (integer, as many
//                        values per sample as the tokens) is set to V at
//                        every position not selected, as BERT trains only
//                        on masked positions (the loss must ignore V).
//   Image transforms (float input, f32 or f64; crop, flip and cutmix any):
//     crop=S | HxW       random crop of the image zero-padded by `pad` on
//                        every side: torchvision RandomCrop(S, padding=P).
//                        The crop fills the model's fixed input, so S must
//                        be the image's H×W.
//     flip[=P]           horizontal flip with probability P (0.5).
//     jitter=B[,C[,S]]   torchvision ColorJitter(brightness=B, contrast=C,
//                        saturation=S) in the fixed order B, C, S (torchvision
//                        shuffles the order); a factor f ~ U[max(0, 1-X),
//                        1+X] each. Contrast needs 1 or 3 channels,
//                        saturation 3.
//     normalize=M/S      (x - M[c]) / S[c]; M and S are comma lists of one
//                        value per channel (or one for all).
//     mixup=ALPHA        x = λ·x + (1-λ)·x', labels likewise, λ ~ Beta(α,α);
//                        x' is a partner sample (below).
//     cutmix=ALPHA       a box of the partner replaces the same box of x
//                        (timm's rand_bbox); λ = the kept area fraction.
//                        Both mixup and cutmix: each sample takes one of the
//                        two with probability 1/2 (timm's switch_prob 0.5).
//   Token transforms (integer input):
//     mask=P,ID,VOCAB    BERT masking: each token is selected with
//                        probability P; a selected token becomes ID with
//                        probability 0.8, a random token in [0, VOCAB) with
//                        0.1, and stays with 0.1.
//     substitute=P,FILE  each token t in [0, V) is, with probability P,
//                        replaced by a random entry of row t of FILE, an
//                        integer .npy [V, K] of substitutes (synonyms);
//                        negative entries pad short rows and are never
//                        picked; a row with none leaves t.
//
// The loader's part: after gathering a batch, call apply() for each row b
// with the row's dataset index, the step's epoch and kiln-train's --seed
// (so the result does not depend on ranks, threads or resumption).
// Mixup and cutmix need soft labels: the labels input is float [C]
// (kiln-compile --soft-labels), and the loader hands apply() one-hot rows
// (and FetchSample returns them) for an integer labels file.
// The partner is a whole-dataset sample fetched through FetchSample, raw,
// and put through the clause's transforms before the mixing one (with its
// own streams, below), so both images are alike (cropped, normalized).
//
// Randomness
// ----------
// SplitMix64 used as a counter-based generator (all arithmetic mod 2^64):
//
//   G = 0x9E3779B97F4A7C15
//   mix(z):  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
//            z = (z ^ (z >> 27)) * 0x94D049BB133111EB;  return z ^ (z >> 31)
//   h(x)     = mix(x + G)
//   key(seed, epoch, sample, slot) = h(h(h(h(seed) ^ epoch) ^ sample) ^ slot)
//   bits(K, i)    = mix(K + (i + 1) * G)           draw i of stream K
//   uniform(K, i) = (bits(K, i) >> 11) * 2^-53     a double in [0, 1)
//   below(K, i, n) = bits(K, i) mod n
//
// `sample` is the sample's index in the dataset and `slot` the transform's
// index t in SPEC (0, 1, ... over every transform of every clause in
// order; the options image, max, pad and ignore are not transforms; crop
// with pad is one; mixup and cutmix together are one, at the first's
// place). A mixing partner's copy of transform t uses slot 2^32 + t of the
// sample being mixed. The draws of each transform:
//
//   crop      i0 = below(K, 0, 2P+1), j0 = below(K, 1, 2P+1);
//             out[c,y,x] = padded[c, y+i0, x+j0] (zero outside the image).
//   flip      uniform(K, 0) < P.
//   jitter    f_b, f_c, f_s = lo + (hi - lo) * uniform(K, 0 | 1 | 2)
//             (double, then float32), each applied only when its X > 0:
//               brightness x = clamp(x * f)
//               contrast   m = the mean over H×W of gray (sum in double in
//                          memory order, divided, then float32);
//                          x = clamp(f * x + (1 - f) * m)
//               saturation x = clamp(f * x + (1 - f) * gray)
//             with gray = 0.2989*R + 0.587*G + 0.114*B (float32, left to
//             right; the image itself with one channel), clamp to [0, max]
//             and every operation float32 (f64 images: double), no fused
//             multiply-add.
//   mixup /   with both: cutmix iff uniform(K, 0) < 0.5. The partner is
//   cutmix    below(K, 1, N) (it may be the sample itself). λ = X / (X + Y)
//             with X, Y ~ Gamma(α) drawn one after the other from a cursor
//             i = 4, 5, ... of stream K (1 if X + Y is 0):
//               gamma(α < 1) = gamma(α + 1) * uniform(K, i++)^(1/α)
//               gamma(α ≥ 1): Marsaglia–Tsang, d = α - 1/3, c = 1/sqrt(9d):
//                 repeat: do { x = normal(); v = 1 + c*x } while v <= 0;
//                         v = v*v*v; u = uniform(K, i++);
//                         if log(u) < x*x/2 + d*(1 - v + log(v)): return d*v
//               normal() = sqrt(-2*log(1 - u1)) * cos(2π*u2),
//                          u1 = uniform(K, i++), u2 = uniform(K, i++)
//             (double, C's log, sqrt, cos and pow.) mixup: l = float(λ),
//             x = x*l + x'*(1 - l), labels the same. cutmix (timm):
//             r = sqrt(1 - λ), ch = int(H*r), cw = int(W*r),
//             cy = below(K, 3, H), cx = below(K, 2, W),
//             y1, y2 = clip(cy ∓ ch/2, 0, H), x1, x2 = clip(cx ∓ cw/2, 0, W)
//             (integer halves); the box [y1,y2)×[x1,x2) of every channel is
//             the partner's and λ = 1 - (y2-y1)(x2-x1)/(H*W) mixes the
//             labels.
//   mask      token p: selected iff uniform(K, 3p) < P; then
//             u = uniform(K, 3p+1): u < 0.8 → ID, u < 0.9 →
//             below(K, 3p+2, VOCAB), else unchanged.
//   substitute token p = t: if uniform(K, 2p) < P, 0 <= t < V and row t
//             has k non-negative entries: the below(K, 2p+1, k)-th of them.
//===----------------------------------------------------------------------===//
#ifndef KILN_TRAIN_AUGMENT_H
#define KILN_TRAIN_AUGMENT_H

#include "Config.h"

#include "kiln/runtime/Tensor.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::train {

/// Reads sample `sample` (global index into the dataset, [0, N)) of input
/// `input` (index into the batch's inputs) into `dst` (one sample's bytes,
/// the batch dtype). Mixup/cutmix partners come from the whole dataset.
/// Called concurrently from the threads that call Augmenter::apply.
using FetchSample =
    std::function<void(size_t input, uint64_t sample, void *dst)>;

/// The counter-based streams of the file comment.
namespace augment {
constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
/// A partner's copy of transform t draws from slot kPartnerSlot + t.
constexpr uint64_t kPartnerSlot = uint64_t(1) << 32;

constexpr uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
constexpr uint64_t hash(uint64_t x) { return mix(x + kGolden); }
/// The key of transform slot `slot` of sample `sample` in epoch `epoch`.
constexpr uint64_t streamKey(uint64_t seed, uint64_t epoch, uint64_t sample,
                             uint64_t slot) {
  return hash(hash(hash(hash(seed) ^ epoch) ^ sample) ^ slot);
}
/// Draw `i` of stream `key`: 64 random bits.
constexpr uint64_t bits(uint64_t key, uint64_t i) {
  return mix(key + (i + 1) * kGolden);
}
/// Draw `i` as a double in [0, 1) (53 bits).
constexpr double uniform(uint64_t key, uint64_t i) {
  return double(bits(key, i) >> 11) * 0x1.0p-53;
}
/// Draw `i` as an integer in [0, n), n > 0.
constexpr uint64_t below(uint64_t key, uint64_t i, uint64_t n) {
  return bits(key, i) % n;
}
/// Gamma(alpha, 1) from draws cursor, cursor+1, ... of `key` (advanced
/// past the draws used), alpha > 0; see the file comment.
double sampleGamma(uint64_t key, uint64_t &cursor, double alpha);
/// Beta(alpha, alpha) as X / (X + Y) of two sampleGamma (1 if both are 0).
double sampleBeta(uint64_t key, uint64_t &cursor, double alpha);
} // namespace augment

/// A parsed `--augment SPEC`, applied sample by sample.
class Augmenter {
public:
  /// Parses SPEC against the batch's inputs (name, dtype and per-sample
  /// shape, in batch order), the labels input's name, the class count and
  /// the dataset's sample count (the partners' range). Reads substitute
  /// tables. Throws UserError "--augment SPEC: why" (e.g. "crop 40 is
  /// larger than input x's 8x8 images").
  static std::unique_ptr<Augmenter>
  parse(const std::string &spec, const std::vector<DataSpec> &inputs,
        const std::string &labels, std::optional<int64_t> numClasses,
        uint64_t numSamples);
  ~Augmenter();
  Augmenter(const Augmenter &) = delete;
  Augmenter &operator=(const Augmenter &) = delete;

  /// Transforms sample `b` of `batch` (tensors [B] + sample shape of the
  /// inputs parse() saw, in that order) in place: a pure function of (seed,
  /// epoch, sampleId) and the data. Thread-safe: loader threads call it
  /// concurrently for different `b`. `fetch` is called only when the spec
  /// mixes (needsFetch()).
  void apply(std::vector<rt::HostTensor> &batch, int64_t b, uint64_t sampleId,
             uint64_t seed, uint64_t epoch, const FetchSample &fetch) const;

  /// For the log: "x: image 1x8x8, crop 8x8 pad 1, flip 0.5, jitter b0.2
  /// c0.2 s0 max 1; idx: mask 0.15 id 3 vocab 30".
  std::string describe() const;
  /// Whether apply() reads partner samples (mixup, cutmix).
  bool needsFetch() const;
  /// The inputs apply() may change (by index), the labels included when
  /// the spec mixes them or sets ignored labels.
  std::vector<size_t> changedInputs() const;

  struct Impl;

private:
  explicit Augmenter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace kiln::train

#endif // KILN_TRAIN_AUGMENT_H
