//===- ManifestSeeds.cpp - the manifest fuzzer's seeds -------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Writes corpus/manifest/: every MANIFEST given (kiln-train checkpoints'
// manifest.json) parsed and written again by writeCheckpointManifest, and
// variants of the first that reach the parser's other branches (each
// optimizer's state roles, no shuffle, no model checksum, several ranks, no
// params, a scalar param, a seed above 2^63, the largest counts).
//   kiln-manifest-seeds OUTDIR MANIFEST...
//===----------------------------------------------------------------------===//
#include "CheckpointManifest.h"

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

using namespace kiln::train;

namespace {

bool write(const std::string &dir, const std::string &name,
           const CheckpointManifest &m) {
  std::string text = writeCheckpointManifest(m), why;
  CheckpointManifest again;
  if (!parseCheckpointManifest(text, again, why)) {
    std::fprintf(stderr, "%s: the written manifest is refused: %s\n",
                 name.c_str(), why.c_str());
    return false;
  }
  std::ofstream(dir + "/" + name, std::ios::binary) << text;
  return true;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s OUTDIR MANIFEST...\n", argv[0]);
    return 2;
  }
  std::string dir = argv[1];
  CheckpointManifest first;
  bool ok = true;
  for (int i = 2; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    CheckpointManifest m;
    std::string why;
    if (!in || !parseCheckpointManifest(ss.str(), m, why)) {
      std::fprintf(stderr, "%s: %s\n", argv[i], why.c_str());
      return 1;
    }
    if (i == 2)
      first = m;
    ok &= write(dir, "real" + std::to_string(i - 2) + ".json", m);
  }
  CheckpointManifest v = first;
  v.optimizer = "adam";
  v.params.push_back({"W/exp_avg", "optimizer", "f32", {8, 5}});
  v.params.push_back({"W/exp_avg_sq", "optimizer", "f32", {8, 5}});
  v.params.push_back({"step", "state", "i64", {}});
  v.shuffle = false;
  v.modelSha256.clear();
  v.ranks = 4;
  v.seed = UINT64_MAX;
  ok &= write(dir, "adam_noshuffle.json", v);
  v = first;
  v.optimizer = "sgd";
  v.params.clear();
  v.step = v.epoch = v.position = 0;
  v.tensorsBytes = 8;
  ok &= write(dir, "sgd_noparams.json", v);
  v = first;
  v.step = v.epoch = v.position = INT64_MAX;
  v.batchSize = v.ranks = int64_t(1) << 48;
  v.params.resize(1);
  v.params[0].shape = {0, int64_t(1) << 48, 1};
  v.model = "dir/\"quoted\" \xc3\xa9.onnx";
  ok &= write(dir, "limits.json", v);
  return ok ? 0 : 1;
}
