//===- DataTest.cpp - kiln-train's data order and rank shards -------------===//
// SPDX-License-Identifier: Apache-2.0
//
// The sampler: each step's W rank shards are disjoint, together they are
// the batch a 1-rank run with batch W·B takes at that step, every epoch is a
// permutation, and the Prefetcher hands each rank exactly its shard.
//===----------------------------------------------------------------------===//
#include "Data.h"

#include "kiln/runtime/Runtime.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <unistd.h>

using namespace kiln;
using namespace kiln::train;

namespace {

/// An [n, 2] f32 array whose sample i is (i, -i), in a temporary file.
std::string writeSamples(int64_t n) {
  char dir[] = "/tmp/kiln-data-test-XXXXXX";
  if (!mkdtemp(dir))
    ADD_FAILURE() << "mkdtemp";
  std::string path = std::string(dir) + "/x.npy";
  rt::HostTensor t(rt::TensorDesc{rt::DType::F32, {n, 2}});
  for (int64_t i = 0; i < n; ++i) {
    t.as<float>()[2 * i] = float(i);
    t.as<float>()[2 * i + 1] = float(-i);
  }
  std::string err;
  EXPECT_TRUE(rt::writeNpy(path, t, err)) << err;
  return path;
}

void openData(Dataset &d, const std::string &path, int64_t batch) {
  DataSpec spec;
  spec.name = "x";
  spec.dtype = rt::DType::F32;
  spec.sampleShape = {2};
  d.open({{"x", path}}, {spec}, batch, "--data");
}

/// The sample indices the Prefetcher gives for steps [0, steps).
std::vector<std::vector<int64_t>> batches(const Dataset &d, uint64_t seed,
                                          int64_t steps) {
  std::vector<std::vector<int64_t>> out;
  Prefetcher p(d, seed, /*shuffle=*/true, 0, steps);
  for (int64_t s = 0; s < steps; ++s) {
    const std::vector<rt::HostTensor> &b = p.get(s);
    std::vector<int64_t> idx;
    for (int64_t i = 0; i < d.batch(); ++i) {
      float v = b[0].as<float>()[2 * i];
      EXPECT_EQ(b[0].as<float>()[2 * i + 1], -v);
      idx.push_back((int64_t)v);
    }
    out.push_back(idx);
  }
  return out;
}

TEST(Data, ShardsPartitionTheGlobalBatch) {
  const int64_t n = 53, B = 3, W = 4, steps = 10; // 4 steps/epoch, 3 epochs
  std::string path = writeSamples(n);
  Dataset global;
  openData(global, path, W * B);
  EXPECT_EQ(global.stepsPerEpoch(), n / (W * B));
  auto want = batches(global, 11, steps);
  std::vector<std::vector<std::vector<int64_t>>> shards;
  for (int64_t r = 0; r < W; ++r) {
    Dataset d;
    openData(d, path, B);
    d.setShard(r, W);
    EXPECT_EQ(d.stepsPerEpoch(), global.stepsPerEpoch());
    shards.push_back(batches(d, 11, steps));
  }
  for (int64_t s = 0; s < steps; ++s) {
    std::vector<int64_t> joined;
    for (int64_t r = 0; r < W; ++r)
      joined.insert(joined.end(), shards[r][s].begin(), shards[r][s].end());
    EXPECT_EQ(joined, want[s]) << "step " << s;
    std::set<int64_t> distinct(joined.begin(), joined.end());
    EXPECT_EQ((int64_t)distinct.size(), W * B) << "step " << s;
  }
}

TEST(Data, OneRankIsTheUnshardedOrder) {
  std::string path = writeSamples(20);
  Dataset a, b;
  openData(a, path, 4);
  openData(b, path, 4);
  b.setShard(0, 1);
  EXPECT_EQ(batches(a, 3, 12), batches(b, 3, 12));
  // Within an epoch every sample appears once.
  auto bs = batches(a, 3, 5);
  std::vector<int64_t> all;
  for (auto &x : bs)
    all.insert(all.end(), x.begin(), x.end());
  std::sort(all.begin(), all.end());
  for (int64_t i = 0; i < 20; ++i)
    EXPECT_EQ(all[i], i);
}

TEST(Data, EpochOrderIsAPermutation) {
  for (uint64_t e = 0; e < 4; ++e) {
    auto o = epochOrder(37, 99, e, true);
    std::sort(o.begin(), o.end());
    for (uint64_t i = 0; i < 37; ++i)
      EXPECT_EQ(o[i], i);
  }
  EXPECT_NE(epochOrder(37, 99, 0, true), epochOrder(37, 99, 1, true));
  EXPECT_EQ(epochOrder(5, 99, 3, false), (std::vector<uint64_t>{0, 1, 2, 3, 4}));
}

TEST(Data, BadShardsAreRefused) {
  std::string path = writeSamples(10);
  Dataset d;
  openData(d, path, 4);
  EXPECT_THROW(d.setShard(2, 2), UserError);
  EXPECT_THROW(d.setShard(0, 0), UserError);
  EXPECT_THROW(d.setShard(0, 3), UserError); // 10 samples < 3 x 4
  d.setShard(1, 2);
  EXPECT_EQ(d.stepsPerEpoch(), 1);
}

} // namespace
