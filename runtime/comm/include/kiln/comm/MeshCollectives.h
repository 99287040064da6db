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
#include "kiln/runtime/Trace.h"

#include <cstdlib>
#include <cstring>
#include <list>
#include <map>
#include <tuple>
#include <memory>

namespace kiln::comm {

class MeshCollectives final : public rt::Collectives {
public:
  using Clock = rt::TraceRecorder::Clock;

  /// `comm` (not owned) is this rank's group along mesh axis `name`.
  void addAxis(const std::string &name, Communicator &comm) { axes_[name] = &comm; }
  /// Records every collective, from its start to its completion, on the
  /// trace's communication thread while it is enabled. Not owned.
  void setTrace(rt::TraceRecorder *trace) { trace_ = trace; }

  int groupSize(const std::string &axis) override { return get(axis).size(); }
  int groupRank(const std::string &axis) override { return get(axis).rank(); }

  void reduceScatter(const std::string &axis, const void *send, void *recv,
                     size_t count, rt::DType dtype, rt::CollectiveOp op) override {
    auto t0 = Clock::now();
    get(axis).reduceScatter(send, recv, count, dtype, reduceOp(op)).wait();
    auto t1 = Clock::now();
    note("reduce_scatter", axis, count * get(axis).size(), dtype, t0, t1);
    waited("reduce_scatter", t0, t1);
  }

  void allGather(const std::string &axis, const void *send, void *recv,
                 size_t count, rt::DType dtype) override {
    auto t0 = Clock::now();
    get(axis).allGather(send, recv, count, dtype).wait();
    auto t1 = Clock::now();
    note("all_gather", axis, count * get(axis).size(), dtype, t0, t1);
    waited("all_gather", t0, t1);
  }

  void allToAll(const std::string &axis, const void *send, void *recv,
                size_t count, rt::DType dtype) override {
    auto t0 = Clock::now();
    get(axis).allToAll(send, recv, count, dtype).wait();
    auto t1 = Clock::now();
    note("all_to_all", axis, count * get(axis).size(), dtype, t0, t1);
    waited("all_to_all", t0, t1);
  }

  void allReduce(const std::string &axis, void *buf, size_t count,
                 rt::DType dtype, rt::CollectiveOp op) override {
    auto t0 = Clock::now();
    get(axis).allReduce(buf, buf, count, dtype, reduceOp(op)).wait();
    auto t1 = Clock::now();
    note("all_reduce", axis, count, dtype, t0, t1);
    waited("all_reduce", t0, t1);
  }

  void allReduceCompressed(const std::string &axis, int key, float *buf,
                           size_t count, const std::string &compression) override {
    Compression kind;
    if (!parseCompression(compression, kind))
      throw CommError("unknown gradient compression '" + compression + "'");
    auto t0 = Clock::now();
    auto &slot = reducers_[{axis, compression}];
    if (!slot)
      slot = std::make_unique<CompressedAllReducer>(get(axis), kind);
    slot->allReduceSum(key, buf, count);
    auto t1 = Clock::now();
    note("all_reduce (" + compression + ")", axis, count, rt::DType::F32, t0, t1);
    waited("all_reduce (" + compression + ")", t0, t1);
  }

