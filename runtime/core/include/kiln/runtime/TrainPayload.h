//===- TrainPayload.h - the training executable's payload -------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// kiln-compile appends to a copy of kiln-train: the train plan, the config
// JSON, the ONNX model and the eval plan, each starting at a multiple of 64
// bytes, then a trailer (docs/Training.md, "The executable"):
//   "KILNTRN1", then eight u64 LE: plan offset, plan size, config offset,
//   config size, model offset, model size, eval offset, eval size (0: none),
//   offsets from the start of the file (72 bytes); or, when the run switches
//   to a second plan (--prune l1-channel --prune-at S), "KILNTRN2" and ten
//   u64: those four parts and "then", a whole payload of its own (parts and
//   trailer, offsets from its start) that the run continues on (88 bytes).
// Header-only and free of MLIR: the one writer (kiln-compile) and the one
// parser (runtime/train/Payload.cpp) of the trailer both include it.
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_TRAINPAYLOAD_H
#define KILN_RUNTIME_TRAINPAYLOAD_H

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace kiln::rt {

constexpr char kTrainPayloadMagic[8] = {'K', 'I', 'L', 'N', 'T', 'R', 'N', '1'};
constexpr char kTrainPayloadMagic2[8] = {'K', 'I', 'L', 'N', 'T', 'R', 'N', '2'};
/// The parts in trailer order; Then only in a KILNTRN2 trailer.
enum class TrainPart { Plan, Config, Model, Eval, Then };
constexpr int kNumTrainParts = 5;
/// The magic and an (offset, size) pair per part: four parts (KILNTRN1)
/// or five (KILNTRN2).
constexpr size_t kTrainTrailerBytes = 8 + 16 * 4;
constexpr size_t kTrainTrailer2Bytes = 8 + 16 * 5;
static_assert(kTrainTrailerBytes == 72, "the KILNTRN1 trailer is 72 bytes");
static_assert(kTrainTrailer2Bytes == 88, "the KILNTRN2 trailer is 88 bytes");
/// Each part starts at a multiple of this (the plans are mapped in place).
constexpr size_t kTrainPartAlignment = 64;

/// How errors name a part.
constexpr const char *trainPartName(TrainPart p) {
  switch (p) {
  case TrainPart::Plan: return "plan";
  case TrainPart::Config: return "config";
  case TrainPart::Model: return "model";
  case TrainPart::Eval: return "eval plan";
  case TrainPart::Then: return "plan after --prune-at";
  }
  return "?";
}

/// The parts of a payload, indexed by TrainPart; an empty view is a part of
/// size 0 (only the eval plan and "then" may be absent).
struct TrainPayloadParts {
  std::string_view part[kNumTrainParts];
  std::string_view &operator[](TrainPart p) { return part[int(p)]; }
  std::string_view operator[](TrainPart p) const { return part[int(p)]; }
};

/// Appends `parts` and the trailer to `file` (a copy of the executable, or
/// an empty string for a nested payload): KILNTRN1 without a Then part,
/// KILNTRN2 with one.
inline void appendTrainPayload(std::string &file,
                               const TrainPayloadParts &parts) {
  const int n = parts[TrainPart::Then].empty() ? 4 : 5;
  uint64_t where[2 * kNumTrainParts];
  for (int k = 0; k < n; ++k) {
    while (file.size() % kTrainPartAlignment)
      file.push_back('\0');
    where[2 * k] = file.size();
    where[2 * k + 1] = parts.part[k].size();
    file.append(parts.part[k].data(), parts.part[k].size());
  }
  file.append(n == 4 ? kTrainPayloadMagic : kTrainPayloadMagic2, 8);
  for (int k = 0; k < 2 * n; ++k)
    for (int i = 0; i < 8; ++i)
      file.push_back(char((where[k] >> (8 * i)) & 0xff));
}

/// The message of a file without a (valid) payload.
constexpr const char *kNoTrainPayload =
    "not a Kiln training executable (no payload)";

/// Splits `size` bytes ending in a trailer into their parts, checking that
/// every part lies before the trailer and that the plan and config are not
/// empty. On failure `err` is kNoTrainPayload, with ": the PART [off, +n)
/// runs past the trailer at N" or ": the PART is empty" when the trailer is
/// there but damaged.
inline bool parseTrainPayload(const void *data, size_t size,
                              TrainPayloadParts &out, std::string &err) {
  const unsigned char *p = static_cast<const unsigned char *>(data);
  int parts = 0;
  size_t trailer = 0;
  if (p && size >= kTrainTrailer2Bytes &&
      std::memcmp(p + size - kTrainTrailer2Bytes, kTrainPayloadMagic2, 8) == 0) {
    parts = 5;
    trailer = kTrainTrailer2Bytes;
  } else if (p && size >= kTrainTrailerBytes &&
             std::memcmp(p + size - kTrainTrailerBytes, kTrainPayloadMagic, 8) == 0) {
    parts = 4;
    trailer = kTrainTrailerBytes;
  } else {
    err = kNoTrainPayload;
    return false;
  }
  out = TrainPayloadParts();
  const unsigned char *t = p + size - trailer + 8;
  auto getU64 = [](const unsigned char *q) {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i)
      v |= (uint64_t)q[i] << (8 * i);
    return v;
  };
  uint64_t limit = size - trailer;
  for (int k = 0; k < parts; ++k) {
    uint64_t off = getU64(t + 16 * k), n = getU64(t + 16 * k + 8);
    if (n == 0) {
      out.part[k] = std::string_view();
      continue;
    }
    if (off > limit || n > limit - off) {
      err = std::string(kNoTrainPayload) + ": the " +
            trainPartName(TrainPart(k)) + " [" + std::to_string(off) + ", +" +
            std::to_string(n) + ") runs past the trailer at " +
            std::to_string(limit);
      return false;
    }
    out.part[k] = std::string_view(reinterpret_cast<const char *>(p) + off, n);
  }
  for (TrainPart k : {TrainPart::Plan, TrainPart::Config})
    if (out[k].empty()) {
      err = std::string(kNoTrainPayload) + ": the " + trainPartName(k) +
            " is empty";
      return false;
    }
  return true;
}

