//===- DataTest.cpp - kiln-train's data order and rank shards -------------===//
// SPDX-License-Identifier: Apache-2.0
//
// The sampler: each step's W rank shards are disjoint, together they are
// the batch a 1-rank run with batch W·B takes at that step, every epoch is a
// permutation, and the Prefetcher hands each rank exactly its shard.
// Sharded arrays (globs, manifests) are the single file's array sample for
// sample; one-hot labels; --drop-nonfinite; any number of loader threads
// and any queue depth give the single thread's batches; the sample hook.
//===----------------------------------------------------------------------===//
#include "Data.h"

#include "kiln/runtime/Runtime.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <mutex>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

using namespace kiln;
using namespace kiln::train;

namespace {

/// The temporary directories, removed when the tests end.
struct TempDirs {
  std::vector<std::string> dirs;
  ~TempDirs() {
    for (const std::string &d : dirs)
      removeTree(d);
  }
} gTempDirs;

std::string tempDir() {
  char dir[] = "/tmp/kiln-data-test-XXXXXX";
  if (!mkdtemp(dir))
    ADD_FAILURE() << "mkdtemp";
  gTempDirs.dirs.push_back(dir);
  return dir;
}

/// Writes an [n, 2] f32 array whose sample i is (first+i, -(first+i)).
void writeRange(const std::string &path, int64_t first, int64_t n) {
  rt::HostTensor t(rt::TensorDesc{rt::DType::F32, {n, 2}});
  for (int64_t i = 0; i < n; ++i) {
    t.as<float>()[2 * i] = float(first + i);
    t.as<float>()[2 * i + 1] = float(-(first + i));
  }
  std::string err;
  EXPECT_TRUE(rt::writeNpy(path, t, err)) << err;
}

/// An [n, 2] f32 array whose sample i is (i, -i), in a temporary file.
std::string writeSamples(int64_t n) {
  std::string path = tempDir() + "/x.npy";
  writeRange(path, 0, n);
  return path;
}

/// The same array split into shards of `sizes` (summing to n) in a new
/// directory: PREFIX-000.npy, PREFIX-001.npy, ...; returns the directory.
std::string writeShards(const std::vector<int64_t> &sizes,
                        const std::string &prefix = "x") {
  std::string dir = tempDir();
  int64_t first = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    char name[32];
    std::snprintf(name, sizeof name, "-%03zu.npy", k);
    writeRange(dir + "/" + prefix + name, first, sizes[k]);
    first += sizes[k];
  }
  return dir;
}

void writeText(const std::string &path, const std::string &text) {
  std::ofstream f(path);
  f << text;
}

template <typename T>
void writeArray(const std::string &path, rt::DType dtype,
                const std::vector<int64_t> &shape, const std::vector<T> &v) {
  rt::HostTensor t(rt::TensorDesc{dtype, shape});
  EXPECT_EQ((size_t)t.numel(), v.size());
  std::copy(v.begin(), v.end(), t.as<T>());
  std::string err;
  EXPECT_TRUE(rt::writeNpy(path, t, err)) << err;
}

/// The UserError message of `fn`, "" when it does not throw.
template <typename F> std::string errorOf(F fn) {
  try {
    fn();
  } catch (const UserError &e) {
    return e.what();
  }
  return "";
}

DataSpec xSpec() {
  DataSpec spec;
  spec.name = "x";
  spec.dtype = rt::DType::F32;
  spec.sampleShape = {2};
  return spec;
}

void openData(Dataset &d, const std::string &path, int64_t batch) {
  DataSpec spec;
  spec.name = "x";
  spec.dtype = rt::DType::F32;
  spec.sampleShape = {2};
  d.open({{"x", path}}, {spec}, batch, "--data");
}

