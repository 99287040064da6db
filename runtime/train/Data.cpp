//===- Data.cpp - the data loader -------------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Every size in a .npy header is checked against the mapped file before any
// sample is touched; gathering then only reads rows [0, n) of each shard.
// A manifest is untrusted too: its entries must be relative file names, and
// each names a .npy file checked like any other.
//===----------------------------------------------------------------------===//
#include "Data.h"

#include "kiln/runtime/Runtime.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <glob.h>
#include <limits>
#include <sys/stat.h>
#include <system_error>

namespace kiln::train {

using rt::DType;

namespace {


bool isInt(DType t) { return rt::isSignedInt(t) || rt::isUnsignedInt(t); }

/// Whether integer data of type `src` can be widened to `dst` exactly.
bool canWiden(DType src, DType dst) {
  if (!isInt(src) || !isInt(dst) || src == dst)
    return false;
  size_t s = rt::dtypeSize(src), d = rt::dtypeSize(dst);
  // A wider destination holds every value, except that an unsigned one
  // cannot take negative numbers.
  if (rt::isUnsignedInt(dst) && rt::isSignedInt(src))
    return false;
  return s < d;
}

/// Element `i` of integer data as int64; false when it does not fit.
bool loadInt(DType t, const uint8_t *base, uint64_t i, int64_t &v) {
  switch (t) {
  case DType::I8: { int8_t x; std::memcpy(&x, base + i, 1); v = x; return true; }
  case DType::U8: v = base[i]; return true;
  case DType::I16: { int16_t x; std::memcpy(&x, base + 2 * i, 2); v = x; return true; }
  case DType::U16: { uint16_t x; std::memcpy(&x, base + 2 * i, 2); v = x; return true; }
  case DType::I32: { int32_t x; std::memcpy(&x, base + 4 * i, 4); v = x; return true; }
  case DType::U32: { uint32_t x; std::memcpy(&x, base + 4 * i, 4); v = x; return true; }
  case DType::I64: { std::memcpy(&v, base + 8 * i, 8); return true; }
  case DType::U64: {
    uint64_t x;
    std::memcpy(&x, base + 8 * i, 8);
    v = (int64_t)x;
    return x <= (uint64_t)std::numeric_limits<int64_t>::max();
  }
  default:
    return false;
  }
}

void storeInt(DType t, uint8_t *base, uint64_t i, int64_t v) {
  switch (t) {
  case DType::I8: { int8_t x = (int8_t)v; std::memcpy(base + i, &x, 1); break; }
  case DType::U8: base[i] = (uint8_t)v; break;
  case DType::I16: { int16_t x = (int16_t)v; std::memcpy(base + 2 * i, &x, 2); break; }
  case DType::U16: { uint16_t x = (uint16_t)v; std::memcpy(base + 2 * i, &x, 2); break; }
  case DType::I32: { int32_t x = (int32_t)v; std::memcpy(base + 4 * i, &x, 4); break; }
  case DType::U32: { uint32_t x = (uint32_t)v; std::memcpy(base + 4 * i, &x, 4); break; }
  case DType::I64: std::memcpy(base + 8 * i, &v, 8); break;
  case DType::U64: { uint64_t x = (uint64_t)v; std::memcpy(base + 8 * i, &x, 8); break; }
  default: break;
  }
}

/// Whether any of the `n` floating elements at `p` is a NaN or an
/// infinity (the exponent all ones, whatever the dtype).
bool anyNonFinite(DType t, const uint8_t *p, uint64_t n) {
  switch (t) {
  case DType::F32:
    for (uint64_t i = 0; i < n; ++i) {
      uint32_t x;
      std::memcpy(&x, p + 4 * i, 4);
      if ((x & 0x7F800000u) == 0x7F800000u)
        return true;
    }
    return false;
  case DType::F64:
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t x;
      std::memcpy(&x, p + 8 * i, 8);
      if ((x & 0x7FF0000000000000ull) == 0x7FF0000000000000ull)
        return true;
    }
    return false;
  case DType::F16:
  case DType::BF16: {
    uint16_t mask = t == DType::F16 ? 0x7C00 : 0x7F80;
    for (uint64_t i = 0; i < n; ++i) {
      uint16_t x;
      std::memcpy(&x, p + 2 * i, 2);
      if ((x & mask) == mask)
        return true;
    }
    return false;
  }
  default:
    return false;
  }
}

/// 1 in a floating dtype, as bytes at `p`.
void storeOne(DType t, uint8_t *p) {
  switch (t) {
  case DType::F32: { float x = 1; std::memcpy(p, &x, 4); break; }
  case DType::F64: { double x = 1; std::memcpy(p, &x, 8); break; }
  case DType::F16: { uint16_t x = rt::floatToHalf(1.0f); std::memcpy(p, &x, 2); break; }
  case DType::BF16: { uint16_t x = rt::floatToBf16(1.0f); std::memcpy(p, &x, 2); break; }
  default: break;
  }
}

bool hasGlobChar(const std::string &s) {
  return s.find_first_of("*?[") != std::string::npos;
}

/// The shards DIR/manifest.json lists for `name`.
std::vector<std::string> manifestFiles(const std::string &flag,
                                       const std::string &name,
                                       const std::string &dir) {
  std::string path = dir + (dir.back() == '/' ? "" : "/") + "manifest.json";
  std::string where = flag + " " + name + ": " + path + ": ";
  // A manifest lists file names: 64 MiB holds millions of them.
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
      st.st_size > (off_t(64) << 20))
    fail(where + "larger than 64 MiB; not a manifest");
  std::string text, err;
  if (!readWholeFile(path, text, err))
    fail(flag + " " + name + ": " + dir + " is a directory, and " + err +
         " (a directory of shards needs a manifest.json)");
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  const char *form = "{\"inputs\": {\"NAME\": [\"FILE.npy\", ...]}}";
  if (j.is_discarded())
    fail(where + "not JSON (a manifest is " + form + ")");
  if (!j.is_object() || !j.contains("inputs") || !j["inputs"].is_object())
    fail(where + "it has no \"inputs\" object (a manifest is " + form + ")");
  const nlohmann::json &inputs = j["inputs"];
  if (!inputs.contains(name)) {
    std::string listed;
    for (auto it = inputs.begin(); it != inputs.end(); ++it)
      listed += (listed.empty() ? "" : ", ") + it.key();
    fail(where + "it lists no input '" + name + "' (it lists " +
         (listed.empty() ? "none" : listed) + ")");
  }
  const nlohmann::json &list = inputs[name];
  if (!list.is_array() || list.empty())
    fail(where + "inputs." + name + " is not a non-empty list of file names");
  std::vector<std::string> files;
  for (size_t i = 0; i < list.size(); ++i) {
    std::string at = "inputs." + name + "[" + std::to_string(i) + "]";
    if (!list[i].is_string())
      fail(where + at + " is not a file name");
    std::string f = list[i].get<std::string>();
    if (f.empty() || f[0] == '/' || f.find('\0') != std::string::npos)
      fail(where + at + " '" + f + "' is not a path relative to " + dir);
    files.push_back(dir + (dir.back() == '/' ? "" : "/") + f);
  }
  return files;
}

} // namespace

