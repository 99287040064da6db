//===- Data.cpp - the data loader -------------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Every size in a .npy header is checked against the mapped file before any
// sample is touched; gathering then only reads rows [0, N) of each array.
//===----------------------------------------------------------------------===//
#include "Data.h"

#include "kiln/runtime/Runtime.h"

#include <cstring>
#include <limits>

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

} // namespace

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

void Dataset::open(
    const std::vector<std::pair<std::string, std::string>> &bindings,
    const std::vector<DataSpec> &specs, int64_t batch, const std::string &flag,
    bool partialBatch) {
  flag_ = flag;
  batch_ = batch;
  sources_.clear();
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
    const std::string *path = nullptr;
    for (const auto &b : bindings)
      if (b.first == spec.name)
        path = &b.second;
    if (!path)
      fail("missing " + flag + " for input '" + spec.name + "'");
    Source src;
    src.name = spec.name;
    src.spec = spec;
    std::string where = flag + " " + spec.name + ": ";
    try {
      openNpy(*path, src.npy);
    } catch (const UserError &e) {
      fail(where + e.what());
    }
    const NpyFile &f = src.npy;
    if (f.shape.empty())
      fail(where + *path + " holds a scalar; its first axis must index samples");
    std::vector<int64_t> sample(f.shape.begin() + 1, f.shape.end());
    bool dtypeOk = f.dtype == spec.dtype || canWiden(f.dtype, spec.dtype);
    if (sample != spec.sampleShape || !dtypeOk)
      fail(where + *path + " holds " + rt::dtypeName(f.dtype) +
           " samples of shape " + shapeStr(sample) + ", the model expects " +
           typeStr(spec.dtype, spec.sampleShape));
    src.widen = f.dtype != spec.dtype;
    src.sampleElems = 1;
    for (int64_t d : sample)
      src.sampleElems *= (uint64_t)d;
    src.srcSampleBytes = src.sampleElems * rt::dtypeSize(f.dtype);
    src.dstSampleBytes = src.sampleElems * rt::dtypeSize(spec.dtype);
    sources_.push_back(std::move(src));
  }
  // Every array has the same number of samples.
  numSamples_ = 0;
  for (size_t k = 0; k < sources_.size(); ++k) {
    uint64_t n = (uint64_t)sources_[k].npy.shape[0];
    if (k == 0) {
      numSamples_ = n;
    } else if (n != numSamples_) {
      fail(flag + " " + sources_[k].name + ": " + sources_[k].npy.path + " has " +
           std::to_string(n) + " samples, " + flag + " " + sources_[0].name +
           ": " + sources_[0].npy.path + " has " + std::to_string(numSamples_));
    }
  }
  if (!sources_.empty() && partialBatch && numSamples_ == 0)
    fail(flag + " " + sources_[0].name + ": " + sources_[0].npy.path +
         " has no samples");
  if (!sources_.empty() && !partialBatch && numSamples_ < (uint64_t)batch)
    fail(flag + " " + sources_[0].name + ": " + sources_[0].npy.path + " has " +
         std::to_string(numSamples_) + " sample" + (numSamples_ == 1 ? "" : "s") +
         ", fewer than one batch of " + std::to_string(batch));
}

void Dataset::checkLabels(const std::string &name, int64_t numClasses,
                          std::optional<int64_t> ignoreIndex) const {
  for (const Source &s : sources_) {
    if (s.name != name || !isInt(s.npy.dtype))
      continue;
    uint64_t n = s.npy.dataBytes / rt::dtypeSize(s.npy.dtype);
    for (uint64_t i = 0; i < n; ++i) {
      int64_t v;
      bool fits = loadInt(s.npy.dtype, s.npy.data, i, v);
      if (fits && ((v >= 0 && v < numClasses) || (ignoreIndex && v == *ignoreIndex)))
        continue;
      std::string value;
      if (fits) {
        value = std::to_string(v);
      } else {
        uint64_t u;
        std::memcpy(&u, s.npy.data + 8 * i, 8);
        value = std::to_string(u);
      }
      fail(flag_ + " " + name + ": value " + value + " at sample " +
           std::to_string(s.sampleElems ? i / s.sampleElems : 0) +
           " is outside [0, " + std::to_string(numClasses) + ")");
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
                     std::vector<rt::HostTensor> &out) const {
  for (size_t k = 0; k < sources_.size(); ++k) {
    const Source &s = sources_[k];
    uint8_t *dst = static_cast<uint8_t *>(out[k].data());
    for (int64_t i = 0; i < batch_; ++i) {
      uint64_t idx = order[begin + (uint64_t)i];
      const uint8_t *src = s.npy.data + idx * s.srcSampleBytes;
      uint8_t *d = dst + (uint64_t)i * s.dstSampleBytes;
      if (!s.widen) {
        std::memcpy(d, src, s.srcSampleBytes);
        continue;
      }
      for (uint64_t e = 0; e < s.sampleElems; ++e) {
        int64_t v = 0;
        loadInt(s.npy.dtype, src, e, v);
        storeInt(s.spec.dtype, d, e, v);
      }
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

Prefetcher::Prefetcher(const Dataset &data, uint64_t seed, bool shuffle,
                       int64_t first, int64_t end)
    : data_(data), seed_(seed), shuffle_(shuffle), end_(end) {
  slots_[0] = data.makeBatch();
  slots_[1] = data.makeBatch();
  ready_ = first - 1;
  requested_ = first - 1;
  thread_ = std::thread([this] { worker(); });
}

Prefetcher::~Prefetcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable())
    thread_.join();
}

void Prefetcher::fill(int64_t step, std::vector<rt::HostTensor> &slot) {
  int64_t spe = data_.stepsPerEpoch();
  int64_t epoch = step / spe, pos = step % spe;
  if (epoch != orderEpoch_) {
    order_ = epochOrder(data_.numSamples(), seed_, (uint64_t)epoch, shuffle_);
    orderEpoch_ = epoch;
  }
  data_.gather(order_, data_.batchStart(pos), slot);
}

void Prefetcher::worker() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || requested_ > ready_; });
    if (stop_)
      return;
    int64_t step = requested_;
    lock.unlock();
    std::string error;
    try {
      fill(step, slots_[step % 2]);
    } catch (const std::exception &e) {
      error = e.what();
    }
    lock.lock();
    if (!error.empty())
      error_ = error;
    ready_ = step;
    cv_.notify_all();
  }
}

const std::vector<rt::HostTensor> &Prefetcher::get(int64_t step) {
  std::unique_lock<std::mutex> lock(mu_);
  if (requested_ < step) {
    requested_ = step;
    cv_.notify_all();
  }
  cv_.wait(lock, [&] { return ready_ >= step; });
  if (!error_.empty())
    fail("data loader: " + error_);
  if (step + 1 < end_) {
    requested_ = step + 1;
    cv_.notify_all();
  }
  return slots_[step % 2];
}

} // namespace kiln::train
