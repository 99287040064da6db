//===- TensorBoardTest.cpp - TensorBoard event files ----------------------===//
// SPDX-License-Identifier: Apache-2.0
//
// The CRC-32C against RFC 3720's vectors and a bit-at-a-time reference, one
// TFRecord and one scalar Event byte for byte (expected bytes derived by hand
// from event.proto / summary.proto), and event files read back through a
// small protobuf decoder written here: scalars, histograms (counts, exact
// statistics, every value inside its bucket, every dtype, non-finite values,
// degenerate ranges), the SessionLog START, refused directories and two
// writers in one directory. With KILN_TENSORBOARD_SAMPLE=DIR set,
// TensorBoard.SampleForReader leaves an event file in DIR for
// test/Training/tfevents.py (test/Training/tensorboard.test).
//===----------------------------------------------------------------------===//
#include "TensorBoard.h"

#include "Util.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

using namespace kiln;
using namespace kiln::train;

namespace {

//===----------------------------------------------------------------------===//
// A small decoder: records, protobuf fields, events
//===----------------------------------------------------------------------===//

uint64_t le(const std::string &s, size_t off, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i)
    v = v << 8 | uint8_t(s[off + i]);
  return v;
}

/// The records of an event file, both CRCs checked.
std::vector<std::string> readRecords(const std::string &path) {
  std::string buf, err;
  EXPECT_TRUE(readWholeFile(path, buf, err)) << err;
  std::vector<std::string> out;
  size_t off = 0;
  while (off < buf.size()) {
    if (off + 12 > buf.size()) {
      ADD_FAILURE() << "truncated header at " << off;
      break;
    }
    uint64_t len = le(buf, off, 8);
    EXPECT_EQ(le(buf, off + 8, 4), maskedCrc32c(buf.data() + off, 8))
        << "length CRC of record " << out.size();
    if (off + 16 + len > buf.size()) {
      ADD_FAILURE() << "truncated record at " << off;
      break;
    }
    std::string data = buf.substr(off + 12, len);
    EXPECT_EQ(le(buf, off + 12 + len, 4),
              maskedCrc32c(data.data(), data.size()))
        << "data CRC of record " << out.size();
    out.push_back(data);
    off += 16 + len;
  }
  return out;
}

/// One protobuf field: a varint's value, or the bytes of a fixed64,
/// fixed32 or length-delimited field.
struct Field {
  int wire = 0;
  uint64_t varint = 0;
  std::string bytes;

  double asDouble() const {
    EXPECT_EQ(wire, 1);
    double d;
    std::memcpy(&d, bytes.data(), 8);
    return d;
  }
  float asFloat() const {
    EXPECT_EQ(wire, 5);
    float f;
    std::memcpy(&f, bytes.data(), 4);
    return f;
  }
  std::vector<double> asPackedDoubles() const {
    EXPECT_EQ(wire, 2);
    EXPECT_EQ(bytes.size() % 8, 0u);
    std::vector<double> out(bytes.size() / 8);
    std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
  }
};

using Message = std::multimap<int, Field>;

Message decode(const std::string &buf) {
  Message m;
  size_t pos = 0;
  auto varint = [&]() {
    uint64_t v = 0;
    for (int shift = 0; pos < buf.size() && shift < 70; shift += 7) {
      uint8_t b = uint8_t(buf[pos++]);
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80))
        return v;
    }
    ADD_FAILURE() << "bad varint";
    pos = buf.size();
    return v;
  };
  while (pos < buf.size()) {
    uint64_t key = varint();
    Field f;
    f.wire = int(key & 7);
    size_t n = 0;
    switch (f.wire) {
    case 0:
      f.varint = varint();
      break;
    case 1:
      n = 8;
      break;
    case 2:
      n = varint();
      break;
    case 5:
      n = 4;
      break;
    default:
      ADD_FAILURE() << "wire type " << f.wire;
      return m;
    }
    if (pos + n > buf.size()) {
      ADD_FAILURE() << "field " << (key >> 3) << " runs past its message";
      return m;
    }
    f.bytes = buf.substr(pos, n);
    pos += n;
    m.emplace(int(key >> 3), f);
  }
  return m;
}