std::vector<std::string> dataFiles(const std::string &flag,
                                   const std::string &name,
                                   const std::string &value) {
  struct stat st;
  bool exists = ::stat(value.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode))
    return manifestFiles(flag, name, value);
  if (exists || !hasGlobChar(value))
    return {value}; // openNpy names what is wrong with it
  glob_t g;
  std::memset(&g, 0, sizeof g);
  int rc = ::glob(value.c_str(), GLOB_MARK | GLOB_NOSORT, nullptr, &g);
  std::vector<std::string> files;
  for (size_t i = 0; rc == 0 && i < g.gl_pathc; ++i) {
    std::string f = g.gl_pathv[i];
    if (!f.empty() && f.back() != '/') // GLOB_MARK: a directory ends in '/'
      files.push_back(std::move(f));
  }
  ::globfree(&g);
  if (rc != 0 && rc != GLOB_NOMATCH)
    fail(flag + " " + name + "=" + value + ": cannot expand it (" +
         (rc == GLOB_NOSPACE ? "out of memory" : "a directory cannot be read") + ")");
  if (files.empty())
    fail(flag + " " + name + "=" + value + ": no file matches");
  // Byte order, whatever the locale.
  std::sort(files.begin(), files.end());
  return files;
}

void openNpy(const std::string &path, NpyFile &out) {
  out.path = path;
  std::string err;
  if (!out.file.open(path, err))
    fail(err);
  rt::NpyLayout l;
  if (!rt::parseNpy(out.file.data(), out.file.size(), path, l, err))
    fail(err);
  out.dtype = l.dtype;
  out.shape = std::move(l.shape);
  out.data = out.file.data() + l.dataOffset;
  out.dataBytes = l.dataBytes;
}

