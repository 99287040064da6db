//===- NpyFuzzer.cpp - libFuzzer target: the tensor file readers -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The same bytes go to parseNpy, readTensorBytes (.npy or ONNX TensorProto,
// by content) and readSafetensorsBytes. Each either succeeds or refuses with
// a one-line message starting with the name it was given; when both .npy
// readers succeed they must agree on the type and shape, and the layout must
// lie inside the bytes. Seeds: corpus/npy/ (scripts/fuzz.sh npy).
//===----------------------------------------------------------------------===//
#include "kiln/runtime/Runtime.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

using namespace kiln::rt;

namespace {

const std::string kName = "fuzz.bin";

[[noreturn]] void bug(const char *what, const std::string &detail) {
  std::fprintf(stderr, "%s: %s\n", what, detail.c_str());
  std::abort();
}

void checkMessage(const std::string &err, const char *what) {
  if (err.compare(0, kName.size() + 2, kName + ": ") != 0 ||
      err.size() == kName.size() + 2 || err.find('\n') != std::string::npos)
    bug(what, "bad error message: '" + err + "'");
}

/// Reads every byte, so that ASan sees a tensor whose storage is short.
uint64_t touch(const HostTensor &t) {
  const uint8_t *p = static_cast<const uint8_t *>(t.data());
  uint64_t sum = 0;
  for (size_t i = 0; i < t.bytes(); ++i)
    sum += p[i];
  return sum;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string err;
  NpyLayout layout;
  bool npyOk = parseNpy(data, size, kName, layout, err);
  if (!npyOk) {
    checkMessage(err, "parseNpy");
  } else if (layout.dataOffset > size ||
             layout.dataBytes != size - layout.dataOffset) {
    bug("parseNpy", "data range outside the file");
  }

  HostTensor t;
  if (readTensorBytes(data, size, kName, t, err)) {
    touch(t);
    if (npyOk && (t.dtype() != layout.dtype || t.shape() != layout.shape ||
                  t.bytes() != layout.dataBytes ||
                  (t.bytes() && std::memcmp(t.data(), data + layout.dataOffset,
                                            t.bytes()) != 0)))
      bug("readTensorBytes", "disagrees with parseNpy");
  } else {
    checkMessage(err, "readTensorBytes");
  }

  std::vector<std::pair<std::string, HostTensor>> st;
  if (readSafetensorsBytes(data, size, kName, st, err)) {
    for (const auto &kv : st)
      touch(kv.second);
  } else {
    checkMessage(err, "readSafetensorsBytes");
  }
  return 0;
}
