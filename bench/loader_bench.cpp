//===- loader_bench.cpp - kiln-loader-bench: the data loader alone --------===//
// SPDX-License-Identifier: Apache-2.0
//
// The training executable's loader without training: shards of samples
// written under --work (once; kept for later runs), bound as
// `--data x=WORK/.../x-*.npy` through Dataset::open, and read by the
// Prefetcher for a few shuffled epochs by a consumer that only touches each
// batch. Prints the samples/s and GB/s the consumer received per epoch and
// over the epochs after the first (the page cache warm), and the loader's
// own figure (samples per second of busy loader thread, times the threads):
//
//   kiln-loader-bench --work DIR [--shards 16] [--samples-per-shard 65536]
//       [--batch 256] [--loader-threads 2] [--epochs 4] [--images]
//       [--labels] [--no-shuffle] [--drop-nonfinite] [--step-us N]
//       [--augment SPEC]
//
// The default: 16 shards of 65536 samples of 64 floats (256 MiB).
// --images: 3x32x32 floats (CIFAR's shape), 16 shards of 2048 by default
// (384 MiB). --augment SPEC runs kiln-train's augmentation (Augment.h) on
// the loader threads, e.g. "crop=32,pad=4,flip,jitter=0.4,0.4,0.4" for the
// issue's >= 20,000 images/s. --labels adds i64 class indices (y-*.npy)
// as a second input, as a classifier's data has. --step-us N makes the
// consumer spin N microseconds per batch, as a training step would, and
// prints how long get() took per step (median, 99th percentile): the wait
// a step that short sees.
// docs/Performance.md "Data loading" has the figures.
//===----------------------------------------------------------------------===//
#include "Augment.h"
#include "Data.h"

#include "kiln/runtime/Runtime.h"
#include "kiln/runtime/ToolFlags.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sys/stat.h>

using namespace kiln;
using namespace kiln::train;