size_t Source::shardOf(uint64_t i) const {
  if (shards.size() == 1)
    return 0;
  // The last shard starting at or before i (empty shards share a start).
  auto it = std::upper_bound(starts.begin(), starts.begin() + shards.size(), i);
  return (size_t)(it - starts.begin()) - 1;
}

const uint8_t *Source::sample(uint64_t i) const {
  size_t k = shardOf(i);
  return shards[k].data + (i - starts[k]) * srcSampleBytes;
}

void Dataset::open(
    const std::vector<std::pair<std::string, std::string>> &bindings,
    const std::vector<DataSpec> &specs, int64_t batch, const std::string &flag,
    bool partialBatch, const DataOptions &options) {
  flag_ = flag;
  batch_ = batch;
  sources_.clear();
  kept_.clear();
  firstDropped_.clear();
  std::string known;
  for (const DataSpec &s : specs)
    known += (known.empty() ? "" : ", ") + s.name;
  for (const auto &[name, path] : bindings) {
    const DataSpec *spec = nullptr;
    for (const DataSpec &s : specs)
      if (s.name == name)
        spec = &s;
    if (!spec)
      fail(flag + " " + name + ": the model has no input '" + name +
           "' (it reads " + (known.empty() ? "none" : known) + ")");
    size_t uses = 0;
    for (const auto &b : bindings)
      uses += b.first == name;
    if (uses > 1)
      fail(flag + " " + name + " is given " + std::to_string(uses) + " times");
  }
  // Sources in spec order, so batches line up with the specs.
  for (const DataSpec &spec : specs) {
    const std::string *value = nullptr;
    for (const auto &b : bindings)
      if (b.first == spec.name)
        value = &b.second;
    if (!value)
      fail("missing " + flag + " for input '" + spec.name + "'");
    Source src;
    src.name = spec.name;
    src.spec = spec;
    std::string where = flag + " " + spec.name + ": ";
    std::vector<std::string> files = dataFiles(flag, spec.name, *value);
    src.shards.resize(files.size());
    src.starts.push_back(0);
    std::vector<int64_t> sample0;
    for (size_t i = 0; i < files.size(); ++i) {
      NpyFile &f = src.shards[i];
      try {
        openNpy(files[i], f);
      } catch (const UserError &e) {
        fail(where + e.what());
      }
      if (f.shape.empty())
        fail(where + f.path + " holds a scalar; its first axis must index samples");
      std::vector<int64_t> sample(f.shape.begin() + 1, f.shape.end());
      if (i == 0) {
        bool oneHot = isInt(f.dtype) && sample.empty() && rt::isFloat(spec.dtype) &&
                      spec.sampleShape.size() == 1 && spec.sampleShape[0] >= 1;
        bool dtypeOk = f.dtype == spec.dtype || canWiden(f.dtype, spec.dtype);
        if (!oneHot && (sample != spec.sampleShape || !dtypeOk))
          fail(where + f.path + " holds " + rt::dtypeName(f.dtype) +
               " samples of shape " + shapeStr(sample) + ", the model expects " +
               typeStr(spec.dtype, spec.sampleShape));
        src.fileDtype = f.dtype;
        src.conversion = oneHot                  ? Conversion::OneHot
                         : f.dtype != spec.dtype ? Conversion::Widen
                                                 : Conversion::Copy;
        sample0 = sample;
      } else if (f.dtype != src.fileDtype || sample != sample0) {
        fail(where + f.path + " holds " + rt::dtypeName(f.dtype) +
             " samples of shape " + shapeStr(sample) + ", " +
             src.shards[0].path + " holds " + rt::dtypeName(src.fileDtype) +
             " samples of shape " + shapeStr(sample0) +
             "; the shards of an input must agree");
      }
      uint64_t end;
      if (__builtin_add_overflow(src.starts.back(), (uint64_t)f.shape[0], &end))
        fail(where + "the shards hold more than 2^64 samples");
      src.starts.push_back(end);
    }
    src.what = files.size() == 1 ? files[0]
                                 : *value + " (" + std::to_string(files.size()) +
                                       " files)";
    src.sampleElems = 1;
    for (int64_t d : sample0)
      src.sampleElems *= (uint64_t)d;
    src.srcSampleBytes = src.sampleElems * rt::dtypeSize(src.fileDtype);
    src.dstSampleBytes = src.conversion == Conversion::OneHot
                             ? (uint64_t)spec.sampleShape[0] * rt::dtypeSize(spec.dtype)
                             : src.sampleElems * rt::dtypeSize(spec.dtype);
    if (src.conversion == Conversion::OneHot) {
      // Every class index, once: gathering then only copies.
      int64_t c = spec.sampleShape[0];
      for (const NpyFile &f : src.shards) {
        uint64_t n = (uint64_t)f.shape[0];
        for (uint64_t i = 0; i < n; ++i) {
          int64_t v;
          bool fits = loadInt(f.dtype, f.data, i, v);
          if (fits && v >= 0 && v < c)
            continue;
          fail(where + (src.shards.size() > 1 ? f.path + ": " : "") + "value " +
               (fits ? std::to_string(v) : "above 2^63") + " at sample " +
               std::to_string(i) + " is outside [0, " + std::to_string(c) +
               ") (the model reads one-hot rows of " + std::to_string(c) +
               " classes)");
        }
      }
    }
    sources_.push_back(std::move(src));
  }
  // Every array has the same number of samples.
  numSamples_ = 0;
  for (size_t k = 0; k < sources_.size(); ++k) {
    uint64_t n = sources_[k].numSamples();
    if (k == 0) {
      numSamples_ = n;
    } else if (n != numSamples_) {
      fail(flag + " " + sources_[k].name + ": " + sources_[k].what + " has " +
           std::to_string(n) + " samples, " + flag + " " + sources_[0].name +
           ": " + sources_[0].what + " has " + std::to_string(numSamples_));
    }
  }
  arraySamples_ = numSamples_;
  if (options.dropNonFinite)
    dropNonFinite(options.threads);
  if (sources_.empty())
    return;
  std::string has = flag + " " + sources_[0].name + ": " + sources_[0].what +
                    " has " + std::to_string(arraySamples_) + " sample" +
                    (arraySamples_ == 1 ? "" : "s");
  if (dropped())
    has += ", " + std::to_string(numSamples_) + " kept after dropping those "
           "with NaN/Inf";
  if (partialBatch && numSamples_ == 0)
    fail(dropped() ? has : flag + " " + sources_[0].name + ": " +
                               sources_[0].what + " has no samples");
  if (!partialBatch && numSamples_ < (uint64_t)batch)
    fail(has + ", fewer than one batch of " + std::to_string(batch));
}