const Field &one(const Message &m, int field) {
  static const Field none;
  EXPECT_EQ(m.count(field), 1u) << "field " << field;
  auto it = m.find(field);
  return it == m.end() ? none : it->second;
}

/// An Event's summary values, each decoded.
std::vector<Message> summaryValues(const Message &event) {
  std::vector<Message> out;
  Message summary = decode(one(event, 5).bytes);
  for (auto [it, end] = summary.equal_range(1); it != end; ++it)
    out.push_back(decode(it->second.bytes));
  return out;
}

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

struct TempDir {
  std::string path;
  TempDir() {
    char buf[] = "/tmp/kiln-tb-test-XXXXXX";
    EXPECT_TRUE(::mkdtemp(buf)) << lastError();
    path = buf;
  }
  ~TempDir() { removeTree(path); }
};

std::vector<std::string> eventFiles(const std::string &dir) {
  std::vector<std::string> out;
  for (const std::string &name : listDir(dir))
    if (name.find("tfevents") != std::string::npos)
      out.push_back(dir + "/" + name);
  return out;
}

/// The bucket of `v` by the limits written: limit[b-1] <= v < limit[b], the
/// last bucket closed.
size_t bucketOf(const Histogram &h, double v) {
  size_t b = 0;
  while (b + 1 < h.limits.size() && v >= h.limits[b])
    ++b;
  return b;
}

/// Checks `h` against the values, computed again here in the plainest way.
/// The sums are compared exactly only when `exactSums`: values whose
/// partial sums are exact in any order (the writer adds in four interleaved
/// lanes); otherwise to rounding, unless they overflow.
void expectHistogramOf(const Histogram &h, const std::vector<double> &values,
                       const std::string &what, bool exactSums = true) {
  SCOPED_TRACE(what);
  double mn = INFINITY, mx = -INFINITY, sum = 0, sumSquares = 0;
  int64_t finite = 0, nan = 0, posInf = 0, negInf = 0;
  for (double v : values) {
    if (std::isnan(v)) {
      ++nan;
    } else if (std::isinf(v)) {
      ++(v > 0 ? posInf : negInf);
    } else {
      mn = std::min(mn, v);
      mx = std::max(mx, v);
      sum += v;
      sumSquares += v * v;
      ++finite;
    }
  }
  EXPECT_EQ(h.nan, nan);
  EXPECT_EQ(h.posInf, posInf);
  EXPECT_EQ(h.negInf, negInf);
  EXPECT_EQ(h.num, double(finite));
  ASSERT_EQ(h.limits.size(), h.counts.size());
  ASSERT_FALSE(h.limits.empty());
  if (!finite) {
    EXPECT_EQ(h.counts, std::vector<double>{0.0});
    return;
  }
  EXPECT_EQ(h.min, mn);
  EXPECT_EQ(h.max, mx);
  if (exactSums) {
    EXPECT_EQ(h.sum, sum);
    EXPECT_EQ(h.sumSquares, sumSquares);
  } else if (std::isfinite(sumSquares)) {
    EXPECT_NEAR(h.sum, sum, 1e-12 * std::sqrt(sumSquares * finite));
    EXPECT_NEAR(h.sumSquares, sumSquares, 1e-12 * sumSquares);
  }
  EXPECT_EQ(h.limits.back(), mx);
  for (size_t b = 1; b < h.limits.size(); ++b)
    EXPECT_LE(h.limits[b - 1], h.limits[b]) << "bucket " << b;
  std::vector<double> counts(h.limits.size(), 0.0);
  for (double v : values)
    if (std::isfinite(v))
      counts[bucketOf(h, v)] += 1;
  EXPECT_EQ(h.counts, counts);
  double total = 0;
  for (double c : h.counts)
    total += c;
  EXPECT_EQ(total, double(finite));
}