/// The sample indices the Prefetcher gives for steps [first, steps).
std::vector<std::vector<int64_t>> batches(const Dataset &d, uint64_t seed,
                                          int64_t steps, LoaderOptions o = {},
                                          int64_t first = 0, bool shuffle = true) {
  std::vector<std::vector<int64_t>> out;
  Prefetcher p(d, seed, shuffle, first, steps, o);
  for (int64_t s = first; s < steps; ++s) {
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

TEST(Data, GlobsExpandInByteOrder) {
  std::string dir = tempDir();
  for (const char *n : {"x-10.npy", "x-2.npy", "x-1.npy", "y-0.npy"})
    writeRange(dir + "/" + n, 0, 3);
  ASSERT_EQ(mkdir((dir + "/x-dir.npy").c_str(), 0700), 0); // directories are skipped
  std::vector<std::string> got = dataFiles("--data", "x", dir + "/x-*.npy");
  EXPECT_EQ(got, (std::vector<std::string>{dir + "/x-1.npy", dir + "/x-10.npy",
                                           dir + "/x-2.npy"}));
  // A name without glob characters, or a file of exactly that name, is
  // itself (openNpy tells what is wrong with it).
  EXPECT_EQ(dataFiles("--data", "x", dir + "/nope.npy"),
            std::vector<std::string>{dir + "/nope.npy"});
  writeRange(dir + "/odd[1].npy", 0, 3);
  EXPECT_EQ(dataFiles("--data", "x", dir + "/odd[1].npy"),
            std::vector<std::string>{dir + "/odd[1].npy"});
  EXPECT_EQ(errorOf([&] { dataFiles("--data", "x", dir + "/nothing*.npy"); }),
            "--data x=" + dir + "/nothing*.npy: no file matches");
  EXPECT_EQ(errorOf([] { dataFiles("--eval-data", "y", "/tmp/nothing*.npy"); }),
            "--eval-data y=/tmp/nothing*.npy: no file matches");
  Dataset d;
  EXPECT_EQ(errorOf([&] {
              d.open({{"x", dir + "/q?.npy"}}, {xSpec()}, 1, "--data");
            }),
            "--data x=" + dir + "/q?.npy: no file matches");
}

/// Every tensor of a batch, as bytes.
std::vector<std::string> bytesOf(const std::vector<rt::HostTensor> &b) {
  std::vector<std::string> out;
  for (const rt::HostTensor &t : b)
    out.emplace_back(static_cast<const char *>(t.data()), t.bytes());
  return out;
}

/// Every batch of steps [0, steps), as bytes.
std::vector<std::vector<std::string>> allBatches(const Dataset &d, uint64_t seed,
                                                 int64_t steps, bool shuffle,
                                                 LoaderOptions o = {}) {
  std::vector<std::vector<std::string>> out;
  Prefetcher p(d, seed, shuffle, 0, steps, o);
  for (int64_t s = 0; s < steps; ++s)
    out.push_back(bytesOf(p.get(s)));
  return out;
}

TEST(Data, ShardsAreTheSingleFileArray) {
  // 61 samples as one file and as 6 shards of uneven length, one empty.
  std::vector<int64_t> sizes{7, 20, 0, 1, 30, 3};
  std::string one = writeSamples(61);
  std::string dir = writeShards(sizes);
  Dataset a, b;
  a.open({{"x", one}}, {xSpec()}, 4, "--data");
  b.open({{"x", dir + "/x-*.npy"}}, {xSpec()}, 4, "--data");
  ASSERT_EQ(b.numSamples(), 61u);
  EXPECT_EQ(b.sources()[0].shards.size(), 6u);
  EXPECT_EQ(b.sources()[0].what, dir + "/x-*.npy (6 files)");
  for (bool shuffle : {true, false})
    for (uint64_t seed : {0, 7})
      EXPECT_EQ(allBatches(a, seed, 40, shuffle), allBatches(b, seed, 40, shuffle))
          << "seed " << seed << " shuffle " << shuffle;
  // Every sample, across every boundary, is the file's.
  const Source &s = b.sources()[0];
  for (uint64_t i = 0; i < 61; ++i) {
    float v[2];
    std::memcpy(v, s.sample(i), sizeof v);
    EXPECT_EQ(v[0], float(i));
    EXPECT_EQ(v[1], -float(i));
    size_t k = s.shardOf(i);
    EXPECT_GE(i, s.starts[k]);
    EXPECT_LT(i, s.starts[k + 1]);
  }
  EXPECT_EQ(s.shardOf(6), 0u);
  EXPECT_EQ(s.shardOf(7), 1u);
  EXPECT_EQ(s.shardOf(27), 3u); // shard 2 is empty
  EXPECT_EQ(s.shardOf(28), 4u);
  EXPECT_EQ(s.shardOf(60), 5u);
  // Ranks see exactly the samples of the 1-rank run, sharded or not.
  for (int64_t r = 0; r < 2; ++r) {
    Dataset c, e;
    c.open({{"x", one}}, {xSpec()}, 2, "--data");
    e.open({{"x", dir + "/x-*.npy"}}, {xSpec()}, 2, "--data");
    c.setShard(r, 2);
    e.setShard(r, 2);
    EXPECT_EQ(allBatches(c, 3, 20, true), allBatches(e, 3, 20, true));
  }
}

TEST(Data, ShardsMustAgree) {
  std::string dir = writeShards({5, 5});
  writeArray<double>(dir + "/x-002.npy", rt::DType::F64, {2, 2}, {0, 0, 0, 0});
  Dataset d;
  EXPECT_EQ(errorOf([&] { d.open({{"x", dir + "/x-*.npy"}}, {xSpec()}, 2, "--data"); }),
            "--data x: " + dir + "/x-002.npy holds f64 samples of shape [2], " + dir +
                "/x-000.npy holds f32 samples of shape [2]; the shards of an input "
                "must agree");
  std::remove((dir + "/x-002.npy").c_str());
  writeArray<float>(dir + "/x-002.npy", rt::DType::F32, {1, 3}, {0, 0, 0});
  EXPECT_EQ(errorOf([&] { d.open({{"x", dir + "/x-*.npy"}}, {xSpec()}, 2, "--data"); }),
            "--data x: " + dir + "/x-002.npy holds f32 samples of shape [3], " + dir +
                "/x-000.npy holds f32 samples of shape [2]; the shards of an input "
                "must agree");
  // The first shard against the model, as a single file is.
  std::string d2 = tempDir();
  writeArray<float>(d2 + "/a.npy", rt::DType::F32, {1, 3}, {0, 0, 0});
  EXPECT_EQ(errorOf([&] { d.open({{"x", d2 + "/*.npy"}}, {xSpec()}, 1, "--data"); }),
            "--data x: " + d2 + "/a.npy holds f32 samples of shape [3], the model "
                                "expects f32 [2]");
  // Inputs of different total lengths.
  std::string d3 = writeShards({3, 4});
  writeArray<int64_t>(d3 + "/y.npy", rt::DType::I64, {6}, {0, 1, 2, 3, 4, 5});
  DataSpec y;
  y.name = "y";
  y.dtype = rt::DType::I64;
  EXPECT_EQ(errorOf([&] {
              d.open({{"x", d3 + "/x-*.npy"}, {"y", d3 + "/y.npy"}}, {xSpec(), y}, 1,
                     "--data");
            }),
            "--data y: " + d3 + "/y.npy has 6 samples, --data x: " + d3 +
                "/x-*.npy (2 files) has 7");
  // Too few samples over all shards.
  EXPECT_EQ(errorOf([&] { d.open({{"x", d3 + "/x-*.npy"}}, {xSpec()}, 8, "--data"); }),
            "--data x: " + d3 + "/x-*.npy (2 files) has 7 samples, fewer than one "
                                "batch of 8");
}

TEST(Data, ManifestListsTheShards) {
  std::string dir = writeShards({10, 3, 12});
  writeArray<int64_t>(dir + "/y.npy", rt::DType::I64, {25},
                      std::vector<int64_t>(25, 1));
  writeText(dir + "/manifest.json",
            R"({"inputs": {"x": ["x-000.npy", "x-001.npy", "x-002.npy"],
                           "y": ["y.npy"]}})");
  DataSpec y;
  y.name = "y";
  y.dtype = rt::DType::I64;
  Dataset a, b;
  a.open({{"x", writeSamples(25)}, {"y", dir + "/y.npy"}}, {xSpec(), y}, 5, "--data");
  b.open({{"x", dir}, {"y", dir + "/"}}, {xSpec(), y}, 5, "--data");
  EXPECT_EQ(b.sources()[0].shards.size(), 3u);
  EXPECT_EQ(b.sources()[0].shards[1].path, dir + "/x-001.npy");
  EXPECT_EQ(allBatches(a, 4, 12, true), allBatches(b, 4, 12, true));

  auto err = [&](const std::string &manifest) {
    writeText(dir + "/manifest.json", manifest);
    return errorOf([&] { Dataset d; d.open({{"x", dir}}, {xSpec()}, 1, "--data"); });
  };
  std::string at = "--data x: " + dir + "/manifest.json: ";
  EXPECT_EQ(err("{\"inputs\": "), at + "not JSON (a manifest is "
                                       "{\"inputs\": {\"NAME\": [\"FILE.npy\", ...]}})");
  EXPECT_EQ(err("[1]"), at + "it has no \"inputs\" object (a manifest is "
                             "{\"inputs\": {\"NAME\": [\"FILE.npy\", ...]}})");
  EXPECT_EQ(err(R"({"inputs": {"a": [], "b": []}})"),
            at + "it lists no input 'x' (it lists a, b)");
  EXPECT_EQ(err(R"({"inputs": {"x": []}})"),
            at + "inputs.x is not a non-empty list of file names");
  EXPECT_EQ(err(R"({"inputs": {"x": "x-000.npy"}})"),
            at + "inputs.x is not a non-empty list of file names");
  EXPECT_EQ(err(R"({"inputs": {"x": ["x-000.npy", 3]}})"),
            at + "inputs.x[1] is not a file name");
  EXPECT_EQ(err(R"({"inputs": {"x": ["/etc/passwd"]}})"),
            at + "inputs.x[0] '/etc/passwd' is not a path relative to " + dir);
  EXPECT_EQ(err(R"({"inputs": {"x": ["x-000.npy", "gone.npy"]}})"),
            "--data x: " + dir + "/gone.npy: No such file or directory");
  std::remove((dir + "/manifest.json").c_str());
  EXPECT_EQ(errorOf([&] { Dataset d; d.open({{"x", dir}}, {xSpec()}, 1, "--data"); }),
            "--data x: " + dir + " is a directory, and " + dir +
                "/manifest.json: No such file or directory (a directory of shards "
                "needs a manifest.json)");
}