void Dataset::dropNonFinite(int threads) {
  // Work items: chunks of the floating sources' shards.
  struct Item {
    size_t source, shard;
    uint64_t begin, end; // samples of the shard
  };
  const uint64_t chunk = 1 << 16;
  std::vector<Item> items;
  for (size_t k = 0; k < sources_.size(); ++k) {
    const Source &s = sources_[k];
    if (!rt::isFloat(s.fileDtype) || s.sampleElems == 0)
      continue;
    for (size_t i = 0; i < s.shards.size(); ++i)
      for (uint64_t a = 0, n = s.starts[i + 1] - s.starts[i]; a < n; a += chunk)
        items.push_back({k, i, a, std::min(n, a + chunk)});
  }
  // Each item's non-finite samples, as array indices, in order.
  std::vector<std::vector<uint64_t>> bad(items.size());
  std::atomic<size_t> next{0};
  auto scan = [&] {
    for (size_t w; (w = next.fetch_add(1)) < items.size();) {
      const Item &it = items[w];
      const Source &s = sources_[it.source];
      const uint8_t *base = s.shards[it.shard].data;
      for (uint64_t i = it.begin; i < it.end; ++i)
        if (anyNonFinite(s.fileDtype, base + i * s.srcSampleBytes, s.sampleElems))
          bad[w].push_back(s.starts[it.shard] + i);
    }
  };
  size_t n = std::min<size_t>((size_t)std::max(threads, 1), items.size());
  std::vector<std::thread> pool;
  for (size_t t = 1; t < n; ++t)
    pool.emplace_back(scan);
  scan();
  for (std::thread &t : pool)
    t.join();
  std::vector<uint64_t> drop;
  for (const auto &b : bad)
    drop.insert(drop.end(), b.begin(), b.end());
  if (drop.empty())
    return;
  std::sort(drop.begin(), drop.end());
  drop.erase(std::unique(drop.begin(), drop.end()), drop.end());
  // The first dropped sample, named by the first source holding a
  // non-finite value there.
  uint64_t first = drop[0];
  for (const Source &s : sources_) {
    if (!rt::isFloat(s.fileDtype) ||
        !anyNonFinite(s.fileDtype, s.sample(first), s.sampleElems))
      continue;
    size_t k = s.shardOf(first);
    firstDropped_ = s.shards[k].path + " sample " + std::to_string(first - s.starts[k]);
    break;
  }
  kept_.reserve(arraySamples_ - drop.size());
  size_t j = 0;
  for (uint64_t i = 0; i < arraySamples_; ++i) {
    if (j < drop.size() && drop[j] == i)
      ++j;
    else
      kept_.push_back(i);
  }
  numSamples_ = kept_.size();
}