  /// This rank's error-feedback residuals of every compressed all-reduce,
  /// named "<axis>/<compression>/<bucket>/local" and ".../owned" (empty
  /// without compression): per-rank state for checkpoints.
  std::vector<std::pair<std::string, std::vector<float>>> residualState() const {
    std::vector<std::pair<std::string, std::vector<float>>> out;
    for (const auto &[key, reducer] : reducers_)
      for (const auto &[bucket, r] : reducer->residuals()) {
        std::string base = key.first + "/" + key.second + "/" + std::to_string(bucket);
        out.emplace_back(base + "/local", r.local);
        out.emplace_back(base + "/owned", r.owned);
      }
    return out;
  }
  /// Restores what residualState() returned; false with `why` for a name it
  /// did not write or an axis this run lacks.
  bool restoreResiduals(const std::vector<std::pair<std::string, std::vector<float>>> &state,
                        std::string &why) {
    std::map<std::tuple<std::string, std::string, int>, CompressedAllReducer::Residual> got;
    for (const auto &[name, values] : state) {
      size_t a = name.find('/'), b = name.find('/', a + 1), c = name.find('/', b + 1);
      Compression kind;
      if (a == std::string::npos || b == std::string::npos || c == std::string::npos ||
          !axes_.count(name.substr(0, a)) ||
          !parseCompression(name.substr(a + 1, b - a - 1), kind)) {
        why = "'" + name + "' is not a residual of this run's mesh";
        return false;
      }
      char *end = nullptr;
      std::string num = name.substr(b + 1, c - b - 1), part = name.substr(c + 1);
      long bucket = std::strtol(num.c_str(), &end, 10);
      if (num.empty() || *end || bucket < 0 || (part != "local" && part != "owned")) {
        why = "'" + name + "' is not a residual name";
        return false;
      }
      auto &r = got[{name.substr(0, a), name.substr(a + 1, b - a - 1), (int)bucket}];
      (part == "local" ? r.local : r.owned) = values;
    }
    for (auto &[key, r] : got) {
      const auto &[axis, compression, bucket] = key;
      auto &slot = reducers_[{axis, compression}];
      Compression kind;
      parseCompression(compression, kind);
      if (!slot)
        slot = std::make_unique<CompressedAllReducer>(get(axis), kind);
      slot->restore(bucket, std::move(r));
    }
    return true;
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
    auto [it, fresh] = inflight_.emplace(buf, InFlight());
    if (!fresh)
      throw CommError("all_reduce_start on '" + axis + "': this bucket is "
                      "already in flight");
    it->second.started = Clock::now();
    it->second.axis = axis;
    it->second.count = count;
    it->second.dtype = dtype;
    it->second.handle = get(axis).allReduce(buf, buf, count, dtype, reduceOp(op));
  }

  void waitAllReduce(void *buf) override {
    auto it = inflight_.find(buf);
    if (it == inflight_.end())
      return; // ran to the end in startAllReduce
    InFlight f = std::move(it->second);
    inflight_.erase(it);
    auto t0 = Clock::now();
    f.handle.wait();
    waited("wait for bucket", t0, Clock::now());
    note("bucket all_reduce", f.axis, f.count, f.dtype, f.started,
         f.handle.finishedAt());
  }

  void broadcast(const std::string &axis, void *buf, size_t count,
                 rt::DType dtype, int root) override {
    auto t0 = Clock::now();
    get(axis).broadcast(buf, count, dtype, root).wait();
    auto t1 = Clock::now();
    note("broadcast", axis, count, dtype, t0, t1);
    waited("broadcast", t0, t1);
  }

  /// A pipeline stage's send: a copy of buf goes to the communicator, so
  /// the caller's buffer is free at once and the send progresses while it
  /// computes. Sends that have completed are released here.
  void send(const std::string &axis, int peer, int tag, const void *buf,
            size_t count, rt::DType dtype) override {
    reapSends(/*all=*/false);
    const size_t bytes = count * rt::dtypeSize(dtype);
    Outgoing o;
    o.data.reset(new char[bytes ? bytes : 1]);
    if (bytes)
      std::memcpy(o.data.get(), buf, bytes);
    o.started = Clock::now();
    o.axis = axis;
    o.count = count;
    o.dtype = dtype;
    o.handle = get(axis).send(o.data.get(), count, dtype, peer, tag);
    sends_.push_back(std::move(o));
  }

  /// Whether postRecv posts (on by default). A posted receive keeps the
  /// communicator's thread polling while the stage computes, which costs
  /// the compute threads their cores when there is no spare one.
  void setPostReceives(bool on) { postReceives_ = on; }