//===----------------------------------------------------------------------===//
// A pipeline's plans
//===----------------------------------------------------------------------===//
//
// With --mesh pp=S the payload's plan part holds one plan per pipeline
// stage: "KILNPIPE", a u64 LE count S, then S pairs of u64 LE (offset, size)
// from the start of the part, then the plans, each at a multiple of 64
// bytes. Rank r runs plan (r's pp index).

constexpr char kPipelinePlansMagic[8] = {'K', 'I', 'L', 'N', 'P', 'I', 'P', 'E'};

/// Whether `part` (a payload's plan part) holds a pipeline's plans.
inline bool isPipelinePlans(std::string_view part) {
  return part.size() >= 8 && std::memcmp(part.data(), kPipelinePlansMagic, 8) == 0;
}

/// The plan part of S stage plans.
inline std::string pipelinePlans(const std::string *plans, size_t count) {
  auto putU64 = [](std::string &out, size_t at, uint64_t v) {
    for (int i = 0; i < 8; ++i)
      out[at + i] = char((v >> (8 * i)) & 0xff);
  };
  std::string out(kPipelinePlansMagic, 8);
  out.resize(16 + 16 * count, '\0');
  putU64(out, 8, count);
  for (size_t k = 0; k < count; ++k) {
    while (out.size() % kTrainPartAlignment)
      out.push_back('\0');
    putU64(out, 16 + 16 * k, out.size());
    putU64(out, 24 + 16 * k, plans[k].size());
    out.append(plans[k]);
  }
  return out;
}

/// Plan `index` of a pipeline's plan part, bounds-checked: false and `err`
/// on a damaged part or an index beyond its count (`count` is set when the
/// header is readable).
inline bool pipelinePlan(std::string_view part, uint64_t index,
                         std::string_view &plan, uint64_t &count,
                         std::string &err) {
  auto getU64 = [&](size_t at) {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i)
      v |= uint64_t(static_cast<unsigned char>(part[at + i])) << (8 * i);
    return v;
  };
  count = 0;
  if (!isPipelinePlans(part) || part.size() < 16) {
    err = "the plan part does not hold a pipeline's plans";
    return false;
  }
  count = getU64(8);
  if (count == 0 || count > (uint64_t(1) << 20) ||
      16 + 16 * count > part.size()) {
    err = "the pipeline's plan table (" + std::to_string(count) +
          " plans) does not fit in its " + std::to_string(part.size()) +
          "-byte part";
    return false;
  }
  if (index >= count) {
    err = "pipeline stage " + std::to_string(index) + " has no plan (the "
          "payload holds " + std::to_string(count) + ")";
    return false;
  }
  const uint64_t off = getU64(16 + 16 * index), n = getU64(24 + 16 * index);
  if (off > part.size() || n > part.size() - off || n == 0) {
    err = "the plan of pipeline stage " + std::to_string(index) + " [" +
          std::to_string(off) + ", +" + std::to_string(n) +
          ") lies outside its " + std::to_string(part.size()) + "-byte part";
    return false;
  }
  plan = part.substr(off, n);
  return true;
}

} // namespace kiln::rt

#endif // KILN_RUNTIME_TRAINPAYLOAD_H