void Dataset::checkLabels(const std::string &name, int64_t numClasses,
                          std::optional<int64_t> ignoreIndex) const {
  for (const Source &s : sources_) {
    if (s.name != name || !isInt(s.fileDtype))
      continue;
    for (const NpyFile &f : s.shards) {
      uint64_t n = f.dataBytes / rt::dtypeSize(f.dtype);
      for (uint64_t i = 0; i < n; ++i) {
        int64_t v;
        bool fits = loadInt(f.dtype, f.data, i, v);
        if (fits && ((v >= 0 && v < numClasses) || (ignoreIndex && v == *ignoreIndex)))
          continue;
        std::string value;
        if (fits) {
          value = std::to_string(v);
        } else {
          uint64_t u;
          std::memcpy(&u, f.data + 8 * i, 8);
          value = std::to_string(u);
        }
        fail(flag_ + " " + name + ": " + (s.shards.size() > 1 ? f.path + ": " : "") +
             "value " + value + " at sample " +
             std::to_string(s.sampleElems ? i / s.sampleElems : 0) +
             " is outside [0, " + std::to_string(numClasses) + ")");
      }
    }
  }
}

std::vector<rt::HostTensor> Dataset::makeBatch() const {
  std::vector<rt::HostTensor> out;
  for (const Source &s : sources_) {
    rt::TensorDesc d;
    d.dtype = s.spec.dtype;
    d.shape.push_back(batch_);
    d.shape.insert(d.shape.end(), s.spec.sampleShape.begin(),
                   s.spec.sampleShape.end());
    out.emplace_back(d);
  }
  return out;
}

void Dataset::gather(const std::vector<uint64_t> &order, uint64_t begin,
                     std::vector<rt::HostTensor> &out, const SampleHook *hook,
                     uint64_t epoch) const {
  if (hook && !*hook)
    hook = nullptr;
  std::vector<uint8_t *> dst(sources_.size());
  for (size_t k = 0; k < sources_.size(); ++k)
    dst[k] = static_cast<uint8_t *>(out[k].data());
  for (int64_t i = 0; i < batch_; ++i) {
    uint64_t id = sampleId(order[begin + (uint64_t)i]);
    for (size_t k = 0; k < sources_.size(); ++k)
      copySample(k, id, dst[k] + (uint64_t)i * sources_[k].dstSampleBytes);
    if (hook)
      (*hook)(out, i, id, epoch);
  }
}