/// `values` stored as `dtype`.
rt::HostTensor tensorOf(rt::DType dtype, const std::vector<double> &values) {
  rt::HostTensor t(rt::TensorDesc{dtype, {int64_t(values.size())}});
  for (size_t i = 0; i < values.size(); ++i) {
    double v = values[i];
    switch (dtype) {
    case rt::DType::F32:
      t.as<float>()[i] = float(v);
      break;
    case rt::DType::F64:
      t.as<double>()[i] = v;
      break;
    case rt::DType::F16:
      t.as<uint16_t>()[i] = rt::floatToHalf(float(v));
      break;
    case rt::DType::BF16:
      t.as<uint16_t>()[i] = rt::floatToBf16(float(v));
      break;
    case rt::DType::I64:
      t.as<int64_t>()[i] = int64_t(v);
      break;
    case rt::DType::I32:
      t.as<int32_t>()[i] = int32_t(v);
      break;
    case rt::DType::I16:
      t.as<int16_t>()[i] = int16_t(v);
      break;
    case rt::DType::I8:
      t.as<int8_t>()[i] = int8_t(v);
      break;
    case rt::DType::U64:
      t.as<uint64_t>()[i] = uint64_t(v);
      break;
    case rt::DType::U32:
      t.as<uint32_t>()[i] = uint32_t(v);
      break;
    case rt::DType::U16:
      t.as<uint16_t>()[i] = uint16_t(v);
      break;
    case rt::DType::U8:
    case rt::DType::Bool:
      t.as<uint8_t>()[i] = uint8_t(v);
      break;
    }
  }
  return t;
}

//===----------------------------------------------------------------------===//
// CRC and framing
//===----------------------------------------------------------------------===//

