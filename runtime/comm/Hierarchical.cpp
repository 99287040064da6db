//===- Hierarchical.cpp - node-aware all-reduce ----------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// makeHierarchical: nodes of L ranks, M nodes. An all-reduce of n elements
// pads n to a multiple of L, reduce-scatters within the node (each rank
// then holds one reduced 1/L shard), all-reduces its shard with the ranks of
// the same local index on the other nodes, and all-gathers the shards within
// the node. Inter-node traffic per rank is 2(M-1)/M · n/L elements instead
// of a flat ring's share of all n. The three steps of one all-reduce run on
// this communicator's worker thread, one all-reduce after another, so every
// rank issues the sub-collectives in the same order; the caller gets a
// handle at once, as from any other collective. With one node (M = 1) or
// one rank per node (L = 1) it is the single all-reduce of that group.
//===----------------------------------------------------------------------===//
#include "CommInternal.h"

#include <cstring>
#include <deque>
#include <thread>
#include <vector>

namespace kiln::comm {

namespace {

class HierarchicalCommunicator final : public Communicator {
public:
  HierarchicalCommunicator(Communicator &flat, std::unique_ptr<Communicator> intra,
                           std::unique_ptr<Communicator> inter)
      : flat_(flat), intra_(std::move(intra)), inter_(std::move(inter)),
        name_(flat.name() + "/hierarchical") {
    timeout_ = flat.timeout();
    worker_ = std::thread([this] { work(); });
  }

  ~HierarchicalCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }

  int rank() const override { return flat_.rank(); }
  int size() const override { return flat_.size(); }
  const std::string &name() const override { return name_; }
  const char *backend() const override { return flat_.backend(); }
  std::atomic<int> *progressWaiters() override { return flat_.progressWaiters(); }
  int ranksPerNode() const { return intra_->size(); }
  int nodes() const { return inter_->size(); }

  Handle allReduce(const void *send, void *recv, size_t count, rt::DType dtype,
                   ReduceOp op) override {
    checkCount(*this, "all_reduce", count, dtype, true);
    const size_t es = rt::dtypeSize(dtype);
    accountAllReduce(count, es);
    auto st = newState(*this, "hierarchical all_reduce (" +
                                  std::string(reduceOpName(op)) + ")",
                       count * es);
    st->waiters = flat_.progressWaiters();
    enqueue(st, [=] { runAllReduce(send, recv, count, dtype, op); });
    return Handle(st);
  }

  /// Counts an all-reduce of `count` elements of `es` bytes by the
  /// algorithm's bytes: both intra-node steps and the inter-node one.
  void accountAllReduce(size_t count, size_t es) {
    const size_t L = intra_->size(), M = inter_->size(), chunk = (count + L - 1) / L;
    uint64_t inter = ringBytes(M, chunk * es, true);
    ++stats_.collectives;
    stats_.bytesSent += 2 * ringBytes(L, chunk * L * es, false) + inter;
    stats_.interNodeBytes += inter;
  }

  /// The three steps (or the one all-reduce of a single node), on the
  /// worker thread.
  void runAllReduce(const void *send, void *recv, size_t count, rt::DType dtype,
                    ReduceOp op) {
    const size_t es = rt::dtypeSize(dtype), L = intra_->size(), M = inter_->size();
    const size_t chunk = (count + L - 1) / L;
    // One node, or one rank per node: a single all-reduce is the whole
    // algorithm (and MPI's own is faster than three steps).
    if (M == 1) {
      intra_->allReduce(send, recv, count, dtype, op).waitInBackground();
      return;
    }
    if (L == 1) {
      inter_->allReduce(send, recv, count, dtype, op).waitInBackground();
      return;
    }
    // Scratch reused across calls (only the worker touches it): fresh
    // buffers of a gradient's size cost their page faults every step.
    full_.resize(chunk * L * es);
    shard_.resize(chunk * es);
    std::memcpy(full_.data(), send, count * es);
    std::memset(full_.data() + count * es, 0, (chunk * L - count) * es);
    intra_->reduceScatter(full_.data(), shard_.data(), chunk, dtype, op).waitInBackground();
    inter_->allReduce(shard_.data(), shard_.data(), chunk, dtype, op).waitInBackground();
    intra_->allGather(shard_.data(), full_.data(), chunk, dtype).waitInBackground();
    std::memcpy(recv, full_.data(), count * es);
  }

  /// An all-reduce (the algorithm above) and this rank's block of it:
  /// OpenMPI 4.1's non-blocking reduce-scatter (libnbc) takes 102 ms for
  /// 24 MiB on two ranks of one machine where the all-reduce takes 16 ms
  /// (docs/Performance.md). It sends twice a reduce-scatter's bytes.
  Handle reduceScatter(const void *send, void *recv, size_t count,
                       rt::DType dtype, ReduceOp op) override {
    checkCount(*this, "reduce_scatter", count * size(), dtype, true);
    const size_t es = rt::dtypeSize(dtype), all = count * size();
    accountAllReduce(all, es);
    auto st = newState(*this, "hierarchical reduce_scatter (" +
                                  std::string(reduceOpName(op)) + ")",
                       all * es);
    st->waiters = flat_.progressWaiters();
    const size_t me = (size_t)rank();
    enqueue(st, [=] {
      scatter_.resize(all * es);
      runAllReduce(send, scatter_.data(), all, dtype, op);
      std::memcpy(recv, scatter_.data() + me * count * es, count * es);
    });
    return Handle(st);
  }