void Dataset::copySample(size_t k, uint64_t id, void *out) const {
  const Source &s = sources_[k];
  const uint8_t *src = s.sample(id);
  uint8_t *d = static_cast<uint8_t *>(out);
  switch (s.conversion) {
  case Conversion::Copy:
    std::memcpy(d, src, s.srcSampleBytes);
    break;
  case Conversion::Widen:
    for (uint64_t e = 0; e < s.sampleElems; ++e) {
      int64_t v = 0;
      loadInt(s.fileDtype, src, e, v);
      storeInt(s.spec.dtype, d, e, v);
    }
    break;
  case Conversion::OneHot: {
    int64_t v = -1, c = s.spec.sampleShape[0];
    std::memset(d, 0, s.dstSampleBytes);
    // Checked when opened; the mapped file may have changed since.
    if (!loadInt(s.fileDtype, src, 0, v) || v < 0 || v >= c)
      fail(flag_ + " " + s.name + ": sample " + std::to_string(id) +
           " changed to a class outside [0, " + std::to_string(c) +
           ") while training");
    storeOne(s.spec.dtype, d + (uint64_t)v * rt::dtypeSize(s.spec.dtype));
    break;
  }
  }
}

std::vector<uint64_t> epochOrder(uint64_t n, uint64_t seed, uint64_t epoch,
                                 bool shuffle) {
  std::vector<uint64_t> order(n);
  for (uint64_t i = 0; i < n; ++i)
    order[i] = i;
  if (!shuffle || n < 2)
    return order;
  const uint64_t golden = 0x9E3779B97F4A7C15ull;
  uint64_t state = seed ^ (epoch * golden);
  auto next = [&state, golden] {
    state += golden;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  for (uint64_t i = n - 1; i >= 1; --i) {
    uint64_t j = next() % (i + 1);
    std::swap(order[i], order[j]);
  }
  return order;
}

void Dataset::setShard(int64_t rank, int64_t world) {
  if (world < 1 || rank < 0 || rank >= world)
    throw UserError(flag_ + ": rank " + std::to_string(rank) + " of " +
                    std::to_string(world) + " ranks is not a rank");
  if (numSamples_ < (uint64_t)batch_ * (uint64_t)world)
    throw UserError(flag_ + ": " + std::to_string(numSamples_) +
                    " samples do not fill one global batch of " +
                    std::to_string(world) + " x " + std::to_string(batch_));
  rank_ = rank;
  world_ = world;
}

//===----------------------------------------------------------------------===//
// Prefetcher
//===----------------------------------------------------------------------===//

namespace {
uint64_t nanosSince(std::chrono::steady_clock::time_point t0) {
  return (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now() - t0)
      .count();
}
} // namespace

Prefetcher::Prefetcher(const Dataset &data, uint64_t seed, bool shuffle,
                       int64_t first, int64_t end, LoaderOptions options)
    : data_(data), seed_(seed), shuffle_(shuffle), end_(end),
      options_(std::move(options)) {
  options_.threads = std::max(1, options_.threads);
  int64_t depth = options_.depth;
  if (depth <= 0) {
    // Deep for small batches: a short step then finds batches ready even
    // when a loader thread waits a while for a core.
    uint64_t bytes = 1;
    for (const Source &s : data.sources())
      bytes += s.dstSampleBytes * (uint64_t)data.batch();
    depth = (int64_t)std::min<uint64_t>(64, (uint64_t(16) << 20) / bytes);
    depth = std::max<int64_t>(depth, std::max(2, options_.threads) + 1);
  }
  // No more slots, or threads, than steps.
  int64_t steps = std::max<int64_t>(1, end - first);
  depth_ = std::min(depth, steps);
  for (int64_t i = 0; i < depth_; ++i)
    slots_.push_back(data.makeBatch());
  slotStep_.assign((size_t)depth_, -1);
  next_ = first;
  low_ = first;
  expected_ = first;
  errorStep_ = end;
  start_ = std::chrono::steady_clock::now();
  int64_t threads = std::min<int64_t>(options_.threads, steps);
  try {
    for (int64_t t = 0; t < threads && first < end; ++t)
      threads_.emplace_back([this] { worker(); });
  } catch (const std::system_error &e) {
    stopThreads();
    fail(std::string("data loader: cannot start its threads: ") + e.what());
  }
}

Prefetcher::~Prefetcher() { stopThreads(); }

void Prefetcher::stopThreads() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  workCv_.notify_all();
  for (std::thread &t : threads_)
    t.join();
  threads_.clear();
}