TEST(TensorBoard, Crc32cKnownVectors) {
  // "123456789" is the CRC catalogue's check value; the 32-byte vectors
  // are RFC 3720 (iSCSI) appendix B.4.
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
  std::string zeros(32, '\0'), ones(32, '\xff'), up(32, 0), down(32, 0);
  for (int i = 0; i < 32; ++i) {
    up[i] = char(i);
    down[i] = char(31 - i);
  }
  EXPECT_EQ(crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(crc32c(up.data(), 32), 0x46DD794Eu);
  EXPECT_EQ(crc32c(down.data(), 32), 0x113FDB5Cu);
  // Masked: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
  EXPECT_EQ(maskedCrc32c("", 0), 0xa282ead8u);
  EXPECT_EQ(maskedCrc32c("123456789", 9),
            ((0xE3069283u >> 15) | (0xE3069283u << 17)) + 0xa282ead8u);
}

TEST(TensorBoard, Crc32cMatchesBitwiseReferenceAtEveryLengthAndSplit) {
  // Slicing-by-8 against the definition, at every length and alignment of
  // the 8-byte loop and its tail, and continued across a split.
  auto reference = [](const uint8_t *p, size_t n) {
    uint32_t crc = 0xffffffffu;
    for (size_t i = 0; i < n; ++i) {
      crc ^= p[i];
      for (int k = 0; k < 8; ++k)
        crc = (crc >> 1) ^ ((crc & 1) ? 0x82F63B78u : 0);
    }
    return ~crc;
  };
  std::mt19937 rng(7);
  std::vector<uint8_t> buf(300);
  for (uint8_t &b : buf)
    b = uint8_t(rng());
  for (size_t start = 0; start < 8; ++start)
    for (size_t n = 0; n + start <= 200; ++n) {
      const uint8_t *p = buf.data() + start;
      ASSERT_EQ(crc32c(p, n), reference(p, n)) << start << "+" << n;
      size_t cut = n / 3;
      ASSERT_EQ(crc32c(p + cut, n - cut, crc32c(p, cut)), reference(p, n));
    }
}

TEST(TensorBoard, RecordFramingByteForByte) {
  // Computed independently by test/Training/tfevents.py's CRC.
  const uint8_t expected[] = {
      0x12, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // length 18
      0x24, 0x1f, 0x64, 0x25,                         // its CRC
      'h',  'e',  'l',  'l',  'o',  ',',  ' ',  't',  'e',
      'n',  's',  'o',  'r',  'b',  'o',  'a',  'r',  'd', // data
      0xba, 0x26, 0x32, 0x89};                             // its CRC
  std::string record = tfRecord("hello, tensorboard");
  ASSERT_EQ(record.size(), sizeof expected);
  for (size_t i = 0; i < sizeof expected; ++i)
    EXPECT_EQ(uint8_t(record[i]), expected[i]) << "byte " << i;
}

//===----------------------------------------------------------------------===//
// Event files
//===----------------------------------------------------------------------===//

TEST(TensorBoard, FileStartsWithVersionAndSessionStart) {
  TempDir tmp;
  std::string path;
  {
    TensorBoardWriter w(tmp.path + "/run/a", 40);
    path = w.path();
    // Written at once: the file is valid before the first flush.
    EXPECT_EQ(readRecords(path).size(), 2u);
  }
  std::string name = path.substr(path.rfind('/') + 1);
  EXPECT_EQ(path.substr(0, path.rfind('/')), tmp.path + "/run/a");
  EXPECT_EQ(name.compare(0, 20, "events.out.tfevents."), 0) << name;
  EXPECT_NE(name.find("." + std::to_string(::getpid())), std::string::npos);

  std::vector<std::string> records = readRecords(path);
  ASSERT_EQ(records.size(), 2u);
  Message version = decode(records[0]);
  EXPECT_EQ(one(version, 3).bytes, "brain.Event:2");
  double wall = one(version, 1).asDouble();
  EXPECT_NEAR(wall, TensorBoardWriter::now(), 60);
  EXPECT_EQ(version.count(2), 0u); // step 0, omitted as proto3 does

  Message start = decode(records[1]);
  EXPECT_EQ(one(start, 2).varint, 40u);
  Message sessionLog = decode(one(start, 7).bytes);
  EXPECT_EQ(one(sessionLog, 1).varint, 1u); // START
}

TEST(TensorBoard, ScalarEventByteForByteAndDecoded) {
  TempDir tmp;
  std::string path;
  {
    TensorBoardWriter w(tmp.path);
    path = w.path();
    w.scalar("loss", 7, 0.25, 1.5);
    w.scalar("eval/accuracy", -3, 0.0, 2.0);
    w.scalar("lr", int64_t(1) << 40, 1e-3, 3.0);
    w.flush();
  }
  std::vector<std::string> records = readRecords(path);
  ASSERT_EQ(records.size(), 5u);
  // Event{wall_time: 1.5, step: 7, summary {value {tag: "loss",
  // simple_value: 0.25}}} by hand from the .proto field numbers.
  // clang-format off
  const uint8_t expected[] = {
      0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, // 1: wall_time, fixed64 1.5
      0x10, 0x07,                         // 2: step, varint 7
      0x2a, 0x0d,                         // 5: summary, 13 bytes
      0x0a, 0x0b,                         //   1: value, 11 bytes
      0x0a, 0x04, 'l', 'o', 's', 's',     //     1: tag
      0x15, 0, 0, 0x80, 0x3e};            //     2: simple_value, float 0.25
  // clang-format on
  ASSERT_EQ(records[2].size(), sizeof expected);
  for (size_t i = 0; i < sizeof expected; ++i)
    EXPECT_EQ(uint8_t(records[2][i]), expected[i]) << "byte " << i;

  struct Want {
    const char *tag;
    int64_t step;
    float value;
    double wall;
  } want[] = {{"loss", 7, 0.25f, 1.5},
              {"eval/accuracy", -3, 0.0f, 2.0},
              {"lr", int64_t(1) << 40, 1e-3f, 3.0}};
  for (int i = 0; i < 3; ++i) {
    Message e = decode(records[2 + i]);
    EXPECT_EQ(one(e, 1).asDouble(), want[i].wall);
    EXPECT_EQ(int64_t(one(e, 2).varint), want[i].step);
    std::vector<Message> values = summaryValues(e);
    ASSERT_EQ(values.size(), 1u);
    EXPECT_EQ(one(values[0], 1).bytes, want[i].tag);
    // A zero is written too: simple_value is in a oneof.
    EXPECT_EQ(one(values[0], 2).asFloat(), want[i].value);
  }
}

TEST(TensorBoard, HistogramEventMatchesComputeHistogram) {
  TempDir tmp;
  std::vector<double> values;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.1f, 0.05f);
  for (int i = 0; i < 5000; ++i)
    values.push_back(normal(rng));
  rt::HostTensor t = tensorOf(rt::DType::F32, values);
  std::string path;
  Histogram h;
  {
    TensorBoardWriter w(tmp.path);
    path = w.path();
    h = w.histogram("params/fc1.weight", 12, t, 99.0);
  }
  expectHistogramOf(h, values, "f32 normal", /*exactSums=*/false);
  EXPECT_EQ(h.limits.size(), size_t(kHistogramBuckets));

  std::vector<std::string> records = readRecords(path);
  ASSERT_EQ(records.size(), 3u);
  Message e = decode(records[2]);
  EXPECT_EQ(one(e, 2).varint, 12u);
  EXPECT_EQ(one(e, 1).asDouble(), 99.0);
  std::vector<Message> vs = summaryValues(e);
  ASSERT_EQ(vs.size(), 1u); // no "/nonfinite" scalar: all finite
  EXPECT_EQ(one(vs[0], 1).bytes, "params/fc1.weight");
  Message histo = decode(one(vs[0], 5).bytes);
  EXPECT_EQ(one(histo, 1).asDouble(), h.min);
  EXPECT_EQ(one(histo, 2).asDouble(), h.max);
  EXPECT_EQ(one(histo, 3).asDouble(), 5000.0);
  EXPECT_EQ(one(histo, 4).asDouble(), h.sum);
  EXPECT_EQ(one(histo, 5).asDouble(), h.sumSquares);
  EXPECT_EQ(one(histo, 6).asPackedDoubles(), h.limits);
  EXPECT_EQ(one(histo, 7).asPackedDoubles(), h.counts);
}

