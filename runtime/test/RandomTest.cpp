//===- RandomTest.cpp - Philox-4x32-10 and the dropout kernel -------------===//
// SPDX-License-Identifier: Apache-2.0
//
// Philox against Random123's known-answer vectors; dropout against the
// documented key/counter layout (Random.cpp), its statistics, independence
// from the thread count, step and seed streams, ratio 0, 16-bit types, and
// malformed specs.
//===----------------------------------------------------------------------===//
#include "TestUtil.h"
#include "Philox.h"

#include <omp.h>

using namespace kiln::rt;
using namespace kiln::rt::test;

namespace {

TEST(Philox, Random123KnownAnswers) {
  // Random123 tests/kat_vectors, "philox4x32 10": counter, key, expected.
  struct Kat {
    cpu::PhiloxCounter ctr;
    cpu::PhiloxKey key;
    cpu::PhiloxCounter want;
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat &k : kats)
    EXPECT_EQ(cpu::philox4x32_10(k.ctr, k.key), k.want);
  // The lane-vectorised form agrees with the scalar one.
  uint32_t lanes[4 * 16];
  cpu::philox4x32_10Lanes<16>(0xfffffff8u, 7, 8, 9, {0xa4093822, 0x299f31d0}, lanes);
  for (uint32_t l = 0; l < 16; ++l) {
    cpu::PhiloxCounter r =
        cpu::philox4x32_10({0xfffffff8u + l, 7, 8, 9}, {0xa4093822, 0x299f31d0});
    for (int w = 0; w < 4; ++w)
      EXPECT_EQ(lanes[l * 4 + w], r[w]) << l << " " << w;
  }
  EXPECT_EQ(cpu::philoxUniform(0), 0.0f);
  EXPECT_LT(cpu::philoxUniform(0xffffffffu), 1.0f);
}

std::vector<HostTensor> dropout(const HostTensor &x, double ratio, int64_t seed,
                                ExecContext ctx) {
  return runOnce(cpu::registerRandomKernels, "dropout", {&x},
                 {x.desc(), TensorDesc{DType::Bool, x.shape()}},
                 json{{"ratio", ratio}, {"seed", seed}}, ctx);
}

TEST(Dropout, DocumentedLayout) {
  std::mt19937 rng(5);
  std::vector<double> v = randomVals(rng, 1003, -2, 2);
  HostTensor x = makeTensor(DType::F32, {1003}, v);
  ExecContext ctx;
  ctx.seed = 0x123456789abcdef0ull;
  ctx.step = 0x0000000500000007ull;
  int64_t seed = 0x1111222233334444ll;
  float ratio = 0.3f;
  auto y = dropout(x, ratio, seed, ctx);
  uint32_t seedWord = (uint32_t)seed ^ (uint32_t)((uint64_t)seed >> 32);
  int kept = 0;
  for (int64_t i = 0; i < 1003; ++i) {
    cpu::PhiloxCounter r = cpu::philox4x32_10(
        {(uint32_t)(i / 4), (uint32_t)ctx.step, (uint32_t)(ctx.step >> 32), seedWord},
        {(uint32_t)ctx.seed, (uint32_t)(ctx.seed >> 32)});
    bool keep = cpu::philoxUniform(r[i % 4]) >= ratio;
    kept += keep;
    ASSERT_EQ(valueAt(y[1], i), keep ? 1.0 : 0.0) << i;
    ASSERT_EQ(valueAt(y[0], i), keep ? (double)(float)(v[i] * (float)(1 / (1 - ratio))) : 0.0)
        << i;
  }
  EXPECT_GT(kept, 600);
  EXPECT_LT(kept, 800);
}

// A data-parallel rank's shard draws the whole batch's masks for its rows:
// shards of 1, 2, 3 and 5 (odd sizes: shards that do not start on a Philox
// block) concatenate to the unsharded run, values and masks.
TEST(Dropout, BatchShardsConcatenateToTheWholeBatch) {
  std::mt19937 rng(9);
  const int64_t rows = 30, cols = 7; // 210 elements: rows of 7 per sample
  std::vector<double> v = randomVals(rng, rows * cols, -2, 2);
  HostTensor whole = makeTensor(DType::F32, {rows, cols}, v);
  ExecContext ctx;
  ctx.seed = 77;
  ctx.step = 3;
  auto ref = dropout(whole, 0.4, 5, ctx);
  for (int64_t n : {1, 2, 3, 5}) {
    int64_t per = rows / n;
    for (int64_t r = 0; r < n; ++r) {
      std::vector<double> part(v.begin() + r * per * cols,
                               v.begin() + (r + 1) * per * cols);
      HostTensor x = makeTensor(DType::F32, {per, cols}, part);
      ExecContext c = ctx;
      c.batchShardIndex = r;
      c.batchShardCount = n;
      auto y = dropout(x, 0.4, 5, c);
      for (int64_t i = 0; i < per * cols; ++i) {
        ASSERT_EQ(valueAt(y[0], i), valueAt(ref[0], r * per * cols + i))
            << "shard " << r << " of " << n << ", element " << i;
        ASSERT_EQ(valueAt(y[1], i), valueAt(ref[1], r * per * cols + i));
      }
    }
  }
  ExecContext badShard = ctx;
  badShard.batchShardIndex = 2;
  badShard.batchShardCount = 2;
  EXPECT_THROW(dropout(whole, 0.4, 5, badShard), Error);
}

TEST(Dropout, StatisticsThreadsStepsSeeds) {
  const int64_t n = 1 << 18; // threaded
  std::vector<double> v(n, 1.0);
  HostTensor x = makeTensor(DType::F32, {64, n / 64}, v);
  ExecContext ctx;
  ctx.seed = 42;
  ctx.step = 3;
  auto a = dropout(x, 0.25, 9, ctx);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    kept += a[1].as<uint8_t>()[i];
    double y = valueAt(a[0], i);
    ASSERT_TRUE(a[1].as<uint8_t>()[i] ? std::fabs(y - 4.0 / 3) < 1e-6 : y == 0) << i;
  }
  EXPECT_NEAR((double)kept / n, 0.75, 0.005);
  int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  auto b = dropout(x, 0.25, 9, ctx);
  omp_set_num_threads(saved);
  EXPECT_EQ(std::memcmp(a[1].data(), b[1].data(), n), 0) << "thread count changed the mask";
  EXPECT_EQ(std::memcmp(a[0].data(), b[0].data(), n * 4), 0);
  auto differs = [&](const HostTensor &m) {
    return std::memcmp(a[1].data(), m.data(), n) != 0;
  };
  ExecContext ctx2 = ctx;
  ctx2.step = 4;
  EXPECT_TRUE(differs(dropout(x, 0.25, 9, ctx2)[1]));
  EXPECT_TRUE(differs(dropout(x, 0.25, 10, ctx)[1]));
  ExecContext ctx3 = ctx;
  ctx3.seed = 43;
  EXPECT_TRUE(differs(dropout(x, 0.25, 9, ctx3)[1]));
  EXPECT_FALSE(differs(dropout(x, 0.25, 9, ctx)[1]));
}

