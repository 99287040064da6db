//===- Communicator.cpp - handles, the Self backend, the world --*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "CommInternal.h"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace kiln::comm {

const char *reduceOpName(ReduceOp op) {
  switch (op) {
  case ReduceOp::Sum: return "sum";
  case ReduceOp::Max: return "max";
  case ReduceOp::Min: return "min";
  }
  return "?";
}

std::chrono::milliseconds Communicator::defaultTimeout() {
  const char *v = std::getenv("KILN_COMM_TIMEOUT");
  if (v && *v) {
    char *end = nullptr;
    double s = std::strtod(v, &end);
    if (end && *end == '\0' && std::isfinite(s) && s > 0 && s < 1e9)
      return std::chrono::milliseconds((int64_t)std::ceil(s * 1000));
  }
  return std::chrono::seconds(600);
}

namespace {
std::function<std::string()> &stuckRankDiagnosis() {
  static std::function<std::string()> f;
  return f;
}
} // namespace

bool Handle::done() const {
  if (!state_)
    return true;
  std::lock_guard<std::mutex> lock(state_->m);
  return state_->done;
}

std::chrono::steady_clock::time_point Handle::finishedAt() const {
  if (!state_)
    return std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(state_->m);
  return state_->done ? state_->finished : std::chrono::steady_clock::now();
}

void Handle::wait() { waitImpl(true); }
void Handle::waitInBackground() { waitImpl(false); }

void Handle::waitImpl(bool counted) {
  if (!state_)
    return;
  State &s = *state_;
  std::unique_lock<std::mutex> lock(s.m);
  // While this thread waits, the backend may poll harder (nobody computes).
  struct Count {
    std::atomic<int> *n;
    explicit Count(std::atomic<int> *p) : n(p) {
      if (n)
        n->fetch_add(1);
    }
    ~Count() {
      if (n)
        n->fetch_sub(1);
    }
  } count(s.done || !counted ? nullptr : s.waiters);
  if (!s.cv.wait_for(lock, s.timeout, [&] { return s.done; })) {
    std::string what = s.what;
    double secs = std::chrono::duration<double>(s.timeout).count();
    lock.unlock();
    if (s.onTimeout)
      s.onTimeout();
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", secs);
    std::string who = stuckRankDiagnosis() ? stuckRankDiagnosis()() : "";
    throw CommError(what + ": not complete after " + buf + " s: " +
                    (who.empty() ? "a rank of the group is stuck or gone" : who) +
                    " (KILN_COMM_TIMEOUT sets the limit in seconds)");
  }
  if (!s.error.empty())
    throw CommError(s.what + ": " + s.error);
}

void setStuckRankDiagnosis(std::function<std::string()> f) {
  stuckRankDiagnosis() = std::move(f);
}

std::shared_ptr<Handle::State> newState(const Communicator &c,
                                        const std::string &op, size_t bytes) {
  auto s = std::make_shared<Handle::State>();
  s->what = op + " on '" + c.name() + "' (" + std::to_string(c.size()) +
            " rank" + (c.size() == 1 ? "" : "s") + ", rank " +
            std::to_string(c.rank()) + ", " + std::to_string(bytes) + " bytes)";
  s->timeout = c.timeout();
  return s;
}

void complete(Handle::State &s, std::string error) {
  {
    std::lock_guard<std::mutex> lock(s.m);
    s.done = true;
    s.finished = std::chrono::steady_clock::now();
    s.error = std::move(error);
  }
  s.cv.notify_all();
}

uint64_t ringBytes(size_t n, size_t totalBytes, bool twice) {
  if (n < 2)
    return 0;
  uint64_t b = (uint64_t)totalBytes * (n - 1) / n;
  return twice ? 2 * b : b;
}