TEST(TensorBoard, HistogramExactInEveryDType) {
  // Small integers and halves: exact in every float type, so min, max, sum
  // and sum_squares must come out exact whatever the summation order.
  std::vector<double> values;
  for (int i = 0; i < 1000; ++i)
    values.push_back(double((i * 37) % 101) - 50.0);
  std::vector<double> halves;
  for (double v : values)
    halves.push_back(v / 2);
  std::vector<double> unsignedValues;
  for (double v : values)
    unsignedValues.push_back(v + 50);
  for (int d = 0; d < rt::kNumDTypes; ++d) {
    rt::DType dtype = rt::DType(d);
    const std::vector<double> &vs =
        rt::isFloat(dtype) ? halves
        : (rt::isUnsignedInt(dtype) || dtype == rt::DType::Bool)
            ? unsignedValues
            : values;
    std::vector<double> stored = vs;
    if (dtype == rt::DType::Bool)
      for (double &v : stored)
        v = v != 0;
    rt::HostTensor t = tensorOf(dtype, stored);
    Histogram h = computeHistogram(dtype, t.data(), t.numel());
    expectHistogramOf(h, stored, rt::dtypeName(dtype));
  }
}

TEST(TensorBoard, HistogramEdgesAndOddSizes) {
  // Values exactly on bucket edges (0..30 over 30 buckets), sizes around
  // the 4-way unrolled loop, a one-element tensor.
  for (int n : {1, 2, 3, 4, 5, 7, 31, 33}) {
    std::vector<double> values;
    for (int i = 0; i < n; ++i)
      values.push_back(double(i % 31));
    rt::HostTensor t = tensorOf(rt::DType::F64, values);
    Histogram h = computeHistogram(rt::DType::F64, t.data(), n);
    expectHistogramOf(h, values, "n=" + std::to_string(n));
  }
  std::vector<double> edges;
  for (int i = 0; i <= 30; ++i)
    edges.push_back(i);
  rt::HostTensor t = tensorOf(rt::DType::F64, edges);
  Histogram h = computeHistogram(rt::DType::F64, t.data(), t.numel());
  expectHistogramOf(h, edges, "edges");
  // limit[b-1] <= v < limit[b]: one value per bucket, the last gets 29, 30.
  for (int b = 0; b < 29; ++b)
    EXPECT_EQ(h.counts[b], 1.0) << b;
  EXPECT_EQ(h.counts[29], 2.0);

  // Values near the edges where (v - min) * 30 / (max - min) rounds to the
  // other side of the limit written (a few of each set): still counted by
  // the limits.
  std::vector<double> tenths, hundredths;
  for (int i = 0; i <= 30; ++i)
    tenths.push_back(i * 0.1 - 1.5);
  for (int i = 0; i <= 300; ++i)
    hundredths.push_back(i * 0.01);
  for (const std::vector<double> &vs : {tenths, hundredths}) {
    rt::HostTensor t = tensorOf(rt::DType::F64, vs);
    expectHistogramOf(computeHistogram(rt::DType::F64, t.data(), t.numel()), vs,
                      "near edges, n=" + std::to_string(vs.size()),
                      /*exactSums=*/false);
  }
}

