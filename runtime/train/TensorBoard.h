//===- TensorBoard.h - TensorBoard event files ------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// --tensorboard DIR: scalars and histograms as a TensorBoard event file,
// written by hand (no TensorFlow, no generated protobuf code):
//
// - The file is DIR/events.out.tfevents.<unix seconds>.<host>.<pid>, with
//   ".<k>" appended (k = 1, 2, ...) when that name is taken: it is created
//   with O_EXCL, so two writers (two ranks, two writers of one process) never
//   share a file. TensorBoard reads every file whose name holds "tfevents".
// - Records are TFRecords: u64 length (little endian), u32 masked CRC-32C of
//   those 8 bytes, the data, u32 masked CRC-32C of the data; a masked CRC is
//   ((crc >> 15) | (crc << 17)) + 0xa282ead8.
// - Each record is a tensorboard.Event (tensorboard/compat/proto/event.proto
//   and summary.proto, proto3 wire format): the first holds file_version
//   "brain.Event:2", the second a SessionLog START at the run's first step;
//   then one Event per scalar (Summary.Value.simple_value, a float) or
//   histogram (Summary.Value.histo, a HistogramProto).
//
// Histograms use 30 equal-width buckets between the finite values' min and
// max: the bucketing of TensorBoard's own tf.summary.histogram (its
// DEFAULT_BUCKET_COUNT), and its histogram dashboard re-bins any buckets
// into 30 equal ones by overlap anyway (vz_histogram_timeseries'
// intermediateToD3). The legacy HistogramProto stores each bucket's right
// edge (bucket_limit); TensorBoard takes `min` as the first bucket's left
// edge. Bucket i holds limit[i-1] <= v < limit[i] (the last one also
// v == max), decided against the limits written, so rounding never puts a
// value outside its bucket. NaN and +-Inf are counted apart
// (Histogram::nan, posInf, negInf) and left out of the buckets and of min,
// max, num, sum and sum_squares; when a tensor has any, the same event
// carries the scalar "<tag>/nonfinite" (their count), so the scalars
// dashboard shows when it happened. A tensor with no finite value gets
// num 0 and one empty bucket.
//
// Records are buffered and written by flush() (write(2), no fsync): a run
// that is killed loses nothing logged before its last flush.
//===----------------------------------------------------------------------===//
#ifndef KILN_TRAIN_TENSORBOARD_H
#define KILN_TRAIN_TENSORBOARD_H

#include "kiln/runtime/Tensor.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::train {

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of `n` bytes,
/// continuing from `crc` (0 to start).
uint32_t crc32c(const void *data, size_t n, uint32_t crc = 0);
/// TFRecord's masked CRC-32C of `n` bytes.
uint32_t maskedCrc32c(const void *data, size_t n);
/// `data` framed as one TFRecord (16 + data.size() bytes).
std::string tfRecord(std::string_view data);

/// A histogram of a tensor's values, as written to the event file.
struct Histogram {
  /// Over the finite values only (all 0 when there are none).
  double min = 0, max = 0, num = 0, sum = 0, sumSquares = 0;
  /// Right edges and counts of the buckets (one empty bucket when num is 0).
  std::vector<double> limits, counts;
  /// The values left out.
  int64_t nan = 0, posInf = 0, negInf = 0;

  int64_t nonFinite() const { return nan + posInf + negInf; }
};

/// TensorBoard's default bucket count (tf.summary.histogram's).
constexpr int kHistogramBuckets = 30;

/// The histogram of `n` elements of type `dtype` at `data` (any dtype;
/// integers and bools are read as their values). One pass for the
/// statistics, one for the buckets.
Histogram computeHistogram(rt::DType dtype, const void *data, int64_t n,
                           int buckets = kHistogramBuckets);

/// One event file. Not thread-safe; not copyable.
class TensorBoardWriter {
public:
  /// Creates DIR (and its parents) and a new event file in it, and writes
  /// its first records: the file version and a SessionLog START at
  /// `startStep`. TensorBoard reads a run's files in name order (the
  /// timestamp first) and, on a START after the first one, drops what the
  /// earlier files logged at steps >= its step: a run resumed at step S
  /// passes S, so its repeated steps replace the old ones. Throws UserError
  /// "--tensorboard DIR: why" when it cannot (not a directory, not writable,
  /// ...), leaving no event file behind.
  explicit TensorBoardWriter(const std::string &dir, int64_t startStep = 0);
  /// Flushes what is buffered; an error is ignored here (call flush() first
  /// to see it).
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter &) = delete;
  TensorBoardWriter &operator=(const TensorBoardWriter &) = delete;

  /// Buffers a scalar (stored as a float, as TensorBoard's simple_value).
  /// Like histogram(), it flushes by itself once 4 MiB are buffered, so it
  /// may throw as flush() does.
  void scalar(const std::string &tag, int64_t step, double value,
              double wallTime);
  /// Buffers a histogram of `n` values of type `dtype` at `data` (see
  /// computeHistogram) and, when some are not finite, the scalar
  /// "<tag>/nonfinite". Returns what it wrote.
  Histogram histogram(const std::string &tag, int64_t step, rt::DType dtype,
                      const void *data, int64_t n, double wallTime);
  /// The same for a host tensor of any dtype (a parameter or a gradient).
  Histogram histogram(const std::string &tag, int64_t step,
                      const rt::HostTensor &t, double wallTime);
  /// Writes the buffered records to the file (call it after every logged
  /// step). Throws UserError "--tensorboard FILE: write error: why".
  void flush();

  /// The event file's path.
  const std::string &path() const { return path_; }
  /// Seconds since the Unix epoch, the clock of an event's wall_time.
  static double now();

private:
  void append(const std::string &event);

  std::string path_;
  int fd_ = -1;
  std::string buffer_;
};

} // namespace kiln::train

#endif // KILN_TRAIN_TENSORBOARD_H