void checkCount(const Communicator &c, const char *op, size_t count,
                rt::DType dtype, bool reduce) {
  if (count > (size_t)INT32_MAX)
    throw CommError(std::string(op) + " on '" + c.name() + "': " +
                    std::to_string(count) + " elements, more than 2^31 - 1 in "
                    "one call");
  if (reduce && dtype == rt::DType::Bool)
    throw CommError(std::string(op) + " on '" + c.name() +
                    "': i1 values cannot be reduced");
}

namespace {

/// One rank: every collective is a copy, complete on return.
class SelfCommunicator final : public Communicator {
public:
  explicit SelfCommunicator(std::string name) : name_(std::move(name)) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const std::string &name() const override { return name_; }
  const char *backend() const override { return "self"; }

  Handle allReduce(const void *send, void *recv, size_t count, rt::DType dtype,
                   ReduceOp) override {
    checkCount(*this, "all_reduce", count, dtype, true);
    return copy("all_reduce", send, recv, count * rt::dtypeSize(dtype));
  }
  Handle reduceScatter(const void *send, void *recv, size_t count,
                       rt::DType dtype, ReduceOp) override {
    checkCount(*this, "reduce_scatter", count, dtype, true);
    return copy("reduce_scatter", send, recv, count * rt::dtypeSize(dtype));
  }
  Handle allGather(const void *send, void *recv, size_t count,
                   rt::DType dtype) override {
    checkCount(*this, "all_gather", count, dtype, false);
    return copy("all_gather", send, recv, count * rt::dtypeSize(dtype));
  }
  Handle allToAll(const void *send, void *recv, size_t count,
                  rt::DType dtype) override {
    checkCount(*this, "all_to_all", count, dtype, false);
    return copy("all_to_all", send, recv, count * rt::dtypeSize(dtype));
  }
  Handle broadcast(void *, size_t count, rt::DType dtype, int root) override {
    checkCount(*this, "broadcast", count, dtype, false);
    if (root != 0)
      throw CommError("broadcast on '" + name_ + "': root " +
                      std::to_string(root) + " is not a rank of 1");
    ++stats_.collectives;
    return {};
  }
  Handle send(const void *, size_t, rt::DType, int peer, int) override {
    throw CommError("send on '" + name_ + "' to rank " + std::to_string(peer) +
                    ": a 1-rank communicator has no peer");
  }
  Handle recv(void *, size_t, rt::DType, int peer, int) override {
    throw CommError("recv on '" + name_ + "' from rank " +
                    std::to_string(peer) + ": a 1-rank communicator has no peer");
  }
  Handle barrier() override {
    ++stats_.collectives;
    return {};
  }
  std::unique_ptr<Communicator> split(int, int, const std::string &name) override {
    return std::make_unique<SelfCommunicator>(name);
  }
  std::unique_ptr<Communicator> splitShared(const std::string &name) override {
    return std::make_unique<SelfCommunicator>(name);
  }

private:
  Handle copy(const char *, const void *send, void *recv, size_t bytes) {
    ++stats_.collectives;
    if (send != recv && bytes)
      std::memmove(recv, send, bytes);
    return {};
  }
  std::string name_;
};

} // namespace

std::unique_ptr<Communicator> makeSelf(const std::string &name) {
  return std::make_unique<SelfCommunicator>(name);
}

bool launchedUnderMpi() {
  for (const char *v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(v))
      return true;
  return false;
}

namespace {
std::atomic<Communicator *> gWorld{nullptr};
} // namespace

Communicator &world() {
  static std::unique_ptr<Communicator> w = [] {
#ifdef KILN_HAVE_MPI
    if (launchedUnderMpi())
      return makeMpiWorld();
#endif
    return makeSelf("world");
  }();
  gWorld.store(w.get());
  return *w;
}

void abortIfDistributed(int code) {
  Communicator *w = gWorld.load();
  if (!w || w->size() < 2)
    return;
#ifdef KILN_HAVE_MPI
  std::fflush(stdout);
  std::fflush(stderr);
  abortMpiWorld(*w, code);
#endif
}

} // namespace kiln::comm