TEST(TensorBoard, HistogramDegenerateRanges) {
  const double big = std::numeric_limits<double>::max();
  const double tiny = std::numeric_limits<double>::denorm_min();
  struct Case {
    const char *what;
    std::vector<double> values;
    bool exactSums = true; // sums that overflow depend on the order
  } cases[] = {
      {"constant", {0.5, 0.5, 0.5}},
      {"zeros", std::vector<double>(100, 0.0)},
      {"whole double range", {-big, 0.0, big, big / 3, -big / 7}, false},
      {"zero to DBL_MAX", {0.0, big, big / 2, 1.0}, false},
      {"denormal range", {0.0, tiny, 2 * tiny, tiny}},
      {"one ulp", {1.0, std::nextafter(1.0, 2.0), 1.0}},
  };
  for (const Case &c : cases) {
    rt::HostTensor t = tensorOf(rt::DType::F64, c.values);
    Histogram h = computeHistogram(rt::DType::F64, t.data(), t.numel());
    expectHistogramOf(h, c.values, c.what, c.exactSums);
    for (double l : h.limits)
      EXPECT_TRUE(std::isfinite(l)) << c.what;
  }
  rt::HostTensor zeros = tensorOf(rt::DType::F32, std::vector<double>(9, 0.0));
  Histogram h = computeHistogram(rt::DType::F32, zeros.data(), 9);
  EXPECT_EQ(h.limits, std::vector<double>{0.0}); // one bucket
  EXPECT_EQ(h.counts, std::vector<double>{9.0});
}

