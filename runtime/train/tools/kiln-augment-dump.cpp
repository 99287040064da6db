//===- kiln-augment-dump.cpp - apply --augment to arrays ---------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
//   kiln-augment-dump --augment SPEC --data NAME=FILE.npy [--data ...]
//       [--labels NAME] [--num-classes C] [--seed S] [--epoch E]
//       [--batch B] [--threads T] [--out-dir DIR] [--time N]
//
// Applies Augmenter (Augment.h) to every sample of the arrays, as the
// training loader does, and writes DIR/NAME.npy for every input: sample i
// is batch row i mod B with sample id i, the rows of a batch spread over T
// threads (so the output shows that the thread count does not matter).
// With --num-classes C, an integer labels array becomes one-hot float32
// rows [C], as the loader feeds soft labels. --time N instead times apply()
// over N samples on one thread and prints samples per second.
// test/Training/augment.test compares the output with augment_ref.py.
// Any error: one line "kiln-augment-dump: <message>", exit 1.
//===----------------------------------------------------------------------===//
#include "Augment.h"
#include "Data.h"
#include "Util.h"

#include "kiln/runtime/Runtime.h"
#include "kiln/runtime/ToolFlags.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>
#include <mutex>
#include <thread>

using namespace kiln;
using namespace kiln::train;

