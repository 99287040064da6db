//===- Data.h - the data loader ---------------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// `--data NAME=FILE.npy` maps each file (never read whole); the first axis
// indexes samples. NAME=GLOB (any of * ? [ in it, and no file of that exact
// name) binds every file glob(3) matches, sorted by name in byte order
// (x-2.npy after x-10.npy: pad the numbers); NAME=DIR binds the files
// DIR/manifest.json lists for NAME:
//
//   {"inputs": {"x": ["x-000.npy", "x-001.npy"], "labels": ["y.npy"]}}
//
// (paths relative to DIR). The shards of one input are one array of N = the
// sum of their lengths, in shard order: a file and the same data split into
// shards are the same array, sample for sample. Every shard of an input has
// the same dtype and per-sample shape.
//
// Step s takes samples [p·B, (p+1)·B) of its epoch's order,
// p = s mod (N / B), epoch = s / (N / B) (an incomplete last batch is
// dropped). The order of epoch e is array order with --no-shuffle, else
// this Fisher–Yates shuffle (no C++ library randomness, so it is the same
// everywhere):
//
//   state = seed ^ (e * 0x9E3779B97F4A7C15)            (mod 2^64)
//   next(): state += 0x9E3779B97F4A7C15; z = state;    (SplitMix64)
//           z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9;
//           z = (z ^ (z >> 27)) * 0x94D049BB133111EB; return z ^ (z >> 31)
//   order = [0, 1, ..., N-1]
//   for i = N-1 down to 1: j = next() mod (i + 1); swap(order[i], order[j])
//
// With --drop-nonfinite the samples holding a NaN or an infinity in any
// floating input are left out first: N is the number kept, and position i
// of the order above stands for the i-th kept sample (in array order).
// Dropping depends on the data alone, so a resumed run drops the same ones.
//
// Ranks: with W ranks each step takes a global batch of W·B samples,
// [p·W·B, (p+1)·W·B) of the epoch's order with p = s mod (N / (W·B)), and
// rank r trains on its slice [p·W·B + r·B, p·W·B + (r+1)·B). Every rank
// computes the same order, so the shards of a step are disjoint and together
// they are the global batch a 1-rank run with batch W·B would take.
//
// Conversions on the way into a batch: integer data is widened to a wider
// integer spec dtype; integer class indices (per-sample shape []) bound to a
// floating spec of sample shape [C] become one-hot rows (every index checked
// against [0, C) when the data is opened).
//
// The Prefetcher gathers batches ahead of the step on --loader-threads
// threads (each thread a whole batch, into a bounded ring of batches); the
// batches are the same whatever the number of threads.
//===----------------------------------------------------------------------===//
#ifndef KILN_TRAIN_DATA_H
#define KILN_TRAIN_DATA_H

#include "Config.h"
#include "Util.h"

#include "kiln/runtime/Tensor.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
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

/// The files a `FLAG NAME=VALUE` binding names, in array order: VALUE
/// itself when such a file exists or it has no glob character, the sorted
/// matches of a glob, or the shards DIR/manifest.json lists for NAME (see
/// the file comment). Throws UserError "--data x=GLOB: no file matches",
/// "--data x: DIR/manifest.json: why".
std::vector<std::string> dataFiles(const std::string &flag,
                                   const std::string &name,
                                   const std::string &value);

/// How samples of a source reach the batch.
enum class Conversion {
  Copy,   // the file's bytes as they are
  Widen,  // integer data to a wider integer spec dtype
  OneHot, // integer class indices to float one-hot rows of spec [C]
};

/// One `--data NAME=...` binding checked against its spec: its shards, one
/// array in shard order.
struct Source {
  std::string name;
  std::string what;            // for messages: the file, or "GLOB (16 files)"
  std::vector<NpyFile> shards;
  std::vector<uint64_t> starts; // starts[i]: shard i's first sample; back(): N
  DataSpec spec;                // what the plan reads
  rt::DType fileDtype = rt::DType::F32;
  uint64_t sampleElems = 0;     // elements per sample in the file
  uint64_t srcSampleBytes = 0, dstSampleBytes = 0;
  Conversion conversion = Conversion::Copy;