TEST(Data, ClassIndicesBecomeOneHotRows) {
  std::string dir = tempDir();
  writeRange(dir + "/x.npy", 0, 6);
  writeArray<int32_t>(dir + "/y.npy", rt::DType::I32, {6}, {2, 0, 1, 3, 3, 0});
  for (rt::DType dt : {rt::DType::F32, rt::DType::F64, rt::DType::F16, rt::DType::BF16}) {
    DataSpec y;
    y.name = "y";
    y.dtype = dt;
    y.sampleShape = {4};
    Dataset d;
    d.open({{"x", dir + "/x.npy"}, {"y", dir + "/y.npy"}}, {xSpec(), y}, 6, "--data");
    EXPECT_EQ(d.sources()[1].conversion, Conversion::OneHot);
    std::vector<rt::HostTensor> b = d.makeBatch();
    std::vector<uint64_t> order = epochOrder(6, 0, 0, false);
    d.gather(order, 0, b);
    const int32_t want[6] = {2, 0, 1, 3, 3, 0};
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t c = 0; c < 4; ++c) {
        double v;
        const void *p = static_cast<const uint8_t *>(b[1].data()) +
                        (i * 4 + c) * rt::dtypeSize(dt);
        switch (dt) {
        case rt::DType::F32: v = *static_cast<const float *>(p); break;
        case rt::DType::F64: v = *static_cast<const double *>(p); break;
        case rt::DType::F16: v = rt::halfToFloat(*static_cast<const uint16_t *>(p)); break;
        default: v = rt::bf16ToFloat(*static_cast<const uint16_t *>(p)); break;
        }
        EXPECT_EQ(v, c == want[i] ? 1.0 : 0.0) << rt::dtypeName(dt) << " " << i << "," << c;
      }
  }
  DataSpec y;
  y.name = "y";
  y.dtype = rt::DType::F32;
  y.sampleShape = {3};
  Dataset d;
  EXPECT_EQ(errorOf([&] {
              d.open({{"x", dir + "/x.npy"}, {"y", dir + "/y.npy"}}, {xSpec(), y}, 1,
                     "--data");
            }),
            "--data y: value 3 at sample 3 is outside [0, 3) (the model reads one-hot "
            "rows of 3 classes)");
  writeArray<int64_t>(dir + "/y-a.npy", rt::DType::I64, {3}, {0, 1, 2});
  writeArray<int64_t>(dir + "/y-b.npy", rt::DType::I64, {3}, {2, -1, 0});
  EXPECT_EQ(errorOf([&] {
              d.open({{"x", dir + "/x.npy"}, {"y", dir + "/y-?.npy"}}, {xSpec(), y}, 1,
                     "--data");
            }),
            "--data y: " + dir + "/y-b.npy: value -1 at sample 1 is outside [0, 3) "
                                 "(the model reads one-hot rows of 3 classes)");
  // Labels of another shape are not class indices.
  writeArray<int64_t>(dir + "/y2.npy", rt::DType::I64, {6, 1}, {0, 1, 2, 0, 1, 2});
  EXPECT_EQ(errorOf([&] {
              d.open({{"x", dir + "/x.npy"}, {"y", dir + "/y2.npy"}}, {xSpec(), y}, 1,
                     "--data");
            }),
            "--data y: " + dir + "/y2.npy holds i64 samples of shape [1], the model "
                                 "expects f32 [3]");
}

