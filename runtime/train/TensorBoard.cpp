//===- TensorBoard.cpp - TensorBoard event files ----------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "TensorBoard.h"

#include "Util.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <limits>
#include <unistd.h>

namespace kiln::train {

//===----------------------------------------------------------------------===//
// CRC-32C and TFRecord framing
//===----------------------------------------------------------------------===//

namespace {

/// Slicing-by-8 tables: table[0] is the byte-at-a-time table of the
/// reflected polynomial, table[k][b] the CRC of byte b followed by k zero
/// bytes, so eight bytes fold into the CRC with eight lookups. Records are
/// small (a histogram is about 600 bytes), so this portable form is fast
/// enough and needs no CPU check (SSE4.2's crc32 instruction would).
struct Crc32cTables {
  uint32_t t[8][256];
};

constexpr Crc32cTables makeCrc32cTables() {
  Crc32cTables tables{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int i = 0; i < 8; ++i)
      c = (c >> 1) ^ ((c & 1) ? 0x82F63B78u : 0);
    tables.t[0][b] = c;
  }
  for (int k = 1; k < 8; ++k)
    for (uint32_t b = 0; b < 256; ++b) {
      uint32_t prev = tables.t[k - 1][b];
      tables.t[k][b] = (prev >> 8) ^ tables.t[0][prev & 0xff];
    }
  return tables;
}

constexpr Crc32cTables kCrc32c = makeCrc32cTables();

uint32_t load32le(const uint8_t *p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 |
         uint32_t(p[3]) << 24;
}

void put32le(std::string &out, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out.push_back(char(v >> (8 * i)));
}

void put64le(std::string &out, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out.push_back(char(v >> (8 * i)));
}

} // namespace

uint32_t crc32c(const void *data, size_t n, uint32_t crc) {
  const auto &t = kCrc32c.t;
  const uint8_t *p = static_cast<const uint8_t *>(data);
  crc = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    uint32_t lo = load32le(p) ^ crc, hi = load32le(p + 4);
    crc = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^
          t[4][lo >> 24] ^ t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^
          t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
  }
  for (; n; --n, ++p)
    crc = t[0][(crc ^ *p) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint32_t maskedCrc32c(const void *data, size_t n) {
  uint32_t crc = crc32c(data, n);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string tfRecord(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 16);
  put64le(out, data.size());
  put32le(out, maskedCrc32c(out.data(), 8));
  out.append(data);
  put32le(out, maskedCrc32c(data.data(), data.size()));
  return out;
}

//===----------------------------------------------------------------------===//
// Protobuf wire format (proto3) of the few messages we write
//===----------------------------------------------------------------------===//

namespace {

// Field numbers of tensorboard/compat/proto/{event,summary,histogram}.proto.
enum EventField {
  EvWallTime = 1,
  EvStep = 2,
  EvFileVersion = 3,
  EvSummary = 5,
  EvSessionLog = 7
};
enum SummaryField { SumValue = 1 };
enum ValueField { ValTag = 1, ValSimpleValue = 2, ValHisto = 5 };
enum HistoField {
  HiMin = 1,
  HiMax = 2,
  HiNum = 3,
  HiSum = 4,
  HiSumSquares = 5,
  HiBucketLimit = 6,
  HiBucket = 7
};
enum SessionLogField { SlStatus = 1 };
constexpr uint64_t kSessionLogStart = 1; // SessionLog.SessionStatus.START

enum WireType { Varint = 0, Fixed64 = 1, LengthDelimited = 2, Fixed32 = 5 };

/// Appends fields to a message. Every field is written, default or not
/// (proto3 parsers accept both), except where noted at the caller.
class Proto {
public:
  void varint(uint64_t v) {
    for (; v >= 0x80; v >>= 7)
      out_.push_back(char(v | 0x80));
    out_.push_back(char(v));
  }
  void key(int field, WireType wire) { varint(uint64_t(field) << 3 | wire); }
  void int64Field(int field, int64_t v) {
    key(field, Varint);
    varint(uint64_t(v)); // negative: ten bytes, two's complement
  }
  void doubleField(int field, double v) {
    key(field, Fixed64);
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    put64le(out_, bits);
  }
  void floatField(int field, float v) {
    key(field, Fixed32);
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    put32le(out_, bits);
  }
  void bytesField(int field, std::string_view s) {
    key(field, LengthDelimited);
    varint(s.size());
    out_.append(s);
  }
  void packedDoubles(int field, const std::vector<double> &vs) {
    key(field, LengthDelimited);
    varint(vs.size() * 8);
    for (double v : vs) {
      uint64_t bits;
      std::memcpy(&bits, &v, 8);
      put64le(out_, bits);
    }
  }
  const std::string &str() const { return out_; }

private:
  std::string out_;
};

/// An Event's wall_time and step (step omitted when 0, as proto3 does).
Proto eventHead(double wallTime, int64_t step) {
  Proto e;
  e.doubleField(EvWallTime, wallTime);
  if (step != 0)
    e.int64Field(EvStep, step);
  return e;
}

std::string scalarValue(const std::string &tag, float value) {
  Proto v;
  v.bytesField(ValTag, tag);
  v.floatField(ValSimpleValue, value); // in a oneof: written even when 0
  return v.str();
}

std::string histogramValue(const std::string &tag, const Histogram &h) {
  Proto histo;
  histo.doubleField(HiMin, h.min);
  histo.doubleField(HiMax, h.max);
  histo.doubleField(HiNum, h.num);
  histo.doubleField(HiSum, h.sum);
  histo.doubleField(HiSumSquares, h.sumSquares);
  histo.packedDoubles(HiBucketLimit, h.limits);
  histo.packedDoubles(HiBucket, h.counts);
  Proto v;
  v.bytesField(ValTag, tag);
  v.bytesField(ValHisto, histo.str());
  return v.str();
}

//===----------------------------------------------------------------------===//
// Histograms
//===----------------------------------------------------------------------===//

/// float16 -> float for all 65536 bit patterns (256 KiB, built on first
/// use): a lookup is cheaper than halfToFloat's branches.
const float *halfTable() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t h = 0; h < 65536; ++h)
      t[h] = rt::halfToFloat(uint16_t(h));
    return t;
  }();
  return table.data();
}