TEST(Dropout, RatioZeroIsIdentity) {
  std::mt19937 rng(8);
  for (DType t : floatTypes()) {
    std::vector<double> v = randomVals(rng, 77, -5, 5);
    v[3] = NAN;
    v[4] = INFINITY;
    HostTensor x = makeTensor(t, {7, 11}, v);
    auto y = dropout(x, 0.0, 0, ExecContext{});
    EXPECT_EQ(std::memcmp(x.data(), y[0].data(), x.bytes()), 0) << dtypeName(t);
    for (int64_t i = 0; i < 77; ++i)
      ASSERT_EQ(y[1].as<uint8_t>()[i], 1);
  }
}

TEST(Dropout, SixteenBitAndF64) {
  std::mt19937 rng(9);
  for (DType t : floatTypes()) {
    std::vector<double> v = randomVals(rng, 5000, -5, 5);
    HostTensor x = makeTensor(t, {5000}, v);
    ExecContext ctx;
    ctx.seed = 1;
    auto y = dropout(x, 0.5, 3, ctx);
    std::vector<double> v32 = v;
    auto f = dropout(makeTensor(DType::F32, {5000}, v32), 0.5, 3, ctx);
    // The mask does not depend on the element type.
    EXPECT_EQ(std::memcmp(y[1].data(), f[1].data(), 5000), 0) << dtypeName(t);
    for (int64_t i = 0; i < 5000; ++i) {
      double want = y[1].as<uint8_t>()[i] ? v[i] * 2 : 0.0;
      ASSERT_NEAR(valueAt(y[0], i), want, tolFor(t) * std::fabs(want)) << i;
    }
  }
  std::vector<double> none;
  auto z = dropout(makeTensor(DType::F32, {0, 3}, none), 0.5, 0, ExecContext{});
  EXPECT_EQ(z[0].numel(), 0);
}

TEST(Dropout, Malformed) {
  auto reg = cpu::registerRandomKernels;
  TensorDesc x{DType::F32, {4, 8}}, m{DType::Bool, {4, 8}};
  EXPECT_NO_THROW(build(reg, "dropout", {&x}, {x, m}, json{{"ratio", 0.5}}));
  EXPECT_THROW(build(reg, "dropout", {&x}, {x, m}, json{{"ratio", 1.0}}), Error);
  EXPECT_THROW(build(reg, "dropout", {&x}, {x, m}, json{{"ratio", -0.1}}), Error);
  EXPECT_THROW(build(reg, "dropout", {&x}, {x, m}, json{{"ratio", "nan"}}), Error);
  EXPECT_THROW(build(reg, "dropout", {&x}, {x, x}, json{{"ratio", 0.5}}), Error);
  EXPECT_THROW(build(reg, "dropout", {&x}, {x}, json{{"ratio", 0.5}}), Error);
  TensorDesc xi{DType::I32, {4, 8}};
  EXPECT_THROW(build(reg, "dropout", {&xi}, {xi, m}, json{{"ratio", 0.5}}), Error);
  EXPECT_THROW(build(reg, "dropout", {&x}, {x, m}, json{{"ratio", 0.5}, {"seed", 1.5}}),
               Error);
}

} // namespace