TEST(Data, DropNonFiniteLeavesSamplesOut) {
  // 40 samples in 3 shards; samples 3 (NaN), 17 (inf), 18 (-inf) and 39
  // (NaN in the second value) are dropped. y (integers) is not scanned.
  std::string dir = writeShards({10, 15, 15});
  auto poison = [&](const std::string &file, int64_t first, int64_t n,
                    std::vector<std::pair<int64_t, int>> at) {
    rt::HostTensor t(rt::TensorDesc{rt::DType::F32, {n, 2}});
    for (int64_t i = 0; i < n; ++i) {
      t.as<float>()[2 * i] = float(first + i);
      t.as<float>()[2 * i + 1] = -float(first + i);
    }
    for (auto [i, e] : at)
      t.as<float>()[2 * (i - first) + e] =
          i == 3 || i == 39 ? std::numeric_limits<float>::quiet_NaN()
                            : (i == 17 ? 1 : -1) * std::numeric_limits<float>::infinity();
    std::string err;
    ASSERT_TRUE(rt::writeNpy(dir + "/" + file, t, err)) << err;
  };
  poison("x-000.npy", 0, 10, {{3, 0}});
  poison("x-001.npy", 10, 15, {{17, 0}, {18, 1}});
  poison("x-002.npy", 25, 15, {{39, 1}});
  std::vector<int64_t> ys(40);
  for (int64_t i = 0; i < 40; ++i)
    ys[i] = i;
  writeArray<int64_t>(dir + "/y.npy", rt::DType::I64, {40}, ys);
  DataSpec y;
  y.name = "y";
  y.dtype = rt::DType::I64;
  for (int threads : {1, 2, 5}) {
    DataOptions o;
    o.dropNonFinite = true;
    o.threads = threads;
    Dataset d;
    d.open({{"x", dir + "/x-*.npy"}, {"y", dir + "/y.npy"}}, {xSpec(), y}, 4, "--data",
           false, o);
    EXPECT_EQ(d.arraySamples(), 40u);
    EXPECT_EQ(d.numSamples(), 36u);
    EXPECT_EQ(d.dropped(), 4u);
    EXPECT_EQ(d.firstDropped(), dir + "/x-000.npy sample 3");
    EXPECT_EQ(d.stepsPerEpoch(), 9);
    std::vector<uint64_t> kept;
    for (uint64_t i = 0; i < 40; ++i)
      if (i != 3 && i != 17 && i != 18 && i != 39)
        kept.push_back(i);
    for (uint64_t i = 0; i < 36; ++i)
      EXPECT_EQ(d.sampleId(i), kept[i]);
    // The order is the Data.h order over the kept samples.
    Prefetcher p(d, 5, true, 0, 18);
    for (int64_t s = 0; s < 18; ++s) {
      std::vector<uint64_t> order = epochOrder(36, 5, (uint64_t)(s / 9), true);
      const std::vector<rt::HostTensor> &b = p.get(s);
      for (int64_t i = 0; i < 4; ++i) {
        uint64_t want = kept[order[(uint64_t)(s % 9) * 4 + (uint64_t)i]];
        EXPECT_EQ(b[0].as<float>()[2 * i], float(want));
        EXPECT_EQ(b[1].as<int64_t>()[i], (int64_t)want);
      }
    }
  }
  // Without the flag nothing is scanned or dropped.
  Dataset d;
  d.open({{"x", dir + "/x-*.npy"}}, {xSpec()}, 4, "--data");
  EXPECT_EQ(d.numSamples(), 40u);
  EXPECT_EQ(d.dropped(), 0u);
  // Too few kept for a batch.
  DataOptions o;
  o.dropNonFinite = true;
  std::string d2 = tempDir();
  writeArray<float>(d2 + "/x.npy", rt::DType::F32, {3, 2},
                    {0, 0, std::nanf(""), 0, 1, 1});
  EXPECT_EQ(errorOf([&] { d.open({{"x", d2 + "/x.npy"}}, {xSpec()}, 3, "--data", false, o); }),
            "--data x: " + d2 + "/x.npy has 3 samples, 2 kept after dropping those "
                                "with NaN/Inf, fewer than one batch of 3");
}