/// The two passes over the elements, `load(i)` reading element i as a
/// double.
template <typename Load>
Histogram histogramOf(const Load &load, int64_t n, int k) {
  Histogram h;
  // Four lanes of accumulators, element i in lane i % 4: the additions of
  // one lane do not wait on another's (3x faster than one chain), and the
  // order stays fixed, so the sums are deterministic.
  constexpr int kLanes = 4;
  double lo[kLanes], hi[kLanes], sum[kLanes] = {}, sq[kLanes] = {};
  std::fill(lo, lo + kLanes, std::numeric_limits<double>::infinity());
  std::fill(hi, hi + kLanes, -std::numeric_limits<double>::infinity());
  auto nonFinite = [&h](double v) {
    if (std::isnan(v))
      ++h.nan;
    else if (v > 0)
      ++h.posInf;
    else
      ++h.negInf;
  };
  auto add = [&](int j, double v) {
    if (std::isfinite(v)) {
      lo[j] = std::min(lo[j], v);
      hi[j] = std::max(hi[j], v);
      sum[j] += v;
      sq[j] += v * v;
    } else {
      nonFinite(v);
    }
  };
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j)
      add(j, load(i + j));
  for (int j = 0; i < n; ++i, ++j)
    add(j, load(i));
  int64_t finite = n - h.nonFinite();
  if (finite == 0) {
    h.limits = {0.0};
    h.counts = {0.0};
    return h;
  }
  h.min = std::min(std::min(lo[0], lo[1]), std::min(lo[2], lo[3]));
  h.max = std::max(std::max(hi[0], hi[1]), std::max(hi[2], hi[3]));
  h.num = double(finite);
  h.sum = (sum[0] + sum[1]) + (sum[2] + sum[3]);
  h.sumSquares = (sq[0] + sq[1]) + (sq[2] + sq[3]);
  double mn = h.min, mx = h.max;
  if (mn == mx) { // one value: one bucket, as tf.summary.histogram
    h.limits = {mx};
    h.counts = {double(finite)};
    return h;
  }

  // Equal-width buckets. A range beyond DBL_MAX (min < 0 < max, both huge)
  // is measured in halves.
  bool halve = !std::isfinite(mx - mn);
  double f = halve ? 0.5 : 1.0, mnf = mn * f;
  double scale = k / (mx * f - mnf);
  std::vector<double> lim(k);
  for (int b = 0; b < k; ++b) {
    double t = double(b + 1) / k;
    lim[b] = halve ? mn * (1 - t) + mx * t : mn + (mx - mn) * t;
  }
  lim[k - 1] = mx;
  // Four sets of counters, so that runs of equal buckets do not wait on
  // each other's increments.
  std::vector<int64_t> counts(4 * size_t(k), 0);
  auto bucket = [&](double v) {
    double x = (v * f - mnf) * scale; // NaN (0 * inf) or out of range: clamped
    int b = x >= 0 && x < k ? int(x) : (x < 0 ? 0 : k - 1);
    // Agree with the limits written: limit[b-1] <= v < limit[b], the last
    // bucket closed.
    while (b < k - 1 && v >= lim[b])
      ++b;
    while (b > 0 && v < lim[b - 1])
      --b;
    return b;
  };
  i = 0;
  for (; i + 4 <= n; i += 4)
    for (int j = 0; j < 4; ++j) {
      double v = load(i + j);
      if (std::isfinite(v))
        ++counts[size_t(j) * k + bucket(v)];
    }
  for (; i < n; ++i) {
    double v = load(i);
    if (std::isfinite(v))
      ++counts[bucket(v)];
  }
  h.limits = std::move(lim);
  h.counts.assign(k, 0.0);
  for (int j = 0; j < 4; ++j)
    for (int b = 0; b < k; ++b)
      h.counts[b] += double(counts[size_t(j) * k + b]);
  return h;
}