namespace {

const char *kUsage =
    "usage: %s --work DIR [--shards N] [--samples-per-shard N] [--batch N]\n"
    "          [--loader-threads N] [--epochs N] [--images] [--labels]\n"
    "          [--no-shuffle] [--drop-nonfinite] [--step-us N] [--augment SPEC]\n";

/// Writes `path` with shard `k`'s samples unless a file of that shape is
/// there already (from an earlier run).
void writeShard(const std::string &path, rt::DType dtype,
                const std::vector<int64_t> &shape, int64_t k) {
  NpyFile have;
  try {
    openNpy(path, have);
    if (have.dtype == dtype && have.shape == shape)
      return;
  } catch (const UserError &) {
  }
  rt::HostTensor t(rt::TensorDesc{dtype, shape});
  int64_t n = t.numel();
  if (dtype == rt::DType::F32) {
    // Sample i of shard k starts with its global index (a checkable tag).
    float *p = t.as<float>();
    int64_t per = n / shape[0];
    for (int64_t i = 0; i < n; ++i)
      p[i] = i % per == 0 ? float(k * shape[0] + i / per) : float(i % 97) * 0.01f;
  } else {
    int64_t *p = t.as<int64_t>();
    for (int64_t i = 0; i < n; ++i)
      p[i] = (k * shape[0] + i) % 10;
  }
  std::string err;
  if (!rt::writeNpy(path, t, err))
    fail(err);
}

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int run(int argc, char **argv) {
  std::string work;
  int64_t shards = 16, perShard = 0, batch = 256, threads = 2, epochs = 4,
          stepUs = 0;
  bool images = false, labels = false, noShuffle = false, dropNonFinite = false;
  std::string augment;
  std::vector<std::string> positional;
  rt::FlagParser flags;
  flags.text("--work", work)
      .integer("--shards", shards, 1, 4096)
      .integer("--samples-per-shard", perShard, 1, int64_t(1) << 32)
      .integer("--batch", batch, 1, int64_t(1) << 20)
      .integer("--loader-threads", threads, 1, 256)
      .integer("--epochs", epochs, 1, 100000)
      .integer("--step-us", stepUs, 0, 10000000)
      .flag("--images", images)
      .flag("--labels", labels)
      .flag("--no-shuffle", noShuffle)
      .flag("--drop-nonfinite", dropNonFinite)
      .text("--augment", augment);
  try {
    if (!flags.parse(argc, argv, positional)) {
      std::printf(kUsage, argv[0]);
      return 0;
    }
  } catch (const rt::FlagError &e) {
    fail(e.what());
  }
  if (!positional.empty())
    fail("unexpected argument '" + positional[0] + "'");
  if (work.empty())
    fail("give a directory for the shards with --work DIR");
  if (!perShard)
    perShard = images ? 2048 : 65536;
  std::vector<int64_t> sample = images ? std::vector<int64_t>{3, 32, 32}
                                       : std::vector<int64_t>{64};
  std::string err;
  // One directory per shape of the data: a glob there matches its shards only.
  std::string dir = work + "/" + (images ? "images-" : "vectors-") +
                    std::to_string(shards) + "x" + std::to_string(perShard);
  if (!makeDirs(dir, err))
    fail(err);

  auto t0 = std::chrono::steady_clock::now();
  for (int64_t k = 0; k < shards; ++k) {
    char name[32];
    std::snprintf(name, sizeof name, "-%04lld.npy", (long long)k);
    std::vector<int64_t> shape{perShard};
    shape.insert(shape.end(), sample.begin(), sample.end());
    writeShard(dir + "/x" + name, rt::DType::F32, shape, k);
    if (labels)
      writeShard(dir + "/y" + name, rt::DType::I64, {perShard}, k);
  }
  double writeS = secondsSince(t0);

  // Bound as kiln-train binds --data x=GLOB.
  std::vector<DataSpec> specs(1);
  specs[0].name = "x";
  specs[0].dtype = rt::DType::F32;
  specs[0].sampleShape = sample;
  std::vector<std::pair<std::string, std::string>> bindings{{"x", dir + "/x-*.npy"}};
  if (labels) {
    DataSpec y;
    y.name = "y";
    y.dtype = rt::DType::I64;
    specs.push_back(y);
    bindings.push_back({"y", dir + "/y-*.npy"});
  }
  DataOptions options;
  options.dropNonFinite = dropNonFinite;
  options.threads = (int)threads;
  Dataset data;
  t0 = std::chrono::steady_clock::now();
  data.open(bindings, specs, batch, "--data", false, options);
  double openS = secondsSince(t0);

  uint64_t sampleBytes = 0;
  for (const Source &s : data.sources())
    sampleBytes += s.dstSampleBytes;
  const int64_t spe = data.stepsPerEpoch();
  std::printf("kiln-loader-bench: %llu samples of %s in %lld shards (%.0f MiB), "
              "batch %lld, %lld steps/epoch, %lld loader thread%s, %s\n",
              (unsigned long long)data.numSamples(),
              typeStr(rt::DType::F32, sample).c_str(), (long long)shards,
              double(data.arraySamples() * sampleBytes) / (1 << 20),
              (long long)batch, (long long)spe, (long long)threads,
              threads == 1 ? "" : "s", noShuffle ? "file order" : "shuffled");
  std::printf("  shards ready in %.2f s, opened in %.3f s%s\n", writeS, openS,
              dropNonFinite ? " (with the non-finite scan)" : "");

  LoaderOptions loader;
  loader.threads = (int)threads;
  std::unique_ptr<Augmenter> augmenter;
  if (!augment.empty()) {
    std::vector<DataSpec> batchSpecs;
    for (const Source &s : data.sources())
      batchSpecs.push_back(s.spec);
    augmenter = Augmenter::parse(augment, batchSpecs, "y", 10, data.numSamples());
    std::printf("  augment: %s\n", augmenter->describe().c_str());
    FetchSample fetch = [&data](size_t input, uint64_t sample, void *dst) {
      data.copySample(input, data.sampleId(sample), dst);
    };
    loader.hook = [&augmenter, fetch](std::vector<rt::HostTensor> &b, int64_t i,
                                      uint64_t id, uint64_t epoch) {
      augmenter->apply(b, i, id, /*seed=*/1, epoch, fetch);
    };
  }
  const int64_t total = spe * epochs;
  Prefetcher prefetch(data, /*seed=*/1, !noShuffle, 0, total, loader);
  double checksum = 0, warmS = 0, allS = 0;
  std::vector<double> getUs;
  for (int64_t e = 0; e < epochs; ++e) {
    auto te = std::chrono::steady_clock::now();
    for (int64_t p = 0; p < spe; ++p) {
      auto tg = std::chrono::steady_clock::now();
      const std::vector<rt::HostTensor> &b = prefetch.get(e * spe + p);
      if (stepUs) {
        getUs.push_back(secondsSince(tg) * 1e6);
        auto ts = std::chrono::steady_clock::now();
        while (secondsSince(ts) * 1e6 < (double)stepUs) {
        }
      }
      // Touch every sample's first value.
      const float *x = b[0].as<float>();
      uint64_t per = (uint64_t)b[0].numel() / (uint64_t)batch;
      for (int64_t i = 0; i < batch; ++i)
        checksum += x[(uint64_t)i * per];
    }
    double s = secondsSince(te);
    allS += s;
    if (e > 0)
      warmS += s;
    double n = double(spe * batch);
    if (epochs <= 20 || e == epochs - 1)
      std::printf("  epoch %lld: %.3f s, %.0f samples/s, %.2f GB/s\n", (long long)e, s,
                  n / s, n * double(sampleBytes) / s / 1e9);
  }
  if (!getUs.empty()) {
    std::sort(getUs.begin(), getUs.end());
    double sum = 0;
    for (double u : getUs)
      sum += u;
    std::printf("steps of %lld us: get() took %.2f us median, %.1f us at the 99th "
                "percentile, %.2f%% of the time in all\n",
                (long long)stepUs, getUs[getUs.size() / 2], getUs[getUs.size() * 99 / 100],
                100 * sum * 1e-6 / allS);
  }
  LoaderStats st = prefetch.stats();
  if (epochs > 1) {
    double n = double(spe * batch * (epochs - 1));
    std::printf("epochs 1-%lld (warm): %.0f samples/s, %.2f GB/s received by the "
                "consumer\n",
                (long long)(epochs - 1), n / warmS, n * double(sampleBytes) / warmS / 1e9);
  }
  std::printf("loader: %.0f samples/s loaded on %d thread%s (busy %.2f s of %.2f s "
              "each), the consumer waited %.1f%% of the time (checksum %.6g)\n",
              st.samplesPerSecond(), st.threads, st.threads == 1 ? "" : "s",
              st.busySeconds / st.threads, st.elapsedSeconds,
              100 * st.waitFraction(), checksum);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "%s: %s\n", argc > 0 ? argv[0] : "kiln-loader-bench",
                 e.what());
    return 1;
  }
}