TEST(DataLoader, ThreadsAndDepthsGiveTheSameBatches) {
  std::string dir = writeShards({50, 13, 40});
  Dataset d;
  d.open({{"x", dir + "/x-*.npy"}}, {xSpec()}, 5, "--data");
  const int64_t steps = 70; // 20 steps/epoch: 3.5 epochs
  auto want = allBatches(d, 9, steps, true);
  for (int threads : {1, 2, 3, 4, 8})
    for (int depth : {0, 1, 2, 5, 100}) {
      LoaderOptions o;
      o.threads = threads;
      o.depth = depth;
      EXPECT_EQ(allBatches(d, 9, steps, true, o), want)
          << threads << " threads, depth " << depth;
      // Resuming mid-epoch: the same batches from there.
      auto got = batches(d, 9, steps, o, 27);
      auto ref = batches(d, 9, steps, {}, 0);
      EXPECT_EQ(got, std::vector<std::vector<int64_t>>(ref.begin() + 27, ref.end()));
    }
  // Stopping before the end (a signal, an error) leaves nothing behind.
  for (int threads : {1, 4}) {
    LoaderOptions o;
    o.threads = threads;
    Prefetcher p(d, 9, true, 0, steps, o);
    p.get(0);
    p.get(1);
  }
  // Out of order is an error.
  Prefetcher p(d, 9, true, 3, 10);
  EXPECT_THROW(p.get(4), UserError);
}

