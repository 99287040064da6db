//===- Checkpoint.cpp - saving and resuming training state ------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "Checkpoint.h"

#include "Sha256.h"
#include "Util.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <fcntl.h>
#include <map>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

namespace kiln::train {

using nlohmann::json;

namespace {

const char *kTensors = "tensors.safetensors";
const char *kManifest = "manifest.json";

/// The step of a "step-<digits>" name; false for any other name.
bool parseStepName(const std::string &name, int64_t &step) {
  if (name.size() < 6 || name.compare(0, 5, "step-") != 0 || name.size() > 5 + 18)
    return false;
  step = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9')
      return false;
    step = step * 10 + (name[i] - '0');
  }
  return true;
}

std::string stepName(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%08lld", (long long)step);
  return buf;
}

/// The step-* checkpoints in `dir`, newest first.
std::vector<std::pair<int64_t, std::string>> listCheckpoints(const std::string &dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  for (const std::string &e : listDir(dir)) {
    int64_t step;
    if (parseStepName(e, step) && isDirectory(dir + "/" + e))
      out.emplace_back(step, e);
  }
  std::sort(out.begin(), out.end(), [](const auto &a, const auto &b) {
    return a.first != b.first ? a.first > b.first : a.second > b.second;
  });
  return out;
}

/// Removes .tmp-* / .old-* directories left by processes that are gone.
void removeStale(const std::string &dir) {
  for (const std::string &e : listDir(dir)) {
    if (e.rfind(".tmp-step-", 0) != 0 && e.rfind(".old-step-", 0) != 0)
      continue;
    size_t dash = e.rfind('-');
    long pid = std::strtol(e.c_str() + dash + 1, nullptr, 10);
    bool ours = pid == (long)::getpid();
    bool gone = pid <= 0 || (::kill((pid_t)pid, 0) != 0 && errno == ESRCH);
    if (ours || gone)
      removeTree(dir + "/" + e);
  }
}

/// rename(from, to), exchanging with `to` when it exists; `displaced` then
/// names the old `to` (now at `from`).
bool renameIntoPlace(const std::string &from, const std::string &to,
                     bool &displaced) {
  displaced = false;
  if (pathExists(to)) {
    if (::syscall(SYS_renameat2, AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(),
                  RENAME_EXCHANGE) == 0) {
      displaced = true;
      return true;
    }
    // No RENAME_EXCHANGE here: move the old one aside first.
    std::string aside = from;
    aside.replace(aside.rfind("/.tmp-") + 1, 5, ".old-");
    if (::rename(to.c_str(), aside.c_str()) != 0)
      return false;
    if (::rename(from.c_str(), to.c_str()) != 0) {
      ::rename(aside.c_str(), to.c_str());
      return false;
    }
    removeTree(aside);
    return true;
  }
  return ::rename(from.c_str(), to.c_str()) == 0;
}

std::string shortSha(const std::string &s) {
  return s.size() > 12 ? s.substr(0, 12) + "…" : s;
}

} // namespace

CheckpointStore::CheckpointStore(std::string dir, int64_t keep,
                                 std::string modelSha256)
    : dir_(std::move(dir)), keep_(std::max<int64_t>(1, keep)),
      modelSha_(std::move(modelSha256)) {
  while (dir_.size() > 1 && dir_.back() == '/')
    dir_.pop_back();
}

std::string CheckpointStore::pathFor(int64_t step) const {
  return dir_ + "/" + stepName(step);
}

void CheckpointStore::prepare() const {
  std::string err;
  if (!makeDirs(dir_, err))
    fail("--checkpoint-dir " + dir_ + ": cannot create it: " + err);
  std::string probe = dir_ + "/.tmp-step-probe-" + std::to_string(::getpid());
  if (::mkdir(probe.c_str(), 0755) != 0 && errno != EEXIST)
    fail("--checkpoint-dir " + dir_ + ": not writable: " + lastError());
  std::string file = probe + "/probe";
  if (!writeFileSynced(file, "probe", err)) {
    removeTree(probe);
    fail("--checkpoint-dir " + dir_ + ": not writable: " + err);
  }
  removeTree(probe);
}