  // Everything else is the flat communicator's, through this worker so that
  // it stays ordered after the all-reduces issued before it.
  Handle allGather(const void *send, void *recv, size_t count,
                   rt::DType dtype) override {
    size_t all = count * rt::dtypeSize(dtype) * size();
    return forward("all_gather", all, ringBytes(size(), all, false), [=] {
      return flat_.allGather(send, recv, count, dtype);
    });
  }
  Handle allToAll(const void *send, void *recv, size_t count,
                  rt::DType dtype) override {
    size_t all = count * rt::dtypeSize(dtype) * size();
    return forward("all_to_all", all, ringBytes(size(), all, false), [=] {
      return flat_.allToAll(send, recv, count, dtype);
    });
  }
  Handle broadcast(void *buf, size_t count, rt::DType dtype, int root) override {
    if (root < 0 || root >= size())
      throw CommError("broadcast on '" + name_ + "': root " +
                      std::to_string(root) + " is not a rank of " +
                      std::to_string(size()));
    size_t b = count * rt::dtypeSize(dtype);
    return forward("broadcast", b, ringBytes(size(), b, false), [=] {
      return flat_.broadcast(buf, count, dtype, root);
    });
  }
  Handle send(const void *buf, size_t count, rt::DType dtype, int peer,
              int tag) override {
    // Point to point goes straight to `flat`: MPI matches it by peer and tag,
    // not by order, and a recv queued behind the worker would wait for a
    // send queued behind the peer's.
    ++stats_.collectives;
    stats_.bytesSent += count * rt::dtypeSize(dtype);
    stats_.interNodeBytes += crossNode(count * rt::dtypeSize(dtype));
    return flat_.send(buf, count, dtype, peer, tag);
  }
  Handle recv(void *buf, size_t count, rt::DType dtype, int peer,
              int tag) override {
    ++stats_.collectives;
    return flat_.recv(buf, count, dtype, peer, tag);
  }
  Handle barrier() override {
    return forward("barrier", 0, 0, [=] { return flat_.barrier(); });
  }
  std::unique_ptr<Communicator> split(int color, int key,
                                      const std::string &name) override {
    drain();
    return flat_.split(color, key, name);
  }
  std::unique_ptr<Communicator> splitShared(const std::string &name) override {
    drain();
    return flat_.splitShared(name);
  }

private:
  using Job = std::function<void()>;

  void enqueue(std::shared_ptr<Handle::State> st, Job job) {
    {
      std::lock_guard<std::mutex> lock(m_);
      queue_.push_back({std::move(st), std::move(job)});
    }
    cv_.notify_all();
  }

  /// `sent`: the bytes this rank sends, as the flat communicator counts
  /// them. Of those, the share addressed to ranks on other nodes crosses
  /// nodes: (size - L) of the size - 1 peers (exact for an all-to-all, the
  /// average for the flat ring's steps).
  template <typename F>
  Handle forward(const char *op, size_t bytes, uint64_t sent, F start) {
    auto st = newState(*this, op, bytes);
    st->waiters = flat_.progressWaiters();
    enqueue(st, [start] { start().waitInBackground(); });
    ++stats_.collectives;
    stats_.bytesSent += sent;
    stats_.interNodeBytes += crossNode(sent);
    return Handle(st);
  }

  uint64_t crossNode(uint64_t sent) const {
    const uint64_t n = size(), L = ranksPerNode();
    return n > 1 ? sent * (n - L) / (n - 1) : 0;
  }

  /// Waits until every queued job has run (before a split, which is
  /// collective and must not overtake them).
  void drain() {
    auto st = newState(*this, "drain", 0);
    enqueue(st, [] {});
    Handle(st).wait();
  }

  void work() {
    while (true) {
      std::pair<std::shared_ptr<Handle::State>, Job> item;
      {
        std::unique_lock<std::mutex> lock(m_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty())
          return;
        item = std::move(queue_.front());
        queue_.pop_front();
      }
      try {
        item.second();
        complete(*item.first);
      } catch (const CommError &e) {
        complete(*item.first, e.what());
      } catch (const std::exception &e) {
        complete(*item.first, e.what());
      }
    }
  }

  Communicator &flat_;
  std::unique_ptr<Communicator> intra_, inter_;
  std::string name_;
  std::thread worker_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::pair<std::shared_ptr<Handle::State>, Job>> queue_;
  bool stop_ = false;
  std::vector<uint8_t> full_, shard_, scatter_; // the worker's scratch
};

} // namespace

std::unique_ptr<Communicator> makeHierarchical(Communicator &flat,
                                               int ranksPerNode) {
  const int n = flat.size(), r = flat.rank();
  std::unique_ptr<Communicator> intra;
  if (ranksPerNode < 0)
    throw CommError("--ranks-per-node must be 0 (the ranks sharing memory) or "
                    "positive, got " + std::to_string(ranksPerNode));
  if (ranksPerNode > 0) {
    if (n % ranksPerNode)
      throw CommError(std::to_string(n) + " ranks do not divide into nodes of " +
                      std::to_string(ranksPerNode) + " (--ranks-per-node)");
    intra = flat.split(r / ranksPerNode, r, flat.name() + "/node");
  } else {
    intra = flat.splitShared(flat.name() + "/node");
  }
  // Every node the same size: the shards of the inter-node step must match.
  int sizes[2] = {intra->size(), -intra->size()};
  flat.allReduce(sizes, sizes, 2, rt::DType::I32, ReduceOp::Max).wait();
  if (sizes[0] != -sizes[1])
    throw CommError("the nodes of '" + flat.name() + "' have between " +
                    std::to_string(-sizes[1]) + " and " +
                    std::to_string(sizes[0]) +
                    " ranks; a hierarchical all-reduce needs equal nodes");
  auto inter = flat.split(intra->rank(), r, flat.name() + "/across-nodes");
  return std::make_unique<HierarchicalCommunicator>(flat, std::move(intra),
                                                    std::move(inter));
}

} // namespace kiln::comm