template <typename T>
Histogram histogramOfArray(const void *data, int64_t n, int k) {
  const T *p = static_cast<const T *>(data);
  return histogramOf([p](int64_t i) { return double(p[i]); }, n, k);
}

} // namespace

Histogram computeHistogram(rt::DType dtype, const void *data, int64_t n,
                           int buckets) {
  if (buckets < 1)
    buckets = 1;
  switch (dtype) {
  case rt::DType::F32:
    return histogramOfArray<float>(data, n, buckets);
  case rt::DType::F64:
    return histogramOfArray<double>(data, n, buckets);
  case rt::DType::F16: {
    const uint16_t *p = static_cast<const uint16_t *>(data);
    const float *table = halfTable();
    return histogramOf([p, table](int64_t i) { return double(table[p[i]]); }, n,
                       buckets);
  }
  case rt::DType::BF16: {
    const uint16_t *p = static_cast<const uint16_t *>(data);
    return histogramOf([p](int64_t i) { return double(rt::bf16ToFloat(p[i])); },
                       n, buckets);
  }
  case rt::DType::I64:
    return histogramOfArray<int64_t>(data, n, buckets);
  case rt::DType::I32:
    return histogramOfArray<int32_t>(data, n, buckets);
  case rt::DType::I16:
    return histogramOfArray<int16_t>(data, n, buckets);
  case rt::DType::I8:
    return histogramOfArray<int8_t>(data, n, buckets);
  case rt::DType::U64:
    return histogramOfArray<uint64_t>(data, n, buckets);
  case rt::DType::U32:
    return histogramOfArray<uint32_t>(data, n, buckets);
  case rt::DType::U16:
    return histogramOfArray<uint16_t>(data, n, buckets);
  case rt::DType::U8:
  case rt::DType::Bool:
    return histogramOfArray<uint8_t>(data, n, buckets);
  }
  return histogramOfArray<uint8_t>(data, 0, buckets);
}

//===----------------------------------------------------------------------===//
// TensorBoardWriter
//===----------------------------------------------------------------------===//

