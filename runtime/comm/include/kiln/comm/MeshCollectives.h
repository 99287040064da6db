//===- MeshCollectives.h - the runtime's collectives over comm --*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// rt::Collectives (the seam a plan's collective kernels call) over this
// library's Communicators: one communicator per mesh axis name ("dp"), each
// the group of this rank along that axis. kiln-train builds one from the
// payload's mesh and installs it on its Program.
//===----------------------------------------------------------------------===//
#ifndef KILN_COMM_MESHCOLLECTIVES_H
#define KILN_COMM_MESHCOLLECTIVES_H

#include "kiln/comm/Communicator.h"
#include "kiln/comm/Compression.h"
#include "kiln/runtime/Collectives.h"

#include <map>
#include <memory>

namespace kiln::comm {

class MeshCollectives final : public rt::Collectives {
public:
  /// `comm` (not owned) is this rank's group along mesh axis `name`.
  void addAxis(const std::string &name, Communicator &comm) { axes_[name] = &comm; }

  int groupSize(const std::string &axis) override { return get(axis).size(); }

  void allReduce(const std::string &axis, void *buf, size_t count,
                 rt::DType dtype, rt::CollectiveOp op) override {
    ReduceOp r = op == rt::CollectiveOp::Max   ? ReduceOp::Max
                 : op == rt::CollectiveOp::Min ? ReduceOp::Min
                                               : ReduceOp::Sum;
    get(axis).allReduce(buf, buf, count, dtype, r).wait();
  }

  void allReduceCompressed(const std::string &axis, int key, float *buf,
                           size_t count, const std::string &compression) override {
    Compression kind;
    if (!parseCompression(compression, kind))
      throw CommError("unknown gradient compression '" + compression + "'");
    auto &slot = reducers_[{axis, compression}];
    if (!slot)
      slot = std::make_unique<CompressedAllReducer>(get(axis), kind);
    slot->allReduceSum(key, buf, count);
  }

  /// An uncompressed bucket goes to the communicator, which progresses it on
  /// its own thread while the caller computes; a compressed one runs its
  /// phases here (CompressedAllReducer blocks).
  void startAllReduce(const std::string &axis, void *buf, size_t count,
                      rt::DType dtype, rt::CollectiveOp op,
                      const std::string &compression, int key) override {
    if (compression != "none") {
      allReduceCompressed(axis, key, static_cast<float *>(buf), count, compression);
      return;
    }
    ReduceOp r = op == rt::CollectiveOp::Max   ? ReduceOp::Max
                 : op == rt::CollectiveOp::Min ? ReduceOp::Min
                                               : ReduceOp::Sum;
    auto [it, fresh] = inflight_.emplace(buf, Handle());
    if (!fresh)
      throw CommError("all_reduce_start on '" + axis + "': this bucket is "
                      "already in flight");
    it->second = get(axis).allReduce(buf, buf, count, dtype, r);
  }

  void waitAllReduce(void *buf) override {
    auto it = inflight_.find(buf);
    if (it == inflight_.end())
      return; // ran to the end in startAllReduce
    Handle h = std::move(it->second);
    inflight_.erase(it);
    h.wait();
  }

  void broadcast(const std::string &axis, void *buf, size_t count,
                 rt::DType dtype, int root) override {
    get(axis).broadcast(buf, count, dtype, root).wait();
  }

private:
  Communicator &get(const std::string &axis) {
    auto it = axes_.find(axis);
    if (it == axes_.end())
      throw CommError("the plan reduces over mesh axis '" + axis +
                      "', which this run's mesh does not have");
    return *it->second;
  }
  std::map<std::string, Communicator *> axes_;
  std::map<void *, Handle> inflight_; // buckets started, not yet waited for
  std::map<std::pair<std::string, std::string>, std::unique_ptr<CompressedAllReducer>>
      reducers_;
};

} // namespace kiln::comm

#endif // KILN_COMM_MESHCOLLECTIVES_H