  uint64_t numSamples() const { return starts.empty() ? 0 : starts.back(); }
  /// The shard holding sample `i` (< numSamples()).
  size_t shardOf(uint64_t i) const;
  /// The file bytes of sample `i` (< numSamples()).
  const uint8_t *sample(uint64_t i) const;
};

/// What Dataset::open does besides binding.
struct DataOptions {
  /// Leave out the samples with a NaN or an infinity in a floating input.
  bool dropNonFinite = false;
  /// Threads for the --drop-nonfinite scan (over shards and chunks).
  int threads = 1;
};

/// Augmentation's hook: called on a loader thread after sample `b` of
/// `batch` is gathered; `sampleId` is its index in the (whole) array,
/// `epoch` the epoch of the step. Must depend on its arguments alone for
/// runs to be reproducible.
using SampleHook = std::function<void(std::vector<rt::HostTensor> &batch,
                                      int64_t b, uint64_t sampleId,
                                      uint64_t epoch)>;

/// The arrays bound to a plan's data inputs.
class Dataset {
public:
  /// Binds `bindings` (NAME, FILE|GLOB|DIR in command-line order) to
  /// `specs`. `flag` ("--data", "--eval-data") starts every message. Throws
  /// UserError for a missing or unknown name, a name given twice, a glob
  /// matching nothing, a bad manifest, shards of one input that disagree on
  /// dtype or per-sample shape, a file whose per-sample shape or dtype
  /// disagrees with the spec (integer data may be widened to an integer
  /// spec dtype that holds every value, or be class indices of a one-hot
  /// spec), a class index outside [0, C), arrays of different lengths, or
  /// fewer samples (kept samples, with `dropNonFinite`) than `batch` (than
  /// 1 with `partialBatch`, for evaluation, which covers every sample).
  void open(const std::vector<std::pair<std::string, std::string>> &bindings,
            const std::vector<DataSpec> &specs, int64_t batch,
            const std::string &flag, bool partialBatch = false,
            const DataOptions &options = {});

  /// Scans input `name` once: every value must lie in [0, numClasses) or
  /// equal `ignoreIndex`. Throws UserError "FLAG NAME: value V at sample S is
  /// outside [0, C)" (S the index in the array; with several shards, the
  /// file and the index in it). Does nothing when there is no input `name`.
  void checkLabels(const std::string &name, int64_t numClasses,
                   std::optional<int64_t> ignoreIndex) const;

  /// Samples the order covers (those kept, with --drop-nonfinite).
  uint64_t numSamples() const { return numSamples_; }
  /// Samples in the arrays.
  uint64_t arraySamples() const { return arraySamples_; }
  /// --drop-nonfinite: the samples left out, and the first ("FILE sample I").
  uint64_t dropped() const { return arraySamples_ - numSamples_; }
  const std::string &firstDropped() const { return firstDropped_; }
  /// The array index of position `i` (< numSamples()) of the order.
  uint64_t sampleId(uint64_t i) const { return kept_.empty() ? i : kept_[i]; }

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
  /// Copies the samples at positions order[begin .. begin+B) into `out`
  /// (from makeBatch), calling `hook` (if any) after each.
  void gather(const std::vector<uint64_t> &order, uint64_t begin,
              std::vector<rt::HostTensor> &out, const SampleHook *hook = nullptr,
              uint64_t epoch = 0) const;
  /// Copies sample `id` (an index into the arrays) of source `k` into `out`
  /// (one sample of the batch's dtype: widened, one-hot as gather does).
  void copySample(size_t k, uint64_t id, void *out) const;

private:
  void dropNonFinite(int threads);

