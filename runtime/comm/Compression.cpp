//===- Compression.cpp - compressed gradient all-reduce ---------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "kiln/comm/Compression.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace kiln::comm {

const char *compressionName(Compression c) {
  switch (c) {
  case Compression::None: return "none";
  case Compression::BF16: return "bf16";
  case Compression::FP16: return "fp16";
  case Compression::Int8: return "int8";
  }
  return "?";
}

bool parseCompression(std::string_view name, Compression &out) {
  for (Compression c : {Compression::None, Compression::BF16, Compression::FP16,
                        Compression::Int8})
    if (name == compressionName(c)) {
      out = c;
      return true;
    }
  return false;
}

CompressedAllReducer::Residual &
CompressedAllReducer::residual(int bucket, size_t local, size_t owned) {
  Residual &r = residuals_[bucket];
  if (r.local.empty() && r.owned.empty()) {
    r.local.assign(local, 0.0f);
    r.owned.assign(owned, 0.0f);
  }
  if (r.local.size() != local || r.owned.size() != owned)
    throw CommError("compressed all_reduce on '" + comm_.name() + "': bucket " +
                    std::to_string(bucket) + " changed its size");
  return r;
}

namespace {

/// One wire format: bytes per value and the encoding of a chunk.
struct Codec {
  Compression kind;
  rt::DType wireType() const {
    return kind == Compression::Int8 ? rt::DType::I8 : rt::DType::U16;
  }
  size_t width() const { return kind == Compression::Int8 ? 1 : 2; }
  bool scaled() const { return kind == Compression::Int8; }

  /// Encodes x[0..n) into `wire`; x - decoded goes to `err`. Returns the
  /// scale (int8: max|x| / 127, 0 for an all-zero chunk; 1 otherwise).
  float encode(const float *x, size_t n, void *wire, float *err) const {
    if (kind == Compression::Int8) {
      auto *q = static_cast<int8_t *>(wire);
      float m = 0;
      for (size_t i = 0; i < n; ++i)
        m = std::max(m, std::fabs(x[i]));
      float scale = m / 127.0f;
      for (size_t i = 0; i < n; ++i) {
        float v = scale > 0 ? std::nearbyint(x[i] / scale) : 0.0f;
        v = std::min(127.0f, std::max(-127.0f, v));
        q[i] = (int8_t)v;
        err[i] = x[i] - v * scale;
      }
      return scale;
    }
    auto *h = static_cast<uint16_t *>(wire);
    for (size_t i = 0; i < n; ++i) {
      h[i] = kind == Compression::BF16 ? rt::floatToBf16(x[i]) : rt::floatToHalf(x[i]);
      err[i] = x[i] - value(wire, i, 1.0f);
    }
    return 1.0f;
  }

  float value(const void *wire, size_t i, float scale) const {
    if (kind == Compression::Int8)
      return (float)static_cast<const int8_t *>(wire)[i] * scale;
    uint16_t h = static_cast<const uint16_t *>(wire)[i];
    return kind == Compression::BF16 ? rt::bf16ToFloat(h) : rt::halfToFloat(h);
  }
};

} // namespace

void CompressedAllReducer::allReduceSum(int bucket, float *buf, size_t count) {
  const size_t N = (size_t)comm_.size();
  if (kind_ == Compression::None) {
    comm_.allReduce(buf, buf, count, rt::DType::F32, ReduceOp::Sum).wait();
    return;
  }
  const Codec codec{kind_};
  const size_t w = codec.width();

  // Phase 1: this rank's values plus its residual, encoded per destination
  // chunk, all-to-all (with the scales when the format has them).
  const size_t chunk = (count + N - 1) / N, padded = chunk * N;
  Residual &res = residual(bucket, padded, chunk);
  std::vector<float> x(padded, 0.0f);
  std::memcpy(x.data(), buf, count * sizeof(float));
  for (size_t i = 0; i < padded; ++i)
    x[i] += res.local[i];
  std::vector<uint8_t> wire(padded * w), got(padded * w);
  std::vector<float> scales(N), gotScales(N);
  for (size_t j = 0; j < N; ++j)
    scales[j] = codec.encode(x.data() + j * chunk, chunk, wire.data() + j * chunk * w,
                             res.local.data() + j * chunk);
  Handle a = comm_.allToAll(wire.data(), got.data(), chunk, codec.wireType());
  Handle b;
  if (codec.scaled())
    b = comm_.allToAll(scales.data(), gotScales.data(), 1, rt::DType::F32);
  a.wait();
  b.wait();

  // Phase 2: the owned chunk's sum in float plus the owner's residual,
  // encoded once more and all-gathered.
  std::vector<float> sum(res.owned);
  for (size_t i = 0; i < N; ++i)
    for (size_t k = 0; k < chunk; ++k)
      sum[k] += codec.value(got.data() + i * chunk * w, k,
                            codec.scaled() ? gotScales[i] : 1.0f);
  std::vector<uint8_t> mine(chunk * w);
  float myScale = codec.encode(sum.data(), chunk, mine.data(), res.owned.data());
  Handle c = comm_.allGather(mine.data(), wire.data(), chunk, codec.wireType());
  Handle d;
  if (codec.scaled())
    d = comm_.allGather(&myScale, scales.data(), 1, rt::DType::F32);
  c.wait();
  d.wait();
  for (size_t i = 0; i < count; ++i)
    buf[i] = codec.value(wire.data(), i, codec.scaled() ? scales[i / chunk] : 1.0f);
}

} // namespace kiln::comm
