//===- Compression.h - compressed gradient all-reduce -----------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// --grad-compression: the wire format of a gradient bucket's sum-all-reduce.
// Every format is sent in the same two phases:
//   1. Each rank encodes its bucket per destination chunk, and the chunks go
//      all-to-all.
//   2. The owner of chunk r sums the decoded chunks in float, encodes the
//      sum once more and all-gathers it.
// That is 2(N-1)/N n values on the wire per rank, as a ring all-reduce sends:
//   bf16, fp16: 16-bit values, half the bytes of f32.
//   int8: scale = max|x| / 127 per chunk, q = round(x / scale); the scales
//     travel with the chunks. About a quarter of the bytes (2N scales more).
// Error feedback: both encodings' errors are kept per bucket and added to
// that bucket's next values. The rank's own encoding error is kept in
// phase 1, and the chunk owner's in phase 2. So the error does not
// accumulate over steps: the sum of the outputs over K steps stays within
// one step's rounding of K times the exact sum. By design this is not
// bit-identical to an uncompressed run.
//===----------------------------------------------------------------------===//
#ifndef KILN_COMM_COMPRESSION_H
#define KILN_COMM_COMPRESSION_H

#include "kiln/comm/Communicator.h"

#include <map>
#include <string_view>
#include <vector>

namespace kiln::comm {

enum class Compression { None, BF16, FP16, Int8 };
const char *compressionName(Compression c);
/// "none", "bf16", "fp16", "int8"; false for anything else.
bool parseCompression(std::string_view name, Compression &out);

class CompressedAllReducer {
public:
  /// `comm` must outlive this.
  CompressedAllReducer(Communicator &comm, Compression kind)
      : comm_(comm), kind_(kind) {}

  /// buf[0..count) (f32) becomes the sum over ranks, sent in the wire format.
  /// `bucket` names this bucket's error-feedback residual: the same bucket
  /// must come with the same count every time. Collective over the
  /// communicator; blocks until done; throws CommError.
  void allReduceSum(int bucket, float *buf, size_t count);

  Compression kind() const { return kind_; }
  /// Drops every residual (a restart from a checkpoint).
  void reset() { residuals_.clear(); }

  struct Residual {
    std::vector<float> local, owned; // phase 1 (padded), phase 2 (a chunk)
  };
  /// The error-feedback residuals, by bucket: this rank's state, which a
  /// checkpoint keeps so that a resumed run continues exactly.
  const std::map<int, Residual> &residuals() const { return residuals_; }
  /// Sets bucket `bucket`'s residuals (a resume); its next all-reduce must
  /// have the sizes they imply.
  void restore(int bucket, Residual r) { residuals_[bucket] = std::move(r); }

private:
  Residual &residual(int bucket, size_t local, size_t owned);

  Communicator &comm_;
  Compression kind_;
  std::map<int, Residual> residuals_;
};

} // namespace kiln::comm

#endif // KILN_COMM_COMPRESSION_H