namespace {

/// The host name, with anything but [A-Za-z0-9._-] replaced by '_'.
std::string hostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || !buf[0])
    return "localhost";
  std::string s = buf;
  for (char &c : s)
    if (!std::isalnum((unsigned char)c) && c != '.' && c != '-' && c != '_')
      c = '_';
  return s;
}

/// Flush on our own once this much is buffered.
constexpr size_t kFlushBytes = 4 << 20;

} // namespace

TensorBoardWriter::TensorBoardWriter(const std::string &dirArg,
                                     int64_t startStep) {
  std::string dir = dirArg;
  while (dir.size() > 1 && dir.back() == '/')
    dir.pop_back();
  if (dir.empty())
    fail("--tensorboard: empty directory name");
  std::string err;
  if (!makeDirs(dir, err))
    fail("--tensorboard " + (err.compare(0, dir.size() + 1, dir + ":") == 0
                                 ? err
                                 : dir + ": " + err));
  if (!isDirectory(dir))
    fail("--tensorboard " + dir + ": not a directory");

  std::string base = dir + "/events.out.tfevents." +
                     std::to_string((long long)std::time(nullptr)) + "." +
                     hostName() + "." + std::to_string((long long)::getpid());
  for (int k = 0;; ++k) {
    path_ = k ? base + "." + std::to_string(k) : base;
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ >= 0)
      break;
    if (errno != EEXIST || k == 1000)
      fail("--tensorboard " + dir +
           ": cannot create an event file: " + lastError());
  }

  double wallTime = now();
  Proto version = eventHead(wallTime, 0);
  version.bytesField(EvFileVersion, "brain.Event:2");
  append(version.str());
  Proto start = eventHead(wallTime, startStep);
  Proto sessionLog;
  sessionLog.int64Field(SlStatus, kSessionLogStart);
  start.bytesField(EvSessionLog, sessionLog.str());
  append(start.str());
  try {
    flush();
  } catch (...) {
    ::close(fd_);
    ::unlink(path_.c_str());
    fd_ = -1;
    throw;
  }
}

TensorBoardWriter::~TensorBoardWriter() {
  if (fd_ < 0)
    return;
  try {
    flush();
  } catch (const UserError &) {
  }
  ::close(fd_);
}

double TensorBoardWriter::now() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

void TensorBoardWriter::append(const std::string &event) {
  buffer_ += tfRecord(event);
  if (buffer_.size() >= kFlushBytes)
    flush();
}

void TensorBoardWriter::scalar(const std::string &tag, int64_t step,
                               double value, double wallTime) {
  Proto summary;
  summary.bytesField(SumValue, scalarValue(tag, float(value)));
  Proto e = eventHead(wallTime, step);
  e.bytesField(EvSummary, summary.str());
  append(e.str());
}

Histogram TensorBoardWriter::histogram(const std::string &tag, int64_t step,
                                       rt::DType dtype, const void *data,
                                       int64_t n, double wallTime) {
  Histogram h = computeHistogram(dtype, data, n);
  Proto summary;
  summary.bytesField(SumValue, histogramValue(tag, h));
  if (h.nonFinite())
    summary.bytesField(SumValue,
                       scalarValue(tag + "/nonfinite", float(h.nonFinite())));
  Proto e = eventHead(wallTime, step);
  e.bytesField(EvSummary, summary.str());
  append(e.str());
  return h;
}

Histogram TensorBoardWriter::histogram(const std::string &tag, int64_t step,
                                       const rt::HostTensor &t,
                                       double wallTime) {
  return histogram(tag, step, t.dtype(), t.data(), t.numel(), wallTime);
}

void TensorBoardWriter::flush() {
  size_t done = 0;
  while (done < buffer_.size()) {
    ssize_t w = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      std::string why = w < 0 ? lastError() : "nothing written";
      buffer_.erase(0, done);
      fail("--tensorboard " + path_ + ": write error: " + why);
    }
    done += size_t(w);
  }
  buffer_.clear();
}

} // namespace kiln::train
