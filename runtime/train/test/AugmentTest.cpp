//===- AugmentTest.cpp - --augment's transforms and its spec ---------------===//
// SPDX-License-Identifier: Apache-2.0
//
// The spec parser refuses each malformed or ill-fitting spec with one line
// naming the item at fault; apply() is a pure function of (seed, epoch,
// sample id) on any thread; each transform has its defining property (a
// crop is a window of the padded image, flip mirrors the rows, mixup and
// cutmix labels are distributions mixed by λ, BERT masking and
// substitution keep their rates on 100k tokens, Beta(α, α) has its
// moments). test/Training/augment_ref.py checks the exact values against
// NumPy.
//===----------------------------------------------------------------------===//
#include "Augment.h"
#include "Util.h"

#include "kiln/runtime/Runtime.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>
#include <thread>
#include <unistd.h>

using namespace kiln;
using namespace kiln::train;
using rt::DType;

namespace {

DataSpec spec(const std::string &name, DType t, std::vector<int64_t> shape) {
  DataSpec s;
  s.name = name;
  s.dtype = t;
  s.sampleShape = std::move(shape);
  return s;
}

/// The message parse() refuses `text` with ("" if it accepts it).
std::string refusal(const std::string &text, const std::vector<DataSpec> &in,
                    std::optional<int64_t> classes = std::nullopt) {
  try {
    Augmenter::parse(text, in, "labels", classes, 100);
  } catch (const UserError &e) {
    return e.what();
  }
  return "";
}

/// A dataset of `n` samples per input, the batch tensors, and a fetch.
struct Data {
  std::vector<DataSpec> specs;
  std::vector<std::vector<uint8_t>> samples; // per input: n samples
  std::vector<size_t> bytes;
  uint64_t n = 0;

  Data(std::vector<DataSpec> s, uint64_t count) : specs(std::move(s)), n(count) {
    for (const DataSpec &d : specs) {
      size_t b = rt::dtypeSize(d.dtype);
      for (int64_t x : d.sampleShape)
        b *= (size_t)x;
      bytes.push_back(b);
      samples.emplace_back(b * n);
    }
  }
  template <typename T> T *sample(size_t input, uint64_t i) {
    return reinterpret_cast<T *>(samples[input].data() + i * bytes[input]);
  }
  std::vector<rt::HostTensor> batch(int64_t rows) const {
    std::vector<rt::HostTensor> out;
    for (const DataSpec &d : specs) {
      rt::TensorDesc desc{d.dtype, {rows}};
      desc.shape.insert(desc.shape.end(), d.sampleShape.begin(), d.sampleShape.end());
      out.emplace_back(desc);
    }
    return out;
  }
  /// Loads samples first .. first+rows into `b`.
  void fill(std::vector<rt::HostTensor> &b, uint64_t first, int64_t rows) {
    for (size_t k = 0; k < specs.size(); ++k)
      std::memcpy(b[k].data(), samples[k].data() + first * bytes[k],
                  (size_t)rows * bytes[k]);
  }
  FetchSample fetch() {
    return [this](size_t input, uint64_t s, void *dst) {
      std::memcpy(dst, samples[input].data() + s * bytes[input], bytes[input]);
    };
  }
  /// Every sample augmented, sample i at row i % rows of batches of `rows`
  /// spread over `threads` threads.
  std::vector<std::vector<uint8_t>> augmentAll(const Augmenter &a, uint64_t seed,
                                               uint64_t epoch, int64_t rows,
                                               int threads) {
    std::vector<std::vector<uint8_t>> out(specs.size());
    for (size_t k = 0; k < specs.size(); ++k)
      out[k].resize(samples[k].size());
    FetchSample f = fetch();
    for (uint64_t first = 0; first < n; first += (uint64_t)rows) {
      int64_t r = (int64_t)std::min<uint64_t>((uint64_t)rows, n - first);
      std::vector<rt::HostTensor> b = batch(r);
      fill(b, first, r);
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
          for (int64_t i = t; i < r; i += threads)
            a.apply(b, i, first + (uint64_t)i, seed, epoch, f);
        });
      for (std::thread &th : pool)
        th.join();
      for (size_t k = 0; k < specs.size(); ++k)
        std::memcpy(out[k].data() + first * bytes[k], b[k].data(),
                    (size_t)r * bytes[k]);
    }
    return out;
  }
};