  std::string flag_;
  std::vector<Source> sources_;
  uint64_t numSamples_ = 0, arraySamples_ = 0;
  std::vector<uint64_t> kept_; // empty: every sample
  std::string firstDropped_;
  int64_t batch_ = 1;
  int64_t rank_ = 0, world_ = 1;
};

/// The sample order of epoch `epoch` (see the file comment).
std::vector<uint64_t> epochOrder(uint64_t n, uint64_t seed, uint64_t epoch,
                                 bool shuffle);

/// How a Prefetcher loads.
struct LoaderOptions {
  int threads = 1;   // loader threads (--loader-threads)
  /// Batches in the ring (the one the caller holds included); 0: as many
  /// as 16 MiB holds, at least max(2, threads) + 1 and at most 64.
  int depth = 0;
  SampleHook hook;   // may be empty
};

/// What a Prefetcher did so far.
struct LoaderStats {
  uint64_t samples = 0;      // samples gathered (every source counts once)
  double busySeconds = 0;    // the loader threads' time gathering, summed
  double waitSeconds = 0;    // the caller's time blocked in get()
  double elapsedSeconds = 0; // since the Prefetcher started
  int threads = 1;
  /// What the loader threads sustain while busy: samples / (busy / threads).
  double samplesPerSecond() const {
    return busySeconds > 0 ? (double)samples * threads / busySeconds : 0;
  }
  /// The share of the elapsed time get() waited.
  double waitFraction() const {
    return elapsedSeconds > 0 ? waitSeconds / elapsedSeconds : 0;
  }
};

/// Gathers the batches of steps [first, end) on `threads` background
/// threads, each thread a whole batch, up to depth - 1 steps ahead of the
/// caller. The threads are woken when at most half of that is left, so
/// that for short steps they fill several batches per wake-up. get(s) must
/// be called for s = first, first+1, ...; its tensors stay valid until the
/// next call. The batches do not depend on the number of threads or the
/// depth.
class Prefetcher {
public:
  Prefetcher(const Dataset &data, uint64_t seed, bool shuffle, int64_t first,
             int64_t end, LoaderOptions options = {});
  ~Prefetcher();
  Prefetcher(const Prefetcher &) = delete;
  Prefetcher &operator=(const Prefetcher &) = delete;

  /// Throws UserError "data loader: why" when gathering step `step` failed.
  const std::vector<rt::HostTensor> &get(int64_t step);
  LoaderStats stats() const;

private:
  using Order = std::shared_ptr<const std::vector<uint64_t>>;
  void worker();
  void stopThreads();
  void fill(int64_t step, std::vector<rt::HostTensor> &slot);
  Order order(int64_t epoch);

  const Dataset &data_;
  uint64_t seed_;
  bool shuffle_;
  int64_t end_;
  LoaderOptions options_;
  int64_t depth_;
  std::vector<std::vector<rt::HostTensor>> slots_; // step s in slot s % depth
  std::vector<int64_t> slotStep_;                  // the step a slot holds

  mutable std::mutex mu_;
  std::condition_variable workCv_, readyCv_;
  int64_t next_;          // the next step a worker takes
  int64_t low_;           // the oldest step whose slot is not free: the
                          // step the caller holds (`first` before any)
  int64_t expected_;      // the step get() is to be called for next
  bool stop_ = false;
  int64_t errorStep_;     // the first step that failed (end_: none)
  std::string error_;
  std::vector<std::thread> threads_;

  // Epoch orders shared by the workers: the newest few.
  std::mutex orderMu_;
  std::condition_variable orderCv_;
  std::map<int64_t, Order> orders_;
  std::set<int64_t> computing_;

  std::atomic<uint64_t> samples_{0}, busyNs_{0};
  uint64_t waitNs_ = 0; // the caller's
  std::chrono::steady_clock::time_point start_;
};

} // namespace kiln::train

#endif // KILN_TRAIN_DATA_H
