//===- PruneChannels.cpp - channels pruned during a run ---------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "PruneChannels.h"

#include "Util.h"

#include <cstring>

namespace kiln::train {

std::map<std::string, KeptIndices>
keptChannels(const rt::Program &program, const PruneConfig &prune,
             const std::string &where) {
  std::map<std::string, KeptIndices> kept;
  std::string err;
  // Each class's kept channels; empty where nothing is pruned (yet).
  std::vector<std::vector<int64_t>> keptOf(prune.channels.size());
  for (size_t k = 0; k < prune.channels.size(); ++k) {
    const PruneChannelClass &cl = prune.channels[k];
    std::vector<int64_t> &ch = keptOf[k];
    bool any = false;
    if (cl.parts.empty()) {
      rt::HostTensor m;
      if (!program.getParam(cl.mask, m, err))
        fail(where + err);
      if (m.desc().dtype != rt::DType::F32 || m.desc().numel() != cl.count)
        fail(where + "channel mask '" + cl.mask + "' is not f32 [" +
             std::to_string(cl.count) + "]");
      const float *q = static_cast<const float *>(m.data());
      for (int64_t c = 0; c < cl.count; ++c)
        if (q[c] == 0.0f)
          ch.push_back(c);
      any = (int64_t)ch.size() != cl.count;
    } else {
      // A concat's result: its parts' kept channels at their offsets.
      int64_t offset = 0;
      for (size_t j = 0; j < cl.parts.size(); ++j) {
        int64_t p = cl.parts[j];
        if (p >= 0 && p < (int64_t)k && !keptOf[p].empty()) {
          any = true;
          for (int64_t c : keptOf[p])
            ch.push_back(offset + c);
        } else {
          for (int64_t c = 0; c < cl.partChannels[j]; ++c)
            ch.push_back(offset + c);
        }
        offset += cl.partChannels[j];
      }
    }
    if (!any) {
      ch.clear(); // not pruned (yet)
      continue;
    }
    for (size_t i = 0; i < cl.params.size(); ++i) {
      std::vector<int64_t> idx;
      for (int64_t c : ch)
        for (int64_t b = 0; b < cl.blocks[i]; ++b)
          idx.push_back(c * cl.blocks[i] + b);
      kept[cl.params[i]][cl.axes[i]] = std::move(idx);
    }
  }
  return kept;
}

size_t moveToPrunedPlan(const rt::Program &from, rt::Program &to,
                        const PruneConfig &prune) {
  const std::string where = "switching to the pruned plan: ";
  std::map<std::string, KeptIndices> kept = keptChannels(from, prune, where);
  // The kept channels of a parameter, or of the one an optimizer state
  // "P/..." belongs to (the longest such P).
  auto keptFor = [&](const std::string &n) -> const KeptIndices * {
    auto it = kept.find(n);
    if (it != kept.end())
      return &it->second;
    for (size_t at = n.rfind('/'); at != std::string::npos && at > 0;
         at = n.rfind('/', at - 1)) {
      it = kept.find(n.substr(0, at));
      if (it != kept.end())
        return &it->second;
    }
    return nullptr;
  };
  size_t cut = 0;
  std::string err;
  for (const std::string &n : to.paramNames()) {
    rt::TensorDesc want;
    to.getParamDesc(n, want);
    rt::HostTensor t;
    if (!from.getParam(n, t, err))
      fail(where + "the full plan has no parameter '" + n + "'");
    if (t.desc() == want) {
      if (!to.setParam(n, t, err))
        fail(where + err);
      continue;
    }
    const KeptIndices *k = keptFor(n);
    if (!k || t.dtype() != want.dtype)
      fail(where + "parameter '" + n + "' is " + t.desc().str() +
           " in the full plan and " + want.str() +
           " in the pruned one, and no pruned class says how to cut it");
    std::string bytes(static_cast<const char *>(t.data()), t.bytes());
    std::string sliced =
        sliceTensorBytes(bytes, t.shape(), rt::dtypeSize(t.dtype()), *k);
    rt::TensorDesc got = t.desc();
    for (const auto &[axis, idx] : *k)
      if (axis >= 0 && axis < (int64_t)got.shape.size())
        got.shape[axis] = (int64_t)idx.size();
    if (sliced.empty() || got != want)
      fail(where + "parameter '" + n + "' cut to the kept channels is " +
           got.str() + ", the pruned plan's is " + want.str());
    rt::HostTensor small(want);
    std::memcpy(small.data(), sliced.data(), sliced.size());
    if (!to.setParam(n, small, err))
      fail(where + err);
    ++cut;
  }
  return cut;
}

} // namespace kiln::train
