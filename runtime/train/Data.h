//===- Data.h - the data loader ---------------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// `--data NAME=FILE.npy` maps each file (never read whole); the first axis
// indexes samples. Step s takes samples [p·B, (p+1)·B) of its epoch's order,
// p = s mod (N / B), epoch = s / (N / B) (an incomplete last batch is
// dropped). The order of epoch e is file order with --no-shuffle, else this
// Fisher–Yates shuffle (no C++ library randomness, so it is the same
// everywhere):
//
//   state = seed ^ (e * 0x9E3779B97F4A7C15)            (mod 2^64)
//   next(): state += 0x9E3779B97F4A7C15; z = state;    (SplitMix64)
//           z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9;
//           z = (z ^ (z >> 27)) * 0x94D049BB133111EB; return z ^ (z >> 31)
//   order = [0, 1, ..., N-1]
//   for i = N-1 down to 1: j = next() mod (i + 1); swap(order[i], order[j])
//
// Ranks (ready for data parallelism; every run is one rank today): with W
// ranks each step takes a global batch of W·B samples, [p·W·B, (p+1)·W·B)
// of the epoch's order with p = s mod (N / (W·B)), and rank r trains on its
// slice [p·W·B + r·B, p·W·B + (r+1)·B). Every rank computes the same order,
// so the shards of a step are disjoint and together they are the global
// batch a 1-rank run with batch W·B would take.
//
// A background thread gathers batch s+1 while step s runs (Prefetcher).
//===----------------------------------------------------------------------===//
#ifndef KILN_TRAIN_DATA_H
#define KILN_TRAIN_DATA_H

#include "Config.h"
#include "Util.h"

#include "kiln/runtime/Tensor.h"

#include <condition_variable>
#include <mutex>
#include <thread>

namespace kiln::train {

/// A mapped `.npy` file: C order, little-endian, format 1.0, 2.0 or 3.0.
struct NpyFile {
  std::string path;
  rt::DType dtype = rt::DType::F32;
  std::vector<int64_t> shape;
  const uint8_t *data = nullptr; // the first element
  uint64_t dataBytes = 0;
  MappedFile file;
};

/// Opens and checks a `.npy` file; throws UserError "PATH: why".
void openNpy(const std::string &path, NpyFile &out);

/// One `--data NAME=FILE` binding checked against its spec.
struct Source {
  std::string name;
  NpyFile npy;
  DataSpec spec;             // what the plan reads
  uint64_t sampleElems = 0;  // elements per sample
  uint64_t srcSampleBytes = 0, dstSampleBytes = 0;
  bool widen = false;        // integer file data converted to spec.dtype
};

/// The arrays bound to a plan's data inputs.
class Dataset {
public:
  /// Binds `bindings` (NAME, FILE in command-line order) to `specs`. `flag`
  /// ("--data", "--eval-data") starts every message. Throws UserError for a
  /// missing or unknown name, a name given twice, a file whose per-sample
  /// shape or dtype disagrees with the spec (integer data may be widened to
  /// an integer spec dtype that holds every value), arrays of different
  /// lengths, or fewer samples than `batch` (than 1 with `partialBatch`,
  /// for evaluation, which covers every sample).
  void open(const std::vector<std::pair<std::string, std::string>> &bindings,
            const std::vector<DataSpec> &specs, int64_t batch,
            const std::string &flag, bool partialBatch = false);

  /// Scans input `name` once: every value must lie in [0, numClasses) or
  /// equal `ignoreIndex`. Throws UserError "FLAG NAME: value V at sample S is
  /// outside [0, C)". Does nothing when there is no input `name`.
  void checkLabels(const std::string &name, int64_t numClasses,
                   std::optional<int64_t> ignoreIndex) const;

  uint64_t numSamples() const { return numSamples_; }
  int64_t batch() const { return batch_; }
  /// Makes this process rank `rank` of `world` (see the file comment).
  /// Throws UserError when the samples do not fill one global batch.
  void setShard(int64_t rank, int64_t world);
  int64_t rank() const { return rank_; }
  int64_t worldSize() const { return world_; }
  /// Steps per epoch: floor(N / (W·B)).
  int64_t stepsPerEpoch() const {
    return (int64_t)(numSamples_ / ((uint64_t)batch_ * (uint64_t)world_));
  }
  /// Where this rank's batch of in-epoch step `pos` starts in the order.
  uint64_t batchStart(int64_t pos) const {
    return ((uint64_t)pos * (uint64_t)world_ + (uint64_t)rank_) * (uint64_t)batch_;
  }
  const std::vector<Source> &sources() const { return sources_; }

  /// Fresh tensors [B] + sample shape for every source (in `sources()` order).
  std::vector<rt::HostTensor> makeBatch() const;
  /// Copies samples order[begin .. begin+B) into `out` (from makeBatch).
  void gather(const std::vector<uint64_t> &order, uint64_t begin,
              std::vector<rt::HostTensor> &out) const;

private:
  std::string flag_;
  std::vector<Source> sources_;
  uint64_t numSamples_ = 0;
  int64_t batch_ = 1;
  int64_t rank_ = 0, world_ = 1;
};

/// The sample order of epoch `epoch` (see the file comment).
std::vector<uint64_t> epochOrder(uint64_t n, uint64_t seed, uint64_t epoch,
                                 bool shuffle);

/// Gathers the batches of steps [first, end) in order on a background
/// thread, one step ahead of the caller. get(s) must be called for s =
/// first, first+1, ...; its tensors stay valid until the next call.
class Prefetcher {
public:
  Prefetcher(const Dataset &data, uint64_t seed, bool shuffle, int64_t first,
             int64_t end);
  ~Prefetcher();
  Prefetcher(const Prefetcher &) = delete;
  Prefetcher &operator=(const Prefetcher &) = delete;

  const std::vector<rt::HostTensor> &get(int64_t step);

private:
  void worker();
  void fill(int64_t step, std::vector<rt::HostTensor> &slot);

  const Dataset &data_;
  uint64_t seed_;
  bool shuffle_;
  int64_t end_;
  std::vector<rt::HostTensor> slots_[2];
  // Worker-only: the order of the epoch it gathers from.
  int64_t orderEpoch_ = -1;
  std::vector<uint64_t> order_;

  std::mutex mu_;
  std::condition_variable cv_;
  int64_t requested_ = -1; // the step the worker is to gather (or has)
  int64_t ready_ = -1;     // the last step gathered
  bool stop_ = false;
  std::string error_;
  std::thread thread_;
};

} // namespace kiln::train

#endif // KILN_TRAIN_DATA_H