  /// A pipeline stage's receive, posted when the step begins into a
  /// buffer of its own: the transfer runs while the stage computes.
  void postRecv(const std::string &axis, int peer, int tag, size_t count,
                rt::DType dtype) override {
    if (!postReceives_)
      return;
    Incoming in;
    const size_t bytes = count * rt::dtypeSize(dtype);
    in.data.reset(new char[bytes ? bytes : 1]);
    in.bytes = bytes;
    in.count = count;
    in.dtype = dtype;
    in.started = Clock::now();
    in.handle = get(axis).recv(in.data.get(), count, dtype, peer, tag);
    posted_[{axis, peer, tag}] = std::move(in);
  }

  void recv(const std::string &axis, int peer, int tag, void *buf, size_t count,
            rt::DType dtype) override {
    auto t0 = Clock::now();
    auto it = posted_.find({axis, peer, tag});
    if (it != posted_.end() && it->second.count == count && it->second.dtype == dtype) {
      Incoming in = std::move(it->second);
      posted_.erase(it);
      in.handle.wait();
      auto t1 = Clock::now();
      if (in.bytes)
        std::memcpy(buf, in.data.get(), in.bytes);
      note("recv", axis, count, dtype, in.started, in.handle.finishedAt());
      waited("recv", t0, t1);
      return;
    }
    get(axis).recv(buf, count, dtype, peer, tag).wait();
    auto t1 = Clock::now();
    note("recv", axis, count, dtype, t0, t1);
    waited("recv", t0, t1);
  }

  void flushSends() override { reapSends(/*all=*/true); }

private:
  struct Outgoing {
    Handle handle;
    std::unique_ptr<char[]> data; // what the send reads until it completes
    Clock::time_point started;
    std::string axis;
    size_t count = 0;
    rt::DType dtype = rt::DType::F32;
  };
  /// Releases the sends that have completed (all: waits for every one).
  void reapSends(bool all) {
    for (auto it = sends_.begin(); it != sends_.end();) {
      if (all)
        it->handle.wait();
      else if (!it->handle.done()) {
        ++it;
        continue;
      }
      note("send", it->axis, it->count, it->dtype, it->started,
           it->handle.finishedAt());
      it = sends_.erase(it);
    }
  }
  struct Incoming {
    Handle handle;
    std::unique_ptr<char[]> data; // what the receive writes
    size_t bytes = 0, count = 0;
    rt::DType dtype = rt::DType::F32;
    Clock::time_point started;
  };
  std::map<std::tuple<std::string, int, int>, Incoming> posted_;
  bool postReceives_ = true;
  struct InFlight {
    Handle handle;
    Clock::time_point started;
    std::string axis;
    size_t count = 0;
    rt::DType dtype = rt::DType::F32;
  };

  static ReduceOp reduceOp(rt::CollectiveOp op) {
    return op == rt::CollectiveOp::Max   ? ReduceOp::Max
           : op == rt::CollectiveOp::Min ? ReduceOp::Min
                                         : ReduceOp::Sum;
  }
  void note(const std::string &what, const std::string &axis, size_t count,
            rt::DType dtype, Clock::time_point start, Clock::time_point end) {
    if (trace_ && trace_->enabled())
      trace_->record(what, "collective", rt::TraceThread::Communication, start,
                     end,
                     {{"axis", axis},
                      {"bytes", std::to_string(count * rt::dtypeSize(dtype))}});
  }
  /// The caller (compute) stood still in [start, end) for communication.
  void waited(const std::string &what, Clock::time_point start,
              Clock::time_point end) {
    if (trace_ && trace_->enabled())
      trace_->record(what, "wait", rt::TraceThread::Compute, start, end);
  }
  Communicator &get(const std::string &axis) {
    auto it = axes_.find(axis);
    if (it == axes_.end())
      throw CommError("the plan reduces over mesh axis '" + axis +
                      "', which this run's mesh does not have");
    return *it->second;
  }
  std::map<std::string, Communicator *> axes_;
  std::map<void *, InFlight> inflight_; // buckets started, not yet waited for
  std::list<Outgoing> sends_;           // point-to-point sends in flight
  std::map<std::pair<std::string, std::string>, std::unique_ptr<CompressedAllReducer>>
      reducers_;
  rt::TraceRecorder *trace_ = nullptr;
};

} // namespace kiln::comm

#endif // KILN_COMM_MESHCOLLECTIVES_H