TEST(TensorBoard, NonFiniteValuesCountedApart) {
  const double inf = INFINITY, nan = NAN;
  std::vector<double> values = {1.0, nan, -2.0, inf, 3.0, -inf, nan, 0.5};
  for (rt::DType dtype :
       {rt::DType::F32, rt::DType::F64, rt::DType::F16, rt::DType::BF16}) {
    rt::HostTensor t = tensorOf(dtype, values);
    Histogram h = computeHistogram(dtype, t.data(), t.numel());
    expectHistogramOf(h, values, rt::dtypeName(dtype));
    EXPECT_EQ(h.nan, 2);
    EXPECT_EQ(h.posInf, 1);
    EXPECT_EQ(h.negInf, 1);
    EXPECT_EQ(h.min, -2.0);
    EXPECT_EQ(h.max, 3.0);
    EXPECT_EQ(h.sum, 2.5);
  }

  // All non-finite, and empty: num 0, one empty bucket.
  for (const std::vector<double> &vs :
       {std::vector<double>{nan, inf}, std::vector<double>{}}) {
    rt::HostTensor t = tensorOf(rt::DType::F32, vs);
    Histogram h = computeHistogram(rt::DType::F32, t.data(), t.numel());
    expectHistogramOf(h, vs, "no finite value");
    EXPECT_EQ(h.num, 0.0);
    EXPECT_EQ(h.min, 0.0);
    EXPECT_EQ(h.max, 0.0);
  }

  // In the file: the same event carries "<tag>/nonfinite".
  TempDir tmp;
  std::string path;
  {
    TensorBoardWriter w(tmp.path);
    path = w.path();
    rt::HostTensor t = tensorOf(rt::DType::F32, values);
    w.histogram("grads/w", 5, t, 1.0);
  }
  std::vector<std::string> records = readRecords(path);
  ASSERT_EQ(records.size(), 3u);
  std::vector<Message> vs = summaryValues(decode(records[2]));
  ASSERT_EQ(vs.size(), 2u);
  EXPECT_EQ(one(vs[0], 1).bytes, "grads/w");
  EXPECT_EQ(one(decode(one(vs[0], 5).bytes), 3).asDouble(), 4.0); // num
  EXPECT_EQ(one(vs[1], 1).bytes, "grads/w/nonfinite");
  EXPECT_EQ(one(vs[1], 2).asFloat(), 4.0f);
}

TEST(TensorBoard, HistogramOfTenMillionIsFast) {
  std::vector<float> values(10'000'000);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (float &v : values)
    v = normal(rng);
  auto cpuMs = [] {
    timespec ts;
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
  };
  auto start = std::chrono::steady_clock::now();
  double cpuStart = cpuMs();
  Histogram h =
      computeHistogram(rt::DType::F32, values.data(), int64_t(values.size()));
  double cpu = cpuMs() - cpuStart;
  double ms = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - start)
                  .count();
  RecordProperty("ms", std::to_string(ms));
  std::printf("histogram of 10M f32: %.1f ms (%.1f ms of CPU)\n", ms, cpu);
  EXPECT_EQ(h.num, 1e7);
  // Generous: a loaded or sanitized build must not fail here; the target
  // is well under 100 ms.
  EXPECT_LT(ms, 2000.0);
}

//===----------------------------------------------------------------------===//
// Directories and file names
//===----------------------------------------------------------------------===//

/// The message of the UserError `f` throws ("" when it throws none).
template <typename F> std::string userError(F f) {
  try {
    f();
  } catch (const UserError &e) {
    return e.what();
  }
  return "";
}

TEST(TensorBoard, RefusesWhatIsNotAWritableDirectory) {
  TempDir tmp;
  std::string file = tmp.path + "/plain";
  std::string err;
  ASSERT_TRUE(writeFileSynced(file, "x", err)) << err;

  std::string msg = userError([&] { TensorBoardWriter w(file); });
  EXPECT_EQ(msg, "--tensorboard " + file + ": exists and is not a directory");

  msg = userError([&] { TensorBoardWriter w(file + "/sub"); });
  EXPECT_NE(msg.find("--tensorboard " + file + "/sub: "), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("not a directory"), std::string::npos) << msg;

  // /proc refuses new entries even to root.
  std::string proc = "/proc/self/kiln-tensorboard";
  msg = userError([&] { TensorBoardWriter w(proc); });
  EXPECT_EQ(
      msg.compare(0, 14 + proc.size() + 2, "--tensorboard " + proc + ": "), 0)
      << msg;

  msg = userError([&] { TensorBoardWriter w(""); });
  EXPECT_EQ(msg, "--tensorboard: empty directory name");

  if (::geteuid() != 0) { // root writes anyway
    std::string ro = tmp.path + "/readonly";
    ASSERT_EQ(::mkdir(ro.c_str(), 0555), 0);
    msg = userError([&] { TensorBoardWriter w(ro); });
    EXPECT_EQ(msg, "--tensorboard " + ro +
                       ": cannot create an event file: Permission denied");
    EXPECT_TRUE(eventFiles(ro).empty());
  }
}