TEST(DataLoader, HookSeesEverySampleOnce) {
  std::string dir = writeShards({17, 16});
  Dataset d;
  d.open({{"x", dir + "/x-*.npy"}}, {xSpec()}, 4, "--data");
  const int64_t steps = 20; // 8 steps/epoch
  for (int threads : {1, 3}) {
    std::mutex mu;
    std::vector<std::tuple<uint64_t, uint64_t, int64_t>> seen; // epoch, id, b
    LoaderOptions o;
    o.threads = threads;
    o.hook = [&](std::vector<rt::HostTensor> &batch, int64_t b, uint64_t id,
                 uint64_t epoch) {
      // The sample is gathered; an augmentation may change it.
      EXPECT_EQ(batch[0].as<float>()[2 * b], float(id));
      batch[0].as<float>()[2 * b + 1] = float(id) + 0.5f;
      std::lock_guard<std::mutex> lock(mu);
      seen.emplace_back(epoch, id, b);
    };
    Prefetcher p(d, 2, true, 0, steps, o);
    for (int64_t s = 0; s < steps; ++s) {
      const std::vector<rt::HostTensor> &b = p.get(s);
      std::vector<uint64_t> order = epochOrder(33, 2, (uint64_t)(s / 8), true);
      for (int64_t i = 0; i < 4; ++i) {
        uint64_t id = order[(uint64_t)(s % 8) * 4 + (uint64_t)i];
        EXPECT_EQ(b[0].as<float>()[2 * i], float(id));
        EXPECT_EQ(b[0].as<float>()[2 * i + 1], float(id) + 0.5f);
      }
    }
    LoaderStats st = p.stats();
    EXPECT_EQ(st.samples, (uint64_t)(steps * 4));
    EXPECT_EQ(st.threads, threads);
    EXPECT_GE(st.elapsedSeconds, st.waitSeconds);
    ASSERT_EQ(seen.size(), (size_t)(steps * 4));
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(std::unique(seen.begin(), seen.end()), seen.end());
    // Per epoch: 32 distinct ids at batch positions 0..3, 8 of each.
    for (uint64_t e = 0; e < 3; ++e) {
      std::set<uint64_t> ids;
      int64_t n = 0;
      for (auto &[ep, id, b] : seen)
        if (ep == e) {
          ids.insert(id);
          ++n;
          EXPECT_LT(b, 4);
        }
      EXPECT_EQ(n, e < 2 ? 32 : 16);
      EXPECT_EQ(ids.size(), (size_t)n);
    }
  }
}

TEST(DataLoader, AHookErrorReachesTheStep) {
  std::string path = writeSamples(12);
  Dataset d;
  openData(d, path, 4);
  LoaderOptions o;
  o.threads = 2;
  o.hook = [](std::vector<rt::HostTensor> &, int64_t b, uint64_t id, uint64_t epoch) {
    if (epoch == 1 && b == 2)
      fail("augment: sample " + std::to_string(id) + " is bad");
  };
  Prefetcher p(d, 0, false, 0, 6);
  Prefetcher q(d, 0, false, 0, 6, o);
  for (int64_t s = 0; s < 3; ++s)
    EXPECT_EQ(bytesOf(p.get(s)), bytesOf(q.get(s)));
  EXPECT_EQ(errorOf([&] { q.get(3); }), "data loader: augment: sample 2 is bad");
}

} // namespace
