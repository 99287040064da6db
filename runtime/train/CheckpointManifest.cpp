//===- CheckpointManifest.cpp - a checkpoint's manifest.json ----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "CheckpointManifest.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include <set>

namespace kiln::train {

using nlohmann::json;

namespace {

/// One refusal, as the message's tail.
struct Bad {
  std::string why;
};

const json &field(const json &obj, const char *key, const std::string &where) {
  auto it = obj.find(key);
  if (it == obj.end())
    throw Bad{"lacks field '" + where + key + "'"};
  return *it;
}

const json &object(const json &obj, const char *key, const std::string &where) {
  const json &v = field(obj, key, where);
  if (!v.is_object())
    throw Bad{"field '" + where + key + "' is not an object"};
  return v;
}

int64_t integer(const json &obj, const char *key, const std::string &where,
                int64_t lo, int64_t hi) {
  const json &v = field(obj, key, where);
  // is_number_integer excludes floats: 50.5 and 5e1 are refused.
  if (!v.is_number_integer())
    throw Bad{"field '" + where + key + "' is not an integer"};
  if (v.is_number_unsigned() && v.get<uint64_t>() > (uint64_t)INT64_MAX)
    throw Bad{"field '" + where + key + "' is out of range"};
  int64_t x = v.get<int64_t>();
  if (x < lo || x > hi)
    throw Bad{"field '" + where + key + "' is " + std::to_string(x) +
              ", outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]"};
  return x;
}

uint64_t unsignedInt(const json &obj, const char *key, const std::string &where) {
  const json &v = field(obj, key, where);
  if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0))
    throw Bad{"field '" + where + key + "' is not a non-negative integer"};
  return v.get<uint64_t>();
}

std::string string(const json &obj, const char *key, const std::string &where,
                   bool nonEmpty) {
  const json &v = field(obj, key, where);
  if (!v.is_string())
    throw Bad{"field '" + where + key + "' is not a string"};
  std::string s = v.get<std::string>();
  if (nonEmpty && s.empty())
    throw Bad{"field '" + where + key + "' is empty"};
  return s;
}

bool isSha256(const std::string &s) {
  if (s.size() != 64)
    return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return false;
  return true;
}

/// The largest count a manifest may state (dims, batch, ranks): far above
/// anything real, far below overflow when multiplied by an element size.
constexpr int64_t kMaxCount = int64_t(1) << 48;

void parse(const json &m, CheckpointManifest &out) {
  if (!m.is_object())
    throw Bad{"is not a JSON object"};
  auto fmt = m.find("format");
  if (fmt == m.end() || !fmt->is_string() || *fmt != "kiln-checkpoint")
    throw Bad{"is not a kiln-checkpoint manifest (field 'format')"};
  if (integer(m, "version", "", 0, INT64_MAX) != 1)
    throw Bad{"is not version 1 (field 'version')"};
  out.step = integer(m, "step", "", 0, INT64_MAX);
  out.epoch = integer(m, "epoch", "", 0, INT64_MAX);
  out.position = integer(m, "position", "", 0, INT64_MAX);
  out.seed = unsignedInt(m, "seed", "");
  const json &sh = field(m, "shuffle", "");
  if (!sh.is_boolean())
    throw Bad{"field 'shuffle' is not a boolean"};
  out.shuffle = sh.get<bool>();
  out.model = string(m, "model", "", false);
  out.modelSha256 = string(m, "model_sha256", "", false);
  if (!out.modelSha256.empty() && !isSha256(out.modelSha256))
    throw Bad{"field 'model_sha256' is not 64 lowercase hex digits"};
  out.optimizer = string(m, "optimizer", "", true);
  if (auto ls = m.find("loss_scale"); ls != m.end()) {
    if (!ls->is_object())
      throw Bad{"field 'loss_scale' is not an object"};
    const json &sc = field(*ls, "scale", "loss_scale.");
    if (!sc.is_number() || !(sc.get<double>() > 0) || sc.get<double>() > 3.5e38)
      throw Bad{"field 'loss_scale.scale' is not a positive float32"};
    out.lossScale = sc.get<double>();
    out.growthTracker = integer(*ls, "growth_tracker", "loss_scale.", 0, INT64_MAX);
    out.skipped = integer(*ls, "skipped", "loss_scale.", 0, INT64_MAX);
    out.skippedInARow = integer(*ls, "skipped_in_a_row", "loss_scale.", 0, INT64_MAX);
    if (out.skipped > out.step || out.skippedInARow > out.skipped)
      throw Bad{"field 'loss_scale' counts more skipped steps than steps"};
  }
  const json &layout = object(m, "layout", "");
  out.ranks = integer(layout, "ranks", "layout.", 1, kMaxCount);
  out.batchSize = integer(layout, "batch_size", "layout.", 1, kMaxCount);

  const json &params = field(m, "params", "");
  if (!params.is_array())
    throw Bad{"field 'params' is not an array"};
  out.params.clear();
  std::set<std::string> seen;
  for (size_t i = 0; i < params.size(); ++i) {
    const json &p = params[i];
    std::string where = "params[" + std::to_string(i) + "].";
    if (!p.is_object())
      throw Bad{"field 'params[" + std::to_string(i) + "]' is not an object"};
    ManifestParam mp;
    mp.name = string(p, "name", where, true);
    if (!seen.insert(mp.name).second)
      throw Bad{"names parameter '" + mp.name + "' twice"};
    mp.role = string(p, "role", where, true);
    mp.dtype = string(p, "dtype", where, true);
    const json &shape = field(p, "shape", where);
    if (!shape.is_array() || shape.size() > 64)
      throw Bad{"field '" + where + "shape' is not an array of at most 64 dims"};
    for (const json &d : shape) {
      if (!d.is_number_integer() || (!d.is_number_unsigned() && d.get<int64_t>() < 0) ||
          d.get<uint64_t>() > (uint64_t)kMaxCount)
        throw Bad{"field '" + where + "shape' has a dim that is not an integer in [0, 2^48]"};
      mp.shape.push_back(d.get<int64_t>());
    }
    if (auto sh = p.find("sharded"); sh != p.end()) {
      if (!sh->is_boolean())
        throw Bad{"field '" + where + "sharded' is not a boolean"};
      mp.sharded = sh->get<bool>();
    }
    out.params.push_back(std::move(mp));
  }

  const json &files = object(m, "files", "");
  const json &t = object(files, kCheckpointTensors, "files.");
  std::string where = std::string("files.") + kCheckpointTensors + ".";
  out.tensorsBytes = unsignedInt(t, "bytes", where);
  out.tensorsSha256 = string(t, "sha256", where, true);
  if (!isSha256(out.tensorsSha256))
    throw Bad{"field '" + where + "sha256' is not 64 lowercase hex digits"};
  // ZeRO's shard files: one per rank that wrote the checkpoint, each listed
  // under files with its size and checksum.
  bool anySharded = false;
  for (const ManifestParam &mp : out.params)
    anySharded |= mp.sharded;
  out.rankState = false;
  if (auto rs = m.find("rank_state"); rs != m.end()) {
    if (!rs->is_boolean())
      throw Bad{"field 'rank_state' is not a boolean"};
    out.rankState = rs->get<bool>();
  }
  anySharded |= out.rankState; // shard files hold it
  out.shards.clear();
  if (anySharded) {
    if (out.ranks > (int64_t)files.size())
      throw Bad{"field 'files' lists fewer shard files than the " +
                std::to_string(out.ranks) + " ranks that wrote it"};
    for (int64_t r = 0; r < out.ranks; ++r) {
      std::string name = shardFileName(r, out.ranks);
      std::string w = "files." + name + ".";
      const json &f = object(files, name.c_str(), "files.");
      ManifestShardFile sf;
      sf.bytes = unsignedInt(f, "bytes", w);
      sf.sha256 = string(f, "sha256", w, true);
      if (!isSha256(sf.sha256))
        throw Bad{"field '" + w + "sha256' is not 64 lowercase hex digits"};
      out.shards.push_back(std::move(sf));
    }
  }
  // Nothing else: the tensors and, with shards, rank r's file for each of
  // the ranks that wrote it.
  for (auto it = files.begin(); it != files.end(); ++it) {
    long long r = -1, n = -1;
    bool ours = it.key() == kCheckpointTensors ||
                (anySharded && isShardFileName(it.key()) &&
                 std::sscanf(it.key().c_str(), "shard-%lld-of-%lld", &r, &n) == 2 &&
                 n == out.ranks && r < n);
    if (!ours)
      throw Bad{"field 'files' lists '" + it.key() + "', which is not a file "
                "of this checkpoint"};
  }
}

} // namespace

