//===- ManifestFuzzer.cpp - libFuzzer target: checkpoint manifests -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// parseCheckpointManifest (kiln-train, train/CheckpointManifest.h) on
// arbitrary text: it accepts or refuses with a one-phrase reason, never
// crashes. What it accepts must survive a round trip: written back with
// writeCheckpointManifest and parsed again, every field is the same.
// Seeds: corpus/manifest/ (scripts/fuzz.sh manifest).
//===----------------------------------------------------------------------===//
#include "CheckpointManifest.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

using kiln::train::CheckpointManifest;
using kiln::train::ManifestParam;

namespace {

[[noreturn]] void bug(const std::string &what) {
  std::fprintf(stderr, "manifest round trip: %s\n", what.c_str());
  std::abort();
}

void checkWhy(const std::string &why, const char *what) {
  if (why.empty() || why.find('\n') != std::string::npos)
    bug(std::string(what) + ": bad reason '" + why + "'");
}

#define SAME(field)                                                            \
  if (!(a.field == b.field))                                                   \
    bug("field '" #field "' differs after writing and parsing again");

void compare(const CheckpointManifest &a, const CheckpointManifest &b) {
  SAME(step) SAME(epoch) SAME(position) SAME(seed) SAME(shuffle)
  SAME(model) SAME(modelSha256) SAME(optimizer) SAME(batchSize) SAME(ranks)
  SAME(tensorsBytes) SAME(tensorsSha256)
  if (a.params.size() != b.params.size())
    bug("the number of params differs after writing and parsing again");
  for (size_t i = 0; i < a.params.size(); ++i) {
    const ManifestParam &p = a.params[i], &q = b.params[i];
    if (p.name != q.name || p.role != q.role || p.dtype != q.dtype ||
        p.shape != q.shape)
      bug("param " + std::to_string(i) + " differs after writing and parsing again");
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  CheckpointManifest m;
  std::string why;
  if (!kiln::train::parseCheckpointManifest(text, m, why)) {
    checkWhy(why, "parse");
    return 0;
  }
  std::string written = kiln::train::writeCheckpointManifest(m);
  CheckpointManifest again;
  if (!kiln::train::parseCheckpointManifest(written, again, why))
    bug("the written manifest is refused: " + why + "\n" + written);
  compare(m, again);
  // Writing is a function of the fields: a second write is byte-identical.
  if (kiln::train::writeCheckpointManifest(again) != written)
    bug("writing the re-parsed manifest gives different text");
  return 0;
}