namespace {

const char *kUsage =
    "usage: kiln-augment-dump --augment SPEC --data NAME=FILE.npy [--data ...]\n"
    "           [--labels NAME] [--num-classes C] [--seed S] [--epoch E]\n"
    "           [--batch B] [--threads T] [--out-dir DIR] [--time N]\n";

/// One array: the file, its spec and (for one-hot labels) the class count.
struct Array {
  NpyFile npy;
  DataSpec spec;
  int64_t oneHot = 0; // > 0: integer labels written as one-hot rows
  uint64_t srcBytes = 0, dstBytes = 0;
};

/// Sample `i` of `a` in the spec's layout.
void readSample(const Array &a, uint64_t i, void *dst) {
  const uint8_t *src = a.npy.data + i * a.srcBytes;
  if (!a.oneHot) {
    std::memcpy(dst, src, a.dstBytes);
    return;
  }
  int64_t y;
  switch (a.npy.dtype) {
  case rt::DType::I64: std::memcpy(&y, src, 8); break;
  case rt::DType::I32: { int32_t v; std::memcpy(&v, src, 4); y = v; break; }
  case rt::DType::U8: y = *src; break;
  default: y = -1; break;
  }
  float *row = static_cast<float *>(dst);
  std::fill(row, row + a.oneHot, 0.0f);
  if (y < 0 || y >= a.oneHot)
    fail("--data " + a.spec.name + ": label " + std::to_string(y) +
         " at sample " + std::to_string(i) + " is outside [0, " +
         std::to_string(a.oneHot) + ")");
  row[y] = 1.0f;
}

int run(int argc, char **argv) {
  std::string spec, labels = "labels", outDir = ".";
  std::vector<std::string> data, positional;
  int64_t numClasses = 0, batch = 8, threads = 1, timeN = 0, epoch = 0;
  uint64_t seed = 0;
  rt::FlagParser flags;
  flags.text("--augment", spec)
      .list("--data", data)
      .text("--labels", labels)
      .integer("--num-classes", numClasses, 1, int64_t(1) << 24)
      .unsignedInteger("--seed", seed)
      .integer("--epoch", epoch, 0, std::numeric_limits<int64_t>::max())
      .integer("--batch", batch, 1, int64_t(1) << 20)
      .integer("--threads", threads, 1, 256)
      .text("--out-dir", outDir)
      .integer("--time", timeN, 0, int64_t(1) << 40);
  try {
    if (!flags.parse(argc, argv, positional)) {
      std::printf("%s", kUsage);
      return 0;
    }
  } catch (const rt::FlagError &e) {
    fail(e.what());
  }
  if (!positional.empty())
    fail("unexpected argument '" + positional[0] + "'");
  if (spec.empty() || data.empty())
    fail("needs --augment SPEC and --data NAME=FILE.npy");

  std::vector<Array> arrays(data.size());
  std::vector<DataSpec> specs;
  uint64_t n = 0;
  for (size_t k = 0; k < data.size(); ++k) {
    size_t eq = data[k].find('=');
    if (eq == std::string::npos || eq == 0)
      fail("--data needs NAME=FILE.npy, got '" + data[k] + "'");
    Array &a = arrays[k];
    a.spec.name = data[k].substr(0, eq);
    openNpy(data[k].substr(eq + 1), a.npy);
    if (a.npy.shape.empty())
      fail("--data " + a.spec.name + ": a scalar has no samples");
    uint64_t rows = (uint64_t)a.npy.shape[0];
    if (k && rows != n)
      fail("--data " + a.spec.name + ": " + std::to_string(rows) +
           " samples, the first array has " + std::to_string(n));
    n = rows;
    a.spec.dtype = a.npy.dtype;
    a.spec.sampleShape.assign(a.npy.shape.begin() + 1, a.npy.shape.end());
    uint64_t elems = 1;
    for (int64_t d : a.spec.sampleShape)
      elems *= (uint64_t)d;
    a.srcBytes = elems * rt::dtypeSize(a.npy.dtype);
    if (a.spec.name == labels && numClasses > 0 && a.spec.sampleShape.empty() &&
        !rt::isFloat(a.npy.dtype)) {
      a.oneHot = numClasses;
      a.spec.dtype = rt::DType::F32;
      a.spec.sampleShape = {numClasses};
      elems = (uint64_t)numClasses;
    }
    a.dstBytes = elems * rt::dtypeSize(a.spec.dtype);
    specs.push_back(a.spec);
  }
  if (n == 0)
    fail("the arrays have no samples");

  std::unique_ptr<Augmenter> aug = Augmenter::parse(
      spec, specs, labels,
      numClasses > 0 ? std::optional<int64_t>(numClasses) : std::nullopt, n);
  std::printf("augment: %s\n", aug->describe().c_str());
  FetchSample fetch = [&](size_t input, uint64_t sample, void *dst) {
    readSample(arrays[input], sample, dst);
  };
  std::vector<rt::HostTensor> b;
  for (const Array &a : arrays) {
    rt::TensorDesc d{a.spec.dtype, {batch}};
    d.shape.insert(d.shape.end(), a.spec.sampleShape.begin(),
                   a.spec.sampleShape.end());
    b.emplace_back(d);
  }
  auto fill = [&](uint64_t first, int64_t rows) {
    for (size_t k = 0; k < arrays.size(); ++k)
      for (int64_t r = 0; r < rows; ++r)
        readSample(arrays[k], (first + (uint64_t)r) % n,
                   static_cast<uint8_t *>(b[k].data()) + r * arrays[k].dstBytes);
  };

  if (timeN > 0) {
    double seconds = 0;
    for (int64_t done = 0; done < timeN; done += batch) {
      int64_t rows = std::min<int64_t>(batch, timeN - done);
      fill((uint64_t)done, rows);
      auto t0 = std::chrono::steady_clock::now();
      for (int64_t r = 0; r < rows; ++r)
        aug->apply(b, r, ((uint64_t)(done + r)) % n, seed, (uint64_t)epoch,
                   fetch);
      seconds += std::chrono::duration<double>(
                     std::chrono::steady_clock::now() - t0)
                     .count();
    }
    std::printf("apply: %lld samples in %.3f s on 1 thread: %.0f samples/s\n",
                (long long)timeN, seconds, (double)timeN / seconds);
    return 0;
  }

  std::vector<rt::HostTensor> out;
  for (const Array &a : arrays) {
    rt::TensorDesc d{a.spec.dtype, {(int64_t)n}};
    d.shape.insert(d.shape.end(), a.spec.sampleShape.begin(),
                   a.spec.sampleShape.end());
    out.emplace_back(d);
  }
  for (uint64_t first = 0; first < n; first += (uint64_t)batch) {
    int64_t rows = (int64_t)std::min<uint64_t>((uint64_t)batch, n - first);
    fill(first, rows);
    std::string error;
    std::vector<std::thread> pool;
    std::mutex mu;
    for (int64_t t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        try {
          for (int64_t r = t; r < rows; r += threads)
            aug->apply(b, r, first + (uint64_t)r, seed, (uint64_t)epoch, fetch);
        } catch (const std::exception &e) {
          std::lock_guard<std::mutex> lock(mu);
          error = e.what();
        }
      });
    for (std::thread &th : pool)
      th.join();
    if (!error.empty())
      fail(error);
    for (size_t k = 0; k < arrays.size(); ++k)
      std::memcpy(static_cast<uint8_t *>(out[k].data()) + first * arrays[k].dstBytes,
                  b[k].data(), (size_t)rows * arrays[k].dstBytes);
  }
  std::string err;
  if (!makeDirs(outDir, err))
    fail(err);
  for (size_t k = 0; k < arrays.size(); ++k) {
    std::string path = outDir + "/" + arrays[k].spec.name + ".npy";
    if (!rt::writeNpy(path, out[k], err))
      fail(err);
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  try {
    return run(argc, argv);
  } catch (const UserError &e) {
    std::fprintf(stderr, "kiln-augment-dump: %s\n", e.what());
  } catch (const std::exception &e) {
    std::fprintf(stderr, "kiln-augment-dump: %s\n", e.what());
  }
  return 1;
}
