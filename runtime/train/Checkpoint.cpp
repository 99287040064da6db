//===- Checkpoint.cpp - saving and resuming training state ------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "Checkpoint.h"

#include "CheckpointManifest.h"
#include "Sha256.h"
#include "Util.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <fcntl.h>
#include <map>
#include <set>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

namespace kiln::train {

using nlohmann::json;

namespace {

const char *kTensors = kCheckpointTensors;
const char *kManifest = kCheckpointManifest;

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
    struct stat st; // a real directory: a symlink is never followed
    if (parseStepName(e, step) && ::lstat((dir + "/" + e).c_str(), &st) == 0 &&
        S_ISDIR(st.st_mode))
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

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string shortSha(const std::string &s) {
  return s.size() > 12 ? s.substr(0, 12) + "…" : s;
}

/// Reads PATH/manifest.json; false with `why` ("manifest.json ...").
bool readManifest(const std::string &path, CheckpointManifest &m,
                  std::string &why) {
  MappedFile mf;
  std::string err;
  if (!mf.open(path + "/" + kManifest, err)) {
    why = std::string(kManifest) + " is missing or unreadable";
    return false;
  }
  std::string_view text(reinterpret_cast<const char *>(mf.data()), mf.size());
  if (!parseCheckpointManifest(text, m, why)) {
    why = std::string(kManifest) + " " + why;
    return false;
  }
  return true;
}

} // namespace

CheckpointStore::CheckpointStore(std::string dir, int64_t keep,
                                 std::string modelSha256, Notify warn)
    : dir_(std::move(dir)), keep_(std::max<int64_t>(1, keep)),
      modelSha_(std::move(modelSha256)), warn_(std::move(warn)) {
  while (dir_.size() > 1 && dir_.back() == '/')
    dir_.pop_back();
}

rt::HostTensor blockOf(const rt::HostTensor &whole, const rt::TensorDesc &block,
                       int rank) {
  rt::HostTensor out(block);
  const size_t es = rt::dtypeSize(block.dtype);
  const size_t k = (size_t)block.numel(), n = (size_t)whole.desc().numel();
  const size_t first = (size_t)rank * k;
  std::memset(out.data(), 0, out.bytes());
  if (first < n)
    std::memcpy(out.data(), static_cast<const char *>(whole.data()) + first * es,
                std::min(k, n - first) * es);
  return out;
}

/// Elements [first, first + want.numel()) of a tensor of `shape` stored as
/// equal blocks of its flattened, zero-padded form (`blocks`, in rank
/// order), as a tensor of `want`; zeros past the tensor's end.
rt::HostTensor rangeOfBlocks(const std::vector<const rt::HostTensor *> &blocks,
                             const std::vector<int64_t> &shape, int64_t first,
                             const rt::TensorDesc &want) {
  rt::HostTensor out(want);
  std::memset(out.data(), 0, out.bytes());
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  if (blocks.empty())
    return out;
  const int64_t k = blocks[0]->desc().numel();
  const size_t es = rt::dtypeSize(want.dtype);
  int64_t count = want.numel(), end = std::min(first + count, n);
  for (int64_t i = first; i < end;) {
    int64_t b = i / k, off = i % k, take = std::min(k - off, end - i);
    std::memcpy(static_cast<char *>(out.data()) + (i - first) * es,
                static_cast<const char *>(blocks[b]->data()) + off * es,
                (size_t)take * es);
    i += take;
  }
  return out;
}

rt::HostTensor wholeOf(const void *blocks, rt::DType dtype,
                       const std::vector<int64_t> &shape) {
  rt::HostTensor out(rt::TensorDesc{dtype, shape});
  if (out.bytes())
    std::memcpy(out.data(), blocks, out.bytes());
  return out;
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

bool CheckpointStore::isOwnCheckpoint(const std::string &path,
                                      std::string &why,
                                      bool damagedIsOwn) const {
  std::vector<std::string> shardFiles;
  for (const std::string &e : listDir(path)) {
    if (isShardFileName(e)) {
      shardFiles.push_back(e);
      continue;
    }
    if (e != kTensors && e != kManifest) {
      why = "it holds '" + e + "', which kiln does not write";
      return false;
    }
  }
  CheckpointManifest m;
  if (!readManifest(path, m, why))
    return damagedIsOwn;
  // Shard files are ours only where the manifest lists them.
  for (const std::string &e : shardFiles) {
    bool listed = false;
    for (size_t r = 0; r < m.shards.size(); ++r)
      listed |= e == shardFileName((int64_t)r, (int64_t)m.shards.size());
    if (!listed) {
      why = "it holds '" + e + "', which its manifest does not list";
      return false;
    }
  }
  if (m.modelSha256 != modelSha_) {
    why = "it was written for another model (model_sha256 " +
          shortSha(m.modelSha256) + ")";
    return false;
  }
  return true;
}

void CheckpointStore::warnOnce(const std::string &path,
                               const std::string &line) const {
  if (warn_ && warned_.insert(path).second)
    warn_(line);
}

void CheckpointStore::removeCheckpoint(const std::string &path) const {
  // The tensors first: a crash in between leaves a manifest whose tensors
  // are missing, which resume skips as damaged and the next pruning removes.
  ::unlink((path + "/" + kTensors).c_str());
  for (const std::string &e : listDir(path))
    if (isShardFileName(e))
      ::unlink((path + "/" + e).c_str());
  ::unlink((path + "/" + kManifest).c_str());
  if (::rmdir(path.c_str()) != 0)
    warnOnce(path, "warning: checkpoint retention: left " + path + ": " +
                       lastError());
}

std::string CheckpointStore::save(const rt::Program &program,
                                  const Config &config, const TrainPosition &pos,
                                  const CheckpointRanks *ranks,
                                  const std::map<std::string, rt::HostTensor> *whole,
                                  const std::map<std::string, std::string> *otherStages) const {
  const int rank = ranks ? ranks->rank : 0;
  const int nranks = ranks ? ranks->ranks : 1;
  // ZeRO's shard files: over a 1-axis mesh (over several, the caller
  // gathers the sharded tensors whole).
  const bool sharded = !config.sharded.empty() && !config.meshBeyondDp();
  if (sharded && (!ranks || nranks != config.dp))
    fail("checkpoint: the sharded (ZeRO) parameters need every rank to write "
         "its shard");
  const bool rankState = ranks && !ranks->rankState.empty();
  // Shard files: ZeRO's blocks and each rank's own state.
  const bool perRank = sharded || rankState;
  const bool lead = rank == 0;
  std::string finalPath = pathFor(pos.step);
  // Every rank writes into rank 0's temporary directory.
  std::string tmp = dir_ + "/.tmp-" + stepName(pos.step) + "-" +
                    std::to_string(::getpid());
  auto bail = [&](const std::string &why) {
    removeTree(tmp);
    fail("checkpoint " + finalPath + ": " + why);
  };
  // What is at the step's name is replaced only when it is this model's
  // checkpoint, or a damaged one holding only the files kiln writes (which
  // resume skipped to get here); never a user's files or another model's
  // checkpoint (issue 21: never destroy what is not ours).
  std::string why;
  if (lead) {
    if (pathExists(finalPath) &&
        !isOwnCheckpoint(finalPath, why, /*damagedIsOwn=*/true))
      fail("checkpoint " + finalPath + " exists and is not a checkpoint of this "
           "model (" + why + "); move it away or choose another --checkpoint-dir");
    removeStale(dir_);
    removeTree(tmp);
    if (::mkdir(tmp.c_str(), 0755) != 0)
      bail("cannot create " + tmp + ": " + lastError());
  }
  if (perRank) {
    // Rank 0's directory, to every rank (the gather is also the barrier
    // after its creation). A failure above ended the job.
    std::string name = tmp;
    name.resize(4096, '\0');
    tmp = std::string(ranks->allGather(name)[0].c_str());
  }

  std::vector<std::string> names = program.paramNames();
  std::string err;
  CheckpointManifest manifest;
  // This rank's shard: its blocks of the sharded parameters, its state.
  if (perRank) {
    std::vector<rt::HostTensor> blocks;
    std::vector<std::pair<std::string, const rt::HostTensor *>> tensors;
    blocks.reserve(names.size());
    for (const std::string &n : names) {
      if (!sharded || !config.sharded.count(n))
        continue;
      blocks.emplace_back();
      if (!program.getParam(n, blocks.back(), err))
        bail(err);
      tensors.emplace_back(n, &blocks.back());
    }
    std::vector<std::string> stateNames;
    for (const auto &[n, t] : ranks->rankState)
      stateNames.push_back(kRankStatePrefix + n);
    for (size_t i = 0; i < stateNames.size(); ++i)
      tensors.emplace_back(stateNames[i], &ranks->rankState[i].second);
    std::string shard = tmp + "/" + shardFileName(rank, nranks);
    ManifestShardFile mine;
    std::string record;
    if (!rt::writeSafetensors(shard, tensors, err) ||
        !sha256File(shard, mine.sha256, mine.bytes, err))
      record = "error " + err;
    else
      record = std::to_string(mine.bytes) + " " + mine.sha256;
    record.resize(1024, '\0');
    std::vector<std::string> all = ranks->allGather(record);
    for (int r = 0; r < nranks; ++r) {
      std::string rec(all[r].c_str());
      if (rec.rfind("error ", 0) == 0)
        bail("rank " + std::to_string(r) + "'s shard: " + rec.substr(6));
      ManifestShardFile f;
      size_t sp = rec.find(' ');
      f.bytes = std::strtoull(rec.c_str(), nullptr, 10);
      f.sha256 = sp == std::string::npos ? "" : rec.substr(sp + 1);
      manifest.shards.push_back(f);
    }
    if (!lead)
      return finalPath; // rank 0 completes it (or ends the job)
  }

  // Rank 0: every replicated param, in plan order; the manifest lists all.
  std::vector<rt::HostTensor> values(names.size());
  std::vector<std::pair<std::string, const rt::HostTensor *>> tensors;
  for (size_t k = 0; k < names.size(); ++k) {
    auto sh = config.sharded.find(names[k]);
    if (sh != config.sharded.end() && sharded) {
      rt::TensorDesc d;
      program.getParamDesc(names[k], d);
      manifest.params.push_back({names[k], program.paramRole(names[k]),
                                 rt::dtypeName(d.dtype), sh->second, true});
      continue;
    }
    if (config.split.count(names[k]) || config.sharded.count(names[k])) {
      // Tensor parallelism (or ZeRO over several axes): the whole tensor,
      // gathered by the caller.
      auto w = whole ? whole->find(names[k]) : decltype(whole->end())();
      if (!whole || w == whole->end())
        bail("the split parameter '" + names[k] + "' was not gathered");
      values[k] = w->second;
    } else if (!program.getParam(names[k], values[k], err)) {
      bail(err);
    }
    tensors.emplace_back(names[k], &values[k]);
    manifest.params.push_back({names[k], program.paramRole(names[k]),
                               rt::dtypeName(values[k].dtype()),
                               values[k].shape(), false});
  }
  // A pipeline: the other stages' parameters, gathered on rank 0.
  if (otherStages) {
    for (const auto &[name, role] : *otherStages) {
      if (!program.paramRole(name).empty()) // this stage's own, written above
        continue;
      auto w = whole ? whole->find(name) : decltype(whole->end())();
      if (!whole || w == whole->end())
        bail("stage parameter '" + name + "' was not gathered");
      tensors.emplace_back(name, &w->second);
      manifest.params.push_back({name, role, rt::dtypeName(w->second.dtype()),
                                 w->second.shape(), false});
    }
  }
  std::string tensorsPath = tmp + "/" + kTensors;
  if (!rt::writeSafetensors(tensorsPath, tensors, err))
    bail(err);
  values.clear();
  if (!sha256File(tensorsPath, manifest.tensorsSha256, manifest.tensorsBytes, err))
    bail(err);

  manifest.step = pos.step;
  manifest.epoch = pos.epoch;
  manifest.position = pos.position;
  manifest.seed = pos.seed;
  manifest.shuffle = pos.shuffle;
  manifest.lossScale = pos.lossScale.scale;
  manifest.growthTracker = pos.lossScale.growthTracker;
  manifest.skipped = pos.lossScale.skipped;
  manifest.skippedInARow = pos.lossScale.skippedInARow;
  manifest.model = config.model;
  manifest.modelSha256 = modelSha_;
  manifest.optimizer = config.optimizer;
  // The global batch and the ranks that trained: data parallelism
  // replicates every parameter, so any number of ranks resumes it.
  manifest.ranks = config.ranks();
  manifest.batchSize = config.batchSize * config.dataRanks();
  manifest.rankState = rankState;
  if (!writeFileSynced(tmp + "/" + kManifest, writeCheckpointManifest(manifest),
                       err))
    bail(err);
  if (!fsyncPath(tmp, err))
    bail(err);
  bool displaced = false;
  if (!renameIntoPlace(tmp, finalPath, displaced))
    bail("cannot rename " + tmp + " into place: " + lastError());
  if (displaced)
    removeTree(tmp); // the previous checkpoint of this step, checked above
  if (!fsyncPath(dir_, err))
    fail("checkpoint " + finalPath + ": " + err);

  // Keep the newest K of this model's checkpoints, always including this one.
  // Anything else under a step-* name (another model's checkpoint, a user's
  // files, a directory without a manifest) is neither counted nor touched.
  int64_t kept = 1;
  for (const auto &[step, name] : listCheckpoints(dir_)) {
    if (step == pos.step)
      continue;
    std::string path = dir_ + "/" + name;
    if (!isOwnCheckpoint(path, why)) {
      warnOnce(path, "warning: checkpoint retention: leaving " + path +
                         ": not a checkpoint of this model (" + why + ")");
      continue;
    }
    if (kept < keep_) {
      ++kept;
      continue;
    }
    removeCheckpoint(path);
  }
  fsyncPath(dir_, err);
  return finalPath;
}

bool CheckpointStore::resume(
    rt::Program &program, const Config &config, TrainPosition &pos,
    std::string &loadedPath,
    const std::function<void(const std::string &)> &note, int rank, int ranks,
    std::vector<std::pair<std::string, rt::HostTensor>> *rankState) const {
  return resume([&](int64_t) -> rt::Program & { return program; }, config, pos,
                loadedPath, note, rank, ranks, rankState);
}

bool CheckpointStore::resume(
    const std::function<rt::Program &(int64_t step)> &programFor,
    const Config &config, TrainPosition &pos, std::string &loadedPath,
    const std::function<void(const std::string &)> &note, int rank, int ranks,
    std::vector<std::pair<std::string, rt::HostTensor>> *rankState) const {
  auto candidates = listCheckpoints(dir_);
  if (candidates.empty())
    return false;
  std::vector<std::pair<std::string, std::string>> damaged; // path, reason
  for (const auto &[stepNum, name] : candidates) {
    std::string path = dir_ + "/" + name;
    std::string why;
    // The plan that holds the state of this step (the plan after
    // --prune-at's step holds the smaller shapes).
    rt::Program &program = programFor(stepNum);
    std::vector<std::string> names = program.paramNames();
    // What the checkpoint must hold: the whole model's parameters (a
    // pipeline stage's program holds some of them).
    const std::vector<std::string> &modelNames =
        modelParams_.empty() ? names : modelParams_;
    TrainPosition p;
    std::vector<std::pair<std::string, rt::HostTensor>> tensors;
    // ZeRO checkpoints: each shard file's blocks, and the sharded
    // parameters' whole shapes.
    std::vector<std::vector<std::pair<std::string, rt::HostTensor>>> shards;
    std::map<std::string, std::vector<int64_t>> shardParams;
    bool rankStateIn = false;
    do {
      CheckpointManifest m;
      if (!readManifest(path, m, why))
        break;
      // Written by another executable: an error, not damage to skip.
      if (!modelSha_.empty() && m.modelSha256 != modelSha_)
        fail("--resume: checkpoint " + path + " was written for another model "
             "(model_sha256 " + shortSha(m.modelSha256) +
             ", this executable's model is " + shortSha(modelSha_) + ")");
      if (m.batchSize != config.batchSize * config.dataRanks())
        fail("--resume: checkpoint " + path + " was written with batch size " +
             std::to_string(m.batchSize) + ", this executable trains with " +
             std::to_string(config.batchSize * config.dataRanks()));
      if (m.optimizer != config.optimizer)
        fail("--resume: checkpoint " + path + " was written with optimizer '" +
             m.optimizer + "', this executable trains with '" +
             config.optimizer + "'");
      {
        std::set<std::string> want(modelNames.begin(), modelNames.end()), have;
        for (const ManifestParam &mp : m.params) {
          have.insert(mp.name);
          if (!want.count(mp.name))
            fail("--resume: checkpoint " + path + " holds parameter '" +
                 mp.name + "' (" + mp.role +
                 "), which this executable does not have: it was written by "
                 "another compilation of the model (optimizer, --freeze)");
        }
        for (const std::string &n : modelNames)
          if (!have.count(n))
            fail("--resume: checkpoint " + path + " lacks parameter '" + n +
                 "' (" + (program.paramRole(n).empty() ? std::string("another stage's") : program.paramRole(n)) +
                 "): it was written by another compilation of the model "
                 "(optimizer, --freeze)");
      }
      rankStateIn = m.rankState;
      p.step = m.step;
      p.epoch = m.epoch;
      p.position = m.position;
      p.seed = m.seed;
      p.shuffle = m.shuffle;
      p.lossScale.scale = float(m.lossScale);
      p.lossScale.growthTracker = m.growthTracker;
      p.lossScale.skipped = m.skipped;
      p.lossScale.skippedInARow = m.skippedInARow;
      if (p.step != stepNum) {
        why = std::string(kManifest) + " says step " + std::to_string(p.step);
        break;
      }
      // Every file, by size and checksum (each rank checks all of them, so
      // the ranks agree on which checkpoint is usable).
      auto checkFile = [&](const std::string &file, uint64_t bytes,
                           const std::string &sha) {
        std::string haveSha, err;
        uint64_t haveBytes = 0;
        if (!sha256File(path + "/" + file, haveSha, haveBytes, err))
          why = file + " is missing or unreadable";
        else if (haveBytes != bytes)
          why = file + " has " + std::to_string(haveBytes) +
                " bytes, the manifest says " + std::to_string(bytes);
        else if (haveSha != sha)
          why = file + " checksum mismatch";
        return why.empty();
      };
      if (!checkFile(kTensors, m.tensorsBytes, m.tensorsSha256))
        break;
      for (size_t r = 0; r < m.shards.size() && why.empty(); ++r)
        checkFile(shardFileName((int64_t)r, (int64_t)m.shards.size()),
                  m.shards[r].bytes, m.shards[r].sha256);
      if (!why.empty())
        break;
      std::string err;
      // The tensors: exactly the params, each of the param's type;
      // sharded ones as one block per shard file.
      if (!rt::readSafetensors(path + "/" + kTensors, tensors, err)) {
        why = err;
        break;
      }
      std::map<std::string, const rt::HostTensor *> byName;
      for (const auto &kv : tensors)
        byName[kv.first] = &kv.second;
      shardParams.clear();
      for (const ManifestParam &mp : m.params)
        if (mp.sharded)
          shardParams[mp.name] = mp.shape;
      if (byName.size() != tensors.size() ||
          tensors.size() != modelNames.size() - shardParams.size()) {
        why = std::string(kTensors) + " holds " + std::to_string(tensors.size()) +
              " tensors, the manifest lists " +
              std::to_string(modelNames.size() - shardParams.size()) + " there";
        break;
      }
      shards.assign(m.shards.size(), {});
      for (size_t r = 0; r < m.shards.size() && why.empty(); ++r) {
        std::string file = shardFileName((int64_t)r, (int64_t)m.shards.size());
        if (!rt::readSafetensors(path + "/" + file, shards[r], err)) {
          why = err;
          break;
        }
        size_t nblocks = 0;
        for (const auto &kv : shards[r])
          nblocks += kv.first.rfind(kRankStatePrefix, 0) != 0;
        if (nblocks != shardParams.size())
          why = file + " holds " + std::to_string(nblocks) +
                " blocks, the manifest shards " +
                std::to_string(shardParams.size()) + " parameters";
      }
      if (!why.empty())
        break;
      for (const std::string &n : names) {
        rt::TensorDesc want;
        program.getParamDesc(n, want);
        auto sh = config.sharded.find(n);
        if (sh != config.sharded.end())
          want.shape = sh->second; // the whole tensor's shape
        auto sp = config.split.find(n);
        if (sp != config.split.end())
          want.shape = sp->second.shape; // tensor parallelism: whole too
        auto ms = shardParams.find(n);
        if (ms != shardParams.end()) {
          // Block r of R of the whole tensor in each shard file.
          if (ms->second != want.shape) {
            why = "parameter '" + n + "' is " + shapeText(ms->second) +
                  ", the model's is " + want.str();
            break;
          }
          int64_t numel = 1;
          for (int64_t d : ms->second)
            numel *= d;
          int64_t R = (int64_t)shards.size(), k = (numel + R - 1) / R;
          for (size_t r = 0; r < shards.size() && why.empty(); ++r) {
            const rt::HostTensor *b = nullptr;
            for (const auto &kv : shards[r])
              if (kv.first == n)
                b = &kv.second;
            rt::TensorDesc blk{want.dtype, {k}};
            if (!b)
              why = shardFileName((int64_t)r, R) + " lacks parameter '" + n + "'";
            else if (b->desc() != blk)
              why = shardFileName((int64_t)r, R) + ": parameter '" + n +
                    "' is " + b->desc().str() + ", its block is " + blk.str();
          }
          if (!why.empty())
            break;
          continue;
        }
        auto it = byName.find(n);
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
    // ZeRO over several axes: this rank's dp block of its expert or
    // tensor-parallel block (or of the whole tensor); a split tensor
    // without ZeRO: its block.
    auto blockForMesh = [&](const std::string &n, const rt::HostTensor &w,
                            const rt::TensorDesc &mine, int r) {
      auto sp = config.split.find(n);
      rt::HostTensor local = sp == config.split.end() ? w : blockOfWhole(w, sp->second, position_);
      if (!config.sharded.count(n))
        return local;
      int dpIndex = position_.empty() ? r : (int)position_[0].index;
      return blockOf(local, mine, dpIndex);
    };
    for (const std::string &n : names) {
      rt::TensorDesc mine;
      program.getParamDesc(n, mine);
      bool ok;
      auto ms = shardParams.find(n);
      if (ms != shardParams.end()) {
        // Elements [first, first + count) of the flattened whole tensor,
        // from the shard files that hold them (zeros past its end).
        std::vector<const rt::HostTensor *> blocks;
        for (auto &file : shards)
          for (const auto &kv : file)
            if (kv.first == n)
              blocks.push_back(&kv.second);
        int64_t count = mine.numel();
        int64_t first = config.sharded.count(n) ? (int64_t)rank * count : 0;
        if (config.meshBeyondDp() &&
            (config.sharded.count(n) || config.split.count(n))) {
          // Into a run over several axes: whole first, then cut below.
          rt::HostTensor w = rangeOfBlocks(blocks, ms->second, 0,
                                           rt::TensorDesc{mine.dtype, ms->second});
          ok = program.setParam(n, blockForMesh(n, w, mine, rank), err);
        } else {
          ok = program.setParam(n, rangeOfBlocks(blocks, ms->second, first, mine),
                                err);
        }
      } else if (config.sharded.count(n) && config.meshBeyondDp()) {
        ok = program.setParam(n, blockForMesh(n, *byName[n], mine, rank), err);
      } else if (config.sharded.count(n)) {
        ok = program.setParam(n, blockOf(*byName[n], mine, rank), err);
      } else if (auto sp = config.split.find(n); sp != config.split.end()) {
        ok = program.setParam(n, blockOfWhole(*byName[n], sp->second, position_),
                              err);
      } else {
        ok = program.setParam(n, *byName[n], err);
      }
      if (!ok)
        fail("--resume: checkpoint " + path + ": " + err);
    }
    // This rank's own state, when as many ranks wrote it.
    if (rankState) {
      rankState->clear();
      if (rankStateIn && (int)shards.size() == ranks) {
        for (auto &kv : shards[rank])
          if (kv.first.rfind(kRankStatePrefix, 0) == 0)
            rankState->emplace_back(kv.first.substr(std::string(kRankStatePrefix).size()),
                                    std::move(kv.second));
      } else if (rankStateIn) {
        note("checkpoint " + path + ": its per-rank state (the gradient "
             "compression's error-feedback residuals) was written by " +
             std::to_string(shards.size()) + " ranks; this run has " +
             std::to_string(ranks) + ", which start it at zero");
      }
    }
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
