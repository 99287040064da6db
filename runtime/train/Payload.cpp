//===- Payload.cpp - the parts kiln-compile appends -------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "Payload.h"

#include <cstdlib>
#include <cstring>

namespace kiln::train {

namespace {

const char *kNoPayload = "not a Kiln training executable (no payload)";

uint64_t getU64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v |= (uint64_t)p[i] << (8 * i);
  return v;
}

} // namespace

bool parsePayload(const uint8_t *data, size_t size, Payload &out,
                  std::string &err) {
  if (!data || size < kTrailerBytes ||
      std::memcmp(data + size - kTrailerBytes, kTrailerMagic, 8) != 0) {
    err = kNoPayload;
    return false;
  }
  const uint8_t *t = data + size - kTrailerBytes + 8;
  uint64_t limit = size - kTrailerBytes;
  static const char *kNames[4] = {"plan", "config", "model", "eval plan"};
  std::string_view *parts[4] = {&out.plan, &out.config, &out.model, &out.eval};
  for (int k = 0; k < 4; ++k) {
    uint64_t off = getU64(t + 16 * k), n = getU64(t + 16 * k + 8);
    if (n == 0) {
      *parts[k] = std::string_view();
      continue;
    }
    if (off > limit || n > limit - off) {
      err = std::string(kNoPayload) + ": the " + kNames[k] + " [" +
            std::to_string(off) + ", +" + std::to_string(n) +
            ") runs past the trailer at " + std::to_string(limit);
      return false;
    }
    *parts[k] = std::string_view(reinterpret_cast<const char *>(data) + off, n);
  }
  if (out.plan.empty() || out.config.empty()) {
    err = std::string(kNoPayload) + ": the " +
          (out.plan.empty() ? "plan" : "config") + " is empty";
    return false;
  }
  return true;
}

bool loadPayload(Payload &out, std::string &err) {
  const char *env = std::getenv("KILN_TRAIN_PAYLOAD");
  std::string path = env && *env ? env : "/proc/self/exe";
  std::string prefix = env && *env ? "KILN_TRAIN_PAYLOAD=" + path + ": " : "";
  out.source = path;
  std::string why;
  if (!out.file.open(path, why)) {
    err = prefix + kNoPayload + " (" + why + ")";
    return false;
  }
  if (!parsePayload(out.file.data(), out.file.size(), out, err)) {
    err = prefix + err;
    return false;
  }
  return true;
}

} // namespace kiln::train