bool parseCheckpointManifest(std::string_view text, CheckpointManifest &out,
                             std::string &why) noexcept {
  try {
    json m = json::parse(text.begin(), text.end());
    CheckpointManifest got;
    parse(m, got);
    out = std::move(got);
    return true;
  } catch (const Bad &b) {
    why = b.why;
  } catch (const json::parse_error &) {
    why = "is not valid JSON";
  } catch (const std::exception &e) {
    why = std::string("cannot be read: ") + e.what();
  }
  return false;
}

std::string shardFileName(int64_t r, int64_t ranks) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "shard-%05lld-of-%05lld.safetensors",
                (long long)r, (long long)ranks);
  return buf;
}

bool isShardFileName(const std::string &name) {
  long long r = -1, n = -1;
  int used = 0;
  if (std::sscanf(name.c_str(), "shard-%5lld-of-%5lld.safetensors%n", &r, &n, &used) != 2 ||
      used != (int)name.size() || r < 0 || n < 1 || r >= n)
    return false;
  return shardFileName(r, n) == name;
}

std::string writeCheckpointManifest(const CheckpointManifest &m) {
  json params = json::array();
  for (const ManifestParam &p : m.params) {
    json e = {{"name", p.name}, {"role", p.role}, {"dtype", p.dtype}, {"shape", p.shape}};
    if (p.sharded)
      e["sharded"] = true;
    params.push_back(std::move(e));
  }
  json j = {
      {"format", "kiln-checkpoint"},
      {"version", 1},
      {"step", m.step},
      {"epoch", m.epoch},
      {"position", m.position},
      {"seed", m.seed},
      {"shuffle", m.shuffle},
      {"model", m.model},
      {"model_sha256", m.modelSha256},
      {"optimizer", m.optimizer},
      {"rng", {{"kind", "philox4x32-10"}, {"seed", m.seed}, {"step", m.step}}},
      {"layout", {{"ranks", m.ranks}, {"batch_size", m.batchSize}}},
      {"params", std::move(params)},
      {"files",
       {{kCheckpointTensors,
         {{"bytes", m.tensorsBytes}, {"sha256", m.tensorsSha256}}}}}};
  if (m.rankState)
    j["rank_state"] = true;
  for (size_t r = 0; r < m.shards.size(); ++r)
    j["files"][shardFileName((int64_t)r, (int64_t)m.shards.size())] = {
        {"bytes", m.shards[r].bytes}, {"sha256", m.shards[r].sha256}};
  if (m.lossScale > 0)
    j["loss_scale"] = {{"scale", m.lossScale},
                       {"growth_tracker", m.growthTracker},
                       {"skipped", m.skipped},
                       {"skipped_in_a_row", m.skippedInARow}};
  return j.dump(2) + "\n";
}

} // namespace kiln::train