std::string CheckpointStore::save(const rt::Program &program,
                                  const Config &config,
                                  const TrainPosition &pos) const {
  std::string finalPath = pathFor(pos.step);
  std::string tmp = dir_ + "/.tmp-" + stepName(pos.step) + "-" +
                    std::to_string(::getpid());
  auto bail = [&](const std::string &why) {
    removeTree(tmp);
    fail("checkpoint " + finalPath + ": " + why);
  };
  removeStale(dir_);
  removeTree(tmp);
  if (::mkdir(tmp.c_str(), 0755) != 0)
    bail("cannot create " + tmp + ": " + lastError());

  // Every param, in plan order.
  std::vector<std::string> names = program.paramNames();
  std::vector<rt::HostTensor> values(names.size());
  std::vector<std::pair<std::string, const rt::HostTensor *>> tensors;
  json params = json::array();
  std::string err;
  for (size_t k = 0; k < names.size(); ++k) {
    if (!program.getParam(names[k], values[k], err))
      bail(err);
    tensors.emplace_back(names[k], &values[k]);
    params.push_back({{"name", names[k]},
                      {"role", program.paramRole(names[k])},
                      {"dtype", rt::dtypeName(values[k].dtype())},
                      {"shape", values[k].shape()}});
  }
  std::string tensorsPath = tmp + "/" + kTensors;
  if (!rt::writeSafetensors(tensorsPath, tensors, err))
    bail(err);
  values.clear();
  std::string sha;
  uint64_t bytes = 0;
  if (!sha256File(tensorsPath, sha, bytes, err))
    bail(err);

  json manifest = {
      {"format", "kiln-checkpoint"},
      {"version", 1},
      {"step", pos.step},
      {"epoch", pos.epoch},
      {"position", pos.position},
      {"seed", pos.seed},
      {"shuffle", pos.shuffle},
      {"model", config.model},
      {"model_sha256", modelSha_},
      {"optimizer", config.optimizer},
      {"rng", {{"kind", "philox4x32-10"}, {"seed", pos.seed}, {"step", pos.step}}},
      {"layout", {{"ranks", 1}, {"batch_size", config.batchSize}}},
      {"params", std::move(params)},
      {"files", {{kTensors, {{"bytes", bytes}, {"sha256", sha}}}}}};
  if (!writeFileSynced(tmp + "/" + kManifest, manifest.dump(2) + "\n", err))
    bail(err);
  if (!fsyncPath(tmp, err))
    bail(err);
  bool displaced = false;
  if (!renameIntoPlace(tmp, finalPath, displaced))
    bail("cannot rename " + tmp + " into place: " + lastError());
  if (displaced)
    removeTree(tmp); // the previous checkpoint of this step
  if (!fsyncPath(dir_, err))
    fail("checkpoint " + finalPath + ": " + err);

  // Keep the newest K, always including this one.
  int64_t kept = 1;
  for (const auto &[step, name] : listCheckpoints(dir_)) {
    if (step == pos.step)
      continue;
    if (kept < keep_) {
      ++kept;
      continue;
    }
    removeTree(dir_ + "/" + name);
  }
  fsyncPath(dir_, err);
  return finalPath;
}