//===----------------------------------------------------------------------===//
// The streams
//===----------------------------------------------------------------------===//

TEST(Augment, StreamIsSplitMix64) {
  // SplitMix64 from state 0 starts 0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4.
  EXPECT_EQ(augment::bits(0, 0), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(augment::bits(0, 1), 0x6E789E6AA1B965F4ull);
  EXPECT_EQ(augment::hash(0), 0xE220A8397B1DCDAFull);
  // Each coordinate of the key matters.
  std::set<uint64_t> keys;
  for (uint64_t v = 0; v < 4; ++v) {
    keys.insert(augment::streamKey(v, 0, 0, 0));
    keys.insert(augment::streamKey(0, v, 0, 0) ^ 1);
    keys.insert(augment::streamKey(0, 0, v, 0) ^ 2);
    keys.insert(augment::streamKey(0, 0, 0, v) ^ 3);
  }
  EXPECT_EQ(keys.size(), 16u);
  double u = augment::uniform(12345, 0);
  EXPECT_GE(u, 0.0);
  EXPECT_LT(u, 1.0);
}

TEST(Augment, BetaHasItsMoments) {
  for (double alpha : {0.2, 1.0, 2.5}) {
    const int n = 20000;
    double sum = 0, sq = 0;
    for (int i = 0; i < n; ++i) {
      uint64_t cursor = 4;
      double l = augment::sampleBeta(augment::streamKey(1, 2, (uint64_t)i, 3),
                                     cursor, alpha);
      ASSERT_GE(l, 0.0);
      ASSERT_LE(l, 1.0);
      sum += l;
      sq += l * l;
    }
    double mean = sum / n, var = sq / n - mean * mean;
    double wantVar = 1.0 / (4.0 * (2.0 * alpha + 1.0));
    // The mean's standard error is sqrt(var / n) < 0.004.
    EXPECT_NEAR(mean, 0.5, 0.015) << "alpha " << alpha;
    EXPECT_NEAR(var, wantVar, 0.1 * wantVar) << "alpha " << alpha;
  }
}

//===----------------------------------------------------------------------===//
// Parsing
//===----------------------------------------------------------------------===//

TEST(Augment, RefusesSpecsThatDoNotFit) {
  const std::vector<DataSpec> flat = {spec("x", DType::F32, {64}),
                                      spec("labels", DType::I64, {})};
  const std::vector<DataSpec> img = {spec("x", DType::F32, {1, 8, 8}),
                                     spec("labels", DType::I64, {})};
  const std::vector<DataSpec> rgb = {spec("x", DType::F32, {3, 32, 32}),
                                     spec("labels", DType::F32, {10})};
  const std::vector<DataSpec> tok = {spec("idx", DType::I64, {32}),
                                     spec("labels", DType::I64, {32})};
  struct Case {
    std::string spec;
    const std::vector<DataSpec> *in;
    std::string want;
  } cases[] = {
      {"image=1x8x8,crop=40,pad=4", &flat,
       "--augment crop=40: crop 40 is larger than input x's 8x8 images"},
      {"crop=6", &img,
       "--augment crop=6: crop 6 is smaller than input x's 8x8 images; the "
       "crop fills the model's fixed input (pad the image instead)"},
      {"crop=8x9", &img, "--augment crop=8x9: crop 8x9 is larger than input x's 8x8 images"},
      {"flip", &flat,
       "--augment flip: input x's samples are [64], not images: give "
       "image=CxHxW (e.g. image=1x8x8 for a flat 64)"},
      {"image=1x8x9,flip", &flat,
       "--augment image=1x8x9: images of 72 values, but input x's samples are "
       "[64] (64 values)"},
      {"flp", &img,
       "--augment flp: unknown transform 'flp' (image, max, pad, ignore, crop, "
       "flip, jitter, normalize, mixup, cutmix, mask, substitute)"},
      {"flip,flip=0.2", &img, "--augment flip=0.2: 'flip' is given twice in one clause"},
      {"flip=1.5", &img, "--augment flip=1.5: the probability 1.5 is outside [0, 1]"},
      {"jitter=0.2,0.2,0.2", &img,
       "--augment jitter=0.2,0.2,0.2: saturation needs 3-channel images, input "
       "x has 1 (give jitter=B,C for grayscale)"},
      {"jitter=0.1,0.1,0.1,0.1", &rgb,
       "--augment jitter=0.1,0.1,0.1,0.1: jitter takes "
       "brightness[,contrast[,saturation]] (hue is not supported)"},
      {"jitter=0.2,flp", &img,
       "--augment jitter=0.2,flp: 'flp' is not a finite number (nor a "
       "transform: image, max, pad, ignore, crop, flip, jitter, normalize, "
       "mixup, cutmix, mask, substitute)"},
      {"jitter=-1", &img, "--augment jitter=-1: jitter factors must be non-negative"},
      {"normalize=0.5/0", &img, "--augment normalize=0.5/0: a standard deviation of 0"},
      {"normalize=0.5,0.4/0.2", &img,
       "--augment normalize=0.5,0.4/0.2: expected 1 value per list (input x "
       "has 1 channel)"},
      {"normalize=0.5", &rgb,
       "--augment normalize=0.5: expected normalize=MEAN/STD (comma lists per "
       "channel)"},
      {"mixup=0.2", &img,
       "--augment mixup=0.2: mixup needs soft labels (labels input 'labels' is "
       "i64 []): compile with kiln-compile --soft-labels"},
      {"mixup=0", &rgb, "--augment mixup=0: alpha must be in (0, 1e6]"},
      {"x:mask=0.15,5,10", &img,
       "--augment mask=0.15,5,10: input x is f32; token transforms need integer "
       "tokens"},
      {"idx:mask=0.15,10,10", &tok,
       "--augment mask=0.15,10,10: MASK_ID 10 is outside the vocabulary [0, 10)"},
      {"mask=0.15,1", &tok, "--augment mask=0.15,1: expected mask=P,MASK_ID,VOCAB"},
      {"mask=0.15,1,10,ignore=-100", &img,
       "--augment mask=0.15,1,10,ignore=-100: no integer input to transform; "
       "name one with INPUT: (inputs: x, labels)"},
      {"substitute=0.1,/nonexistent/t.npy", &tok,
       "--augment substitute=0.1,/nonexistent/t.npy: /nonexistent/t.npy: No "
       "such file or directory"},
      {"foo:flip", &img, "--augment foo:flip: no data input 'foo' (inputs: x, labels)"},
      {"labels:flip", &img,
       "--augment labels:flip: 'labels' is the labels input; mixup and cutmix "
       "mix it with their image"},
      {"x:flip;x:pad=1", &img,
       "--augment x:pad=1: input x has two clauses; put its transforms in one"},
      {"flip,mask=0.1,1,10", &img,
       "--augment flip,mask=0.1,1,10: image and token transforms in one clause; "
       "give each input its own clause (INPUT:..., separated by ';')"},
      {"image=8x8", &flat, "--augment image=8x8: the clause has no transform"},
      {"", &img, "--augment: the spec is empty"},
      {"flip;", &img, "--augment flip;: an empty clause (between ';')"},
      {"idx:mask=0.1,1,10,ignore=-100", &img,
       "--augment idx:mask=0.1,1,10,ignore=-100: no data input 'idx' (inputs: x, "
       "labels)"},
      {"ignore=-100,flip", &img, "--augment ignore=-100: 'ignore' goes with mask"},
  };
  for (const Case &c : cases)
    EXPECT_EQ(refusal(c.spec, *c.in), c.want) << "spec: " << c.spec;
  // The class count must match the soft labels.
  EXPECT_EQ(refusal("mixup=0.2", rgb, 100),
            "--augment mixup=0.2: mixup needs soft labels (labels input 'labels' "
            "is f32 [10]): compile with kiln-compile --soft-labels");
  EXPECT_EQ(refusal("mixup=0.2", rgb, 10), "");
  // ignore needs integer labels with a value per token.
  std::vector<DataSpec> tokOneLabel = {spec("idx", DType::I64, {32}),
                                       spec("labels", DType::I64, {})};
  EXPECT_EQ(refusal("mask=0.1,1,10,ignore=-100", tokOneLabel),
            "--augment ignore=-100: needs integer labels 'labels' with one value "
            "per token of idx (32), got i64 []");
  EXPECT_EQ(refusal("mask=0.1,1,10,ignore=-100", tok), "");
  // Two float inputs: the clause must name one.
  std::vector<DataSpec> two = {spec("a", DType::F32, {1, 8, 8}),
                               spec("b", DType::F32, {1, 8, 8})};
  EXPECT_EQ(refusal("flip", two),
            "--augment flip: inputs a, b could all take it; name one with INPUT: "
            "(inputs: a, b)");
  EXPECT_EQ(refusal("b:flip;a:pad=2", two), "");
}

TEST(Augment, RefusesBadSubstituteTables) {
  char dir[] = "/tmp/kiln-augment-test-XXXXXX";
  ASSERT_TRUE(mkdtemp(dir));
  const std::vector<DataSpec> tok = {spec("idx", DType::I32, {16})};
  std::string err;
  // An entry beyond the vocabulary (the table's rows).
  rt::HostTensor t(rt::TensorDesc{DType::I64, {4, 2}});
  int64_t vals[] = {1, -1, 2, 3, 0, 4, -1, -1};
  std::memcpy(t.data(), vals, sizeof vals);
  std::string bad = std::string(dir) + "/bad.npy";
  ASSERT_TRUE(rt::writeNpy(bad, t, err)) << err;
  EXPECT_EQ(refusal("substitute=0.1," + bad, tok),
            "--augment substitute=0.1," + bad + ": " + bad +
                ": entry 4 at row 2 is outside [0, 4) (negative entries mean "
                "none)");
  // A float table.
  rt::HostTensor f(rt::TensorDesc{DType::F32, {4, 2}});
  std::string flt = std::string(dir) + "/float.npy";
  ASSERT_TRUE(rt::writeNpy(flt, f, err)) << err;
  EXPECT_EQ(refusal("substitute=0.1," + flt, tok),
            "--augment substitute=0.1," + flt + ": " + flt +
                " is f32 [4,2]; the table must be an integer array [VOCAB, K]");
  // A truncated file.
  std::string cut = std::string(dir) + "/cut.npy";
  {
    std::string bytes;
    ASSERT_TRUE(rt::readWholeFile(bad, bytes, err)) << err;
    bytes.resize(bytes.size() - 8);
    ASSERT_TRUE(rt::writeFileAtomic(cut, {bytes}, err)) << err;
  }
  EXPECT_NE(refusal("substitute=0.1," + cut, tok), "");
  removeTree(dir);
}

TEST(Augment, Describes) {
  const std::vector<DataSpec> in = {spec("x", DType::F32, {64}),
                                    spec("labels", DType::F32, {10}),
                                    spec("idx", DType::I64, {8})};
  auto a = Augmenter::parse("image=1x8x8,pad=1,flip,jitter=0.2,0.3,"
                            "normalize=0.5/0.25,mixup=0.2,cutmix=1;"
                            "idx:mask=0.15,3,30",
                            in, "labels", 10, 50);
  EXPECT_EQ(a->describe(),
            "x: image 1x8x8, crop 8x8 pad 1, flip 0.5, jitter b0.2 c0.3 s0 max 1, "
            "normalize 0.5/0.25, mixup 0.2 or cutmix 1; idx: mask 0.15 id 3 vocab 30");
  EXPECT_TRUE(a->needsFetch());
  EXPECT_EQ(a->changedInputs(), (std::vector<size_t>{0, 1, 2}));
}

//===----------------------------------------------------------------------===//
// Determinism
//===----------------------------------------------------------------------===//

TEST(Augment, SameOnAnyThreadCountAndBatch) {
  Data d({spec("x", DType::F32, {3, 16, 16}), spec("labels", DType::F32, {10})}, 97);
  for (uint64_t i = 0; i < d.n; ++i) {
    float *x = d.sample<float>(0, i);
    for (int j = 0; j < 3 * 16 * 16; ++j)
      x[j] = float((i * 7919 + (uint64_t)j * 104729) % 1000) / 1000.0f;
    d.sample<float>(1, i)[i % 10] = 1.0f;
  }
  auto a = Augmenter::parse("crop=16,pad=3,flip,jitter=0.4,0.4,0.4,"
                            "normalize=0.5/0.2,mixup=0.4,cutmix=1.0",
                            d.specs, "labels", 10, d.n);
  auto one = d.augmentAll(*a, 5, 2, 97, 1);
  auto four = d.augmentAll(*a, 5, 2, 8, 4);
  auto again = d.augmentAll(*a, 5, 2, 13, 3);
  EXPECT_EQ(one, four);
  EXPECT_EQ(one, again);
  EXPECT_NE(one, d.augmentAll(*a, 5, 3, 8, 1)) << "another epoch";
  EXPECT_NE(one, d.augmentAll(*a, 6, 2, 8, 1)) << "another seed";
}

//===----------------------------------------------------------------------===//
// The transforms' properties
//===----------------------------------------------------------------------===//

TEST(Augment, CropIsAWindowOfThePaddedImage) {
  const int64_t H = 6, W = 5, P = 2;
  Data d({spec("x", DType::I32, {2, H, W})}, 400);
  for (uint64_t i = 0; i < d.n; ++i)
    for (int j = 0; j < 2 * H * W; ++j)
      d.sample<int32_t>(0, i)[j] = j + 1; // 0 is padding
  auto a = Augmenter::parse("x:crop=6x5,pad=2", d.specs, "labels", {}, d.n);
  auto out = d.augmentAll(*a, 1, 0, 16, 2);
  std::set<std::pair<int64_t, int64_t>> offsets;
  for (uint64_t i = 0; i < d.n; ++i) {
    const int32_t *o = reinterpret_cast<const int32_t *>(out[0].data()) + i * 2 * H * W;
    bool found = false;
    for (int64_t dy = -P; dy <= P && !found; ++dy)
      for (int64_t dx = -P; dx <= P && !found; ++dx) {
        bool match = true;
        for (int64_t c = 0; c < 2 && match; ++c)
          for (int64_t y = 0; y < H && match; ++y)
            for (int64_t x = 0; x < W && match; ++x) {
              int64_t sy = y + dy, sx = x + dx;
              int32_t want = sy < 0 || sy >= H || sx < 0 || sx >= W
                                 ? 0
                                 : int32_t((c * H + sy) * W + sx + 1);
              match = o[(c * H + y) * W + x] == want;
            }
        if (match) {
          found = true;
          offsets.insert({dy, dx});
        }
      }
    EXPECT_TRUE(found) << "sample " << i;
  }
  EXPECT_EQ(offsets.size(), size_t((2 * P + 1) * (2 * P + 1)));
}

TEST(Augment, FlipMirrorsRowsAndTwiceIsIdentity) {
  Data d({spec("x", DType::F64, {3, 4, 7})}, 64);
  for (uint64_t i = 0; i < d.n; ++i)
    for (int j = 0; j < 84; ++j)
      d.sample<double>(0, i)[j] = double(i * 100 + (uint64_t)j);
  auto always = Augmenter::parse("flip=1", d.specs, "labels", {}, d.n);
  auto once = d.augmentAll(*always, 0, 0, 8, 1);
  for (uint64_t i = 0; i < d.n; ++i) {
    const double *o = reinterpret_cast<const double *>(once[0].data()) + i * 84;
    for (int r = 0; r < 12; ++r)
      for (int x = 0; x < 7; ++x)
        ASSERT_EQ(o[r * 7 + x], d.sample<double>(0, i)[r * 7 + 6 - x]);
  }
  Data twice = d;
  twice.samples = once;
  EXPECT_EQ(twice.augmentAll(*always, 9, 9, 8, 2), d.samples);
  // p = 0.5: about half the samples flip.
  auto half = Augmenter::parse("flip", d.specs, "labels", {}, d.n);
  auto out = d.augmentAll(*half, 3, 0, 8, 1);
  int flipped = 0;
  for (uint64_t i = 0; i < d.n; ++i)
    flipped += std::memcmp(out[0].data() + i * 84 * 8, d.sample<double>(0, i),
                           84 * 8) != 0;
  EXPECT_GT(flipped, 16);
  EXPECT_LT(flipped, 48);
  // p = 0: nothing.
  auto never = Augmenter::parse("flip=0", d.specs, "labels", {}, d.n);
  EXPECT_EQ(d.augmentAll(*never, 3, 0, 8, 1), d.samples);
}

TEST(Augment, JitterStaysInRangeAndZeroIsIdentity) {
  Data d({spec("x", DType::F32, {3, 8, 8})}, 50);
  for (uint64_t i = 0; i < d.n; ++i)
    for (int j = 0; j < 192; ++j)
      d.sample<float>(0, i)[j] = float((i * 31 + (uint64_t)j * 17) % 256) / 255.0f;
  auto a = Augmenter::parse("jitter=0.9,0.9,0.9", d.specs, "labels", {}, d.n);
  auto out = d.augmentAll(*a, 4, 1, 8, 1);
  const float *o = reinterpret_cast<const float *>(out[0].data());
  for (size_t k = 0; k < d.n * 192; ++k) {
    ASSERT_GE(o[k], 0.0f);
    ASSERT_LE(o[k], 1.0f);
  }
  EXPECT_NE(out, d.samples);
  auto zero = Augmenter::parse("jitter=0,0,0", d.specs, "labels", {}, d.n);
  EXPECT_EQ(d.augmentAll(*zero, 4, 1, 8, 1), d.samples);
  // max=none: brightness alone scales every pixel by one factor in [0.1, 1.9].
  auto scale = Augmenter::parse("jitter=0.9,max=none", d.specs, "labels", {}, d.n);
  auto s = d.augmentAll(*scale, 4, 1, 8, 1);
  for (uint64_t i = 0; i < d.n; ++i) {
    const float *x = d.sample<float>(0, i);
    const float *y = reinterpret_cast<const float *>(s[0].data()) + i * 192;
    float f = -1;
    for (int j = 0; j < 192; ++j)
      if (x[j] > 0.1f) {
        if (f < 0)
          f = y[j] / x[j];
        ASSERT_NEAR(y[j] / x[j], f, 1e-5);
      }
    EXPECT_GE(f, 0.1f - 1e-6f);
    EXPECT_LE(f, 1.9f + 1e-6f);
  }
}

TEST(Augment, MixupAndCutmixMixLabelsByLambda) {
  const int C = 4, HW = 36;
  Data d({spec("x", DType::F32, {1, 6, 6}), spec("labels", DType::F32, {C})}, 200);
  for (uint64_t i = 0; i < d.n; ++i) {
    for (int j = 0; j < HW; ++j)
      d.sample<float>(0, i)[j] = float(i % C); // the class, everywhere
    d.sample<float>(1, i)[i % C] = 1.0f;
  }
  for (const char *which : {"mixup=0.4", "cutmix=1.0", "mixup=1,cutmix=0.5"}) {
    auto a = Augmenter::parse(which, d.specs, "labels", C, d.n);
    auto out = d.augmentAll(*a, 8, 1, 16, 2);
    int mixed = 0;
    for (uint64_t i = 0; i < d.n; ++i) {
      const float *y = reinterpret_cast<const float *>(out[1].data()) + i * C;
      const float *x = reinterpret_cast<const float *>(out[0].data()) + i * HW;
      double sum = 0;
      for (int c = 0; c < C; ++c) {
        ASSERT_GE(y[c], 0.0f);
        sum += y[c];
      }
      EXPECT_NEAR(sum, 1.0, 1e-6) << which << " sample " << i;
      // The image is its label row's mixture of the class values: the mean
      // pixel equals Σ c·y_c (mixup: every pixel; cutmix: by area).
      double want = 0, mean = 0;
      for (int c = 0; c < C; ++c)
        want += c * y[c];
      for (int j = 0; j < HW; ++j)
        mean += x[j];
      EXPECT_NEAR(mean / HW, want, 1e-5) << which << " sample " << i;
      mixed += y[i % C] < 0.999f;
    }
    EXPECT_GT(mixed, 100) << which;
  }
}

TEST(Augment, MaskingKeepsBertRates) {
  const int64_t T = 1000, N = 100, V = 50, ID = 7;
  Data d({spec("idx", DType::I32, {T}), spec("labels", DType::I64, {T})}, N);
  for (uint64_t i = 0; i < d.n; ++i)
    for (int64_t p = 0; p < T; ++p) {
      d.sample<int32_t>(0, i)[p] = int32_t(8 + (i + (uint64_t)p) % 40); // never ID
      d.sample<int64_t>(1, i)[p] = 1;
    }
  auto a = Augmenter::parse("mask=0.15,7,50,ignore=-100", d.specs, "labels", {}, N);
  auto out = d.augmentAll(*a, 2, 0, 10, 4);
  // A token is selected iff its label was kept.
  int64_t selected = 0, masked = 0, changed = 0;
  std::vector<int64_t> seen(V, 0);
  for (uint64_t i = 0; i < d.n; ++i)
    for (int64_t p = 0; p < T; ++p) {
      int32_t t = reinterpret_cast<const int32_t *>(out[0].data())[i * T + p];
      int64_t l = reinterpret_cast<const int64_t *>(out[1].data())[i * T + p];
      int32_t orig = d.sample<int32_t>(0, i)[p];
      ASSERT_TRUE(l == 1 || l == -100);
      ASSERT_GE(t, 0);
      ASSERT_LT(t, V);
      if (l == -100) {
        ASSERT_EQ(t, orig) << "an unselected token changed";
        continue;
      }
      ++selected;
      if (t == ID)
        ++masked;
      else if (t != orig) {
        ++changed;
        ++seen[t];
      }
    }
  // 100k tokens: bounds of about 5 standard deviations.
  const double n = double(N * T);
  EXPECT_NEAR(selected / n, 0.15, 5 * std::sqrt(0.15 * 0.85 / n));
  // A random token equal to ID (1/50) counts as masked, one equal to the
  // original (1/50) as unchanged.
  EXPECT_NEAR(double(masked) / selected, 0.8 + 0.1 / 50,
              5 * std::sqrt(0.16 / selected));
  EXPECT_NEAR(double(changed) / selected, 0.1 * 48 / 50,
              5 * std::sqrt(0.09 / selected));
  int64_t distinct = 0;
  for (int64_t c : seen)
    distinct += c > 0;
  EXPECT_GE(distinct, V - 2) << "random tokens cover the vocabulary";
}

TEST(Augment, SubstitutesFromTheTableRow) {
  char dir[] = "/tmp/kiln-augment-test-XXXXXX";
  ASSERT_TRUE(mkdtemp(dir));
  const int64_t V = 10, K = 3, T = 1000, N = 100;
  rt::HostTensor table(rt::TensorDesc{DType::I16, {V, K}});
  int16_t *tv = table.as<int16_t>();
  for (int64_t r = 0; r < V; ++r)
    for (int64_t k = 0; k < K; ++k) // row r: r+1, r+2 (mod V), then none;
      tv[r * K + k] = r % 2 ? -1 : int16_t(k < 2 ? (r + 1 + k) % V : -1);
  std::string path = std::string(dir) + "/table.npy";
  std::string err;
  ASSERT_TRUE(rt::writeNpy(path, table, err)) << err;
  Data d({spec("idx", DType::U8, {T})}, N);
  for (uint64_t i = 0; i < d.n; ++i)
    for (int64_t p = 0; p < T; ++p)
      d.sample<uint8_t>(0, i)[p] = uint8_t((i + (uint64_t)p) % 12); // 10, 11: no row
  auto a = Augmenter::parse("substitute=0.3," + path, d.specs, "labels", {}, N);
  auto out = d.augmentAll(*a, 1, 1, 7, 3);
  int64_t eligible = 0, replaced = 0;
  for (uint64_t i = 0; i < d.n; ++i)
    for (int64_t p = 0; p < T; ++p) {
      int64_t o = d.sample<uint8_t>(0, i)[p], t = out[0][i * T + p];
      bool hasRow = o < V && o % 2 == 0;
      eligible += hasRow;
      if (t == o)
        continue;
      ASSERT_TRUE(hasRow) << "token " << o << " has no substitutes";
      ASSERT_TRUE(t == (o + 1) % V || t == (o + 2) % V) << o << " -> " << t;
      ++replaced;
    }
  EXPECT_NEAR(double(replaced) / eligible, 0.3,
              5 * std::sqrt(0.21 / eligible));
  removeTree(dir);
}

TEST(Augment, NormalizeIsPerChannel) {
  Data d({spec("x", DType::F32, {2, 2, 2})}, 1);
  for (int j = 0; j < 8; ++j)
    d.sample<float>(0, 0)[j] = float(j);
  auto a = Augmenter::parse("normalize=1,2/2,4", d.specs, "labels", {}, 1);
  auto out = d.augmentAll(*a, 0, 0, 1, 1);
  const float *o = reinterpret_cast<const float *>(out[0].data());
  for (int j = 0; j < 4; ++j)
    EXPECT_EQ(o[j], (float(j) - 1.0f) / 2.0f);
  for (int j = 4; j < 8; ++j)
    EXPECT_EQ(o[j], (float(j) - 2.0f) / 4.0f);
}

} // namespace