TEST(TensorBoard, WritersNeverShareAFile) {
  TempDir tmp;
  // Same directory, process and (almost surely) second: the O_EXCL open
  // moves the second and third to ".1" and ".2". A trailing slash is the
  // same directory.
  TensorBoardWriter a(tmp.path), b(tmp.path + "/"), c(tmp.path);
  a.scalar("loss", 1, 1.0, 1.0);
  b.scalar("loss", 1, 2.0, 1.0);
  c.scalar("loss", 1, 3.0, 1.0);
  a.flush();
  b.flush();
  c.flush();
  EXPECT_NE(a.path(), b.path());
  EXPECT_NE(a.path(), c.path());
  EXPECT_NE(b.path(), c.path());
  EXPECT_EQ(eventFiles(tmp.path).size(), 3u);
  float seen[3];
  const TensorBoardWriter *ws[] = {&a, &b, &c};
  for (int i = 0; i < 3; ++i) {
    std::vector<std::string> records = readRecords(ws[i]->path());
    ASSERT_EQ(records.size(), 3u);
    seen[i] = one(summaryValues(decode(records[2]))[0], 2).asFloat();
  }
  EXPECT_EQ(seen[0], 1.0f);
  EXPECT_EQ(seen[1], 2.0f);
  EXPECT_EQ(seen[2], 3.0f);
}

TEST(TensorBoard, FlushWritesBufferedRecords) {
  TempDir tmp;
  TensorBoardWriter w(tmp.path);
  w.scalar("loss", 1, 1.0, 1.0);
  EXPECT_EQ(readRecords(w.path()).size(), 2u); // buffered
  w.flush();
  EXPECT_EQ(readRecords(w.path()).size(), 3u);
  w.flush(); // nothing more
  EXPECT_EQ(readRecords(w.path()).size(), 3u);
}

//===----------------------------------------------------------------------===//
// A file for test/Training/tfevents.py
//===----------------------------------------------------------------------===//

TEST(TensorBoard, SampleForReader) {
  // Deterministic content (wall times given), so the reader's output can be
  // checked line by line.
  const char *out = std::getenv("KILN_TENSORBOARD_SAMPLE");
  TempDir tmp;
  std::string dir = out && *out ? out : tmp.path;
  std::string path;
  {
    TensorBoardWriter w(dir);
    path = w.path();
    for (int64_t s = 0; s < 3; ++s) {
      double wall = 1700000000.0 + s;
      w.scalar("loss", s, 2.0 / (s + 1), wall);
      w.scalar("lr", s, 0.001, wall);
      w.flush();
    }
    std::vector<double> weights;
    for (int i = 0; i < 12; ++i)
      weights.push_back(i * 0.25 - 1.0);
    w.histogram("params/fc1.weight", 2, tensorOf(rt::DType::BF16, weights),
                1700000002.5);
    w.histogram("grads/fc1.weight", 2,
                tensorOf(rt::DType::F32, {0.5, NAN, -0.5, INFINITY}),
                1700000002.5);
    w.flush();
  }
  EXPECT_EQ(readRecords(path).size(), 2u + 6u + 2u);
  if (out && *out)
    std::printf("wrote %s\n", path.c_str());
}

} // namespace