Prefetcher::Order Prefetcher::order(int64_t epoch) {
  std::unique_lock<std::mutex> lock(orderMu_);
  for (;;) {
    auto it = orders_.find(epoch);
    if (it != orders_.end())
      return it->second;
    if (!computing_.count(epoch))
      break;
    orderCv_.wait(lock);
  }
  computing_.insert(epoch);
  lock.unlock();
  Order o;
  try {
    o = std::make_shared<const std::vector<uint64_t>>(
        epochOrder(data_.numSamples(), seed_, (uint64_t)epoch, shuffle_));
  } catch (...) {
    lock.lock();
    computing_.erase(epoch);
    orderCv_.notify_all();
    throw;
  }
  lock.lock();
  computing_.erase(epoch);
  orders_[epoch] = o;
  // The newest two stay (a batch in flight holds its own reference).
  while (orders_.size() > 2)
    orders_.erase(orders_.begin());
  orderCv_.notify_all();
  return o;
}

void Prefetcher::fill(int64_t step, std::vector<rt::HostTensor> &slot) {
  int64_t spe = data_.stepsPerEpoch();
  int64_t epoch = step / spe, pos = step % spe;
  Order o = order(epoch);
  data_.gather(*o, data_.batchStart(pos), slot, &options_.hook, (uint64_t)epoch);
  samples_ += (uint64_t)data_.batch();
}

void Prefetcher::worker() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    workCv_.wait(lock, [this] {
      return stop_ || (next_ < end_ && next_ < low_ + depth_ && next_ < errorStep_);
    });
    if (stop_)
      return;
    int64_t step = next_++;
    lock.unlock();
    std::string error;
    auto t0 = std::chrono::steady_clock::now();
    try {
      fill(step, slots_[(size_t)(step % depth_)]);
    } catch (const std::exception &e) {
      error = e.what();
      if (error.empty())
        error = "gathering step " + std::to_string(step) + " failed";
    }
    busyNs_ += nanosSince(t0);
    lock.lock();
    if (error.empty()) {
      slotStep_[(size_t)(step % depth_)] = step;
    } else if (step < errorStep_) {
      errorStep_ = step;
      error_ = error;
    }
    lock.unlock();
    readyCv_.notify_all();
    lock.lock();
  }
}

const std::vector<rt::HostTensor> &Prefetcher::get(int64_t step) {
  auto t0 = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  if (step != expected_ || step >= end_)
    fail("data loader: step " + std::to_string(step) + " asked for, expected " +
         std::to_string(expected_) + " (steps end at " + std::to_string(end_) + ")");
  low_ = step; // the slot of step - 1 is free
  // Wake the threads when at most half the ring ahead is claimed (always
  // when step itself is not), after unlocking: a woken thread then finds
  // the lock free.
  if (next_ - (step + 1) <= (depth_ - 1) / 2) {
    lock.unlock();
    workCv_.notify_all();
    lock.lock();
  }
  size_t slot = (size_t)(step % depth_);
  readyCv_.wait(lock, [&] { return slotStep_[slot] == step || errorStep_ <= step; });
  waitNs_ += nanosSince(t0);
  if (slotStep_[slot] != step)
    fail("data loader: " + error_);
  expected_ = step + 1;
  return slots_[slot];
}

LoaderStats Prefetcher::stats() const {
  LoaderStats st;
  st.samples = samples_.load();
  st.busySeconds = (double)busyNs_.load() * 1e-9;
  {
    std::lock_guard<std::mutex> lock(mu_);
    st.waitSeconds = (double)waitNs_ * 1e-9;
  }
  st.elapsedSeconds = (double)nanosSince(start_) * 1e-9;
  st.threads = options_.threads;
  return st;
}

} // namespace kiln::train