bool CheckpointStore::resume(
    rt::Program &program, const Config &config, TrainPosition &pos,
    std::string &loadedPath,
    const std::function<void(const std::string &)> &note) const {
  auto candidates = listCheckpoints(dir_);
  if (candidates.empty())
    return false;
  std::vector<std::pair<std::string, std::string>> damaged; // path, reason
  std::vector<std::string> names = program.paramNames();
  for (const auto &[stepNum, name] : candidates) {
    std::string path = dir_ + "/" + name;
    std::string why;
    TrainPosition p;
    std::vector<std::pair<std::string, rt::HostTensor>> tensors;
    do {
      // The manifest.
      MappedFile mf;
      std::string err;
      if (!mf.open(path + "/" + kManifest, err)) {
        why = std::string(kManifest) + " is missing or unreadable";
        break;
      }
      json m;
      try {
        m = json::parse(mf.data(), mf.data() + mf.size());
      } catch (const json::exception &) {
        why = std::string(kManifest) + " does not parse";
        break;
      }
      try {
        if (!m.is_object() || m.value("format", "") != "kiln-checkpoint" ||
            m.value("version", 0) != 1) {
          why = std::string(kManifest) + " is not a version 1 kiln-checkpoint";
          break;
        }
        std::string sha = m.value("model_sha256", "");
        if (!modelSha_.empty() && sha != modelSha_)
          fail("--resume: checkpoint " + path + " was written for another model "
               "(model_sha256 " + shortSha(sha) + ", this executable's model is " +
               shortSha(modelSha_) + ")");
        int64_t batch = m.at("layout").at("batch_size").get<int64_t>();
        if (batch != config.batchSize)
          fail("--resume: checkpoint " + path + " was written with batch size " +
               std::to_string(batch) + ", this executable trains with " +
               std::to_string(config.batchSize));
        p.step = m.at("step").get<int64_t>();
        p.epoch = m.at("epoch").get<int64_t>();
        p.position = m.at("position").get<int64_t>();
        p.seed = m.at("seed").get<uint64_t>();
        p.shuffle = m.value("shuffle", true);
        if (p.step != stepNum) {
          why = std::string(kManifest) + " says step " + std::to_string(p.step);
          break;
        }
        if (p.step < 0 || p.epoch < 0 || p.position < 0) {
          why = std::string(kManifest) + " has a negative position";
          break;
        }
        const json &f = m.at("files").at(kTensors);
        uint64_t wantBytes = f.at("bytes").get<uint64_t>();
        std::string wantSha = f.at("sha256").get<std::string>();
        std::string haveSha;
        uint64_t haveBytes = 0;
        if (!sha256File(path + "/" + kTensors, haveSha, haveBytes, err)) {
          why = std::string(kTensors) + " is missing or unreadable";
          break;
        }
        if (haveBytes != wantBytes) {
          why = std::string(kTensors) + " has " + std::to_string(haveBytes) +
                " bytes, the manifest says " + std::to_string(wantBytes);
          break;
        }
        if (haveSha != wantSha) {
          why = std::string(kTensors) + " checksum mismatch";
          break;
        }
      } catch (const json::exception &) {
        why = std::string(kManifest) + " lacks a field or has a mistyped one";
        break;
      }
      // The tensors: one per param, of the param's type.
      if (!rt::readSafetensors(path + "/" + kTensors, tensors, err)) {
        why = err;
        break;
      }
      std::map<std::string, const rt::HostTensor *> byName;
      for (const auto &kv : tensors)
        byName[kv.first] = &kv.second;
      for (const std::string &n : names) {
        auto it = byName.find(n);
        rt::TensorDesc want;
        program.getParamDesc(n, want);
        if (it == byName.end()) {
          why = std::string(kTensors) + " lacks parameter '" + n + "'";
          break;
        }
        if (it->second->desc() != want) {
          why = std::string(kTensors) + ": parameter '" + n + "' is " +
                it->second->desc().str() + ", the model's is " + want.str();
          break;
        }
      }
    } while (false);

    if (!why.empty()) {
      damaged.emplace_back(path, why);
      continue;
    }
    std::string err;
    std::map<std::string, const rt::HostTensor *> byName;
    for (const auto &kv : tensors)
      byName[kv.first] = &kv.second;
    for (const std::string &n : names)
      if (!program.setParam(n, *byName[n], err))
        fail("--resume: checkpoint " + path + ": " + err);
    for (const auto &[dpath, dwhy] : damaged)
      note("checkpoint " + dpath + ": " + dwhy + "; using " + path);
    pos = p;
    loadedPath = path;
    return true;
  }
  for (size_t k = 1; k < damaged.size(); ++k)
    note("checkpoint " + damaged[k].first + ": " + damaged[k].second);
  fail("--resume: no usable checkpoint in " + dir_ + " (newest: " +
       damaged[0].first + ": " + damaged[0].second + ")");
}

} // namespace kiln::train
