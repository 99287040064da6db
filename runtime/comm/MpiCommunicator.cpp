//===- MpiCommunicator.cpp - collectives over MPI ---------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// One engine thread per process initializes MPI (MPI_THREAD_FUNNELED: only
// it calls MPI), takes submitted operations in order, starts each as a
// non-blocking call (MPI_Iallreduce, ...) and tests the ones in flight until
// they complete, sleeping briefly when nothing moves. Callers only enqueue
// and wait on handles, so compute threads never block in MPI and
// communication progresses while they work. Errors are returned, not fatal
// (MPI_ERRORS_RETURN). f16 and bf16 reduce with user-defined operations
// (in float, rounded once per pairwise step).
//===----------------------------------------------------------------------===//
#include "CommInternal.h"

#include <mpi.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <deque>
#include <future>
#include <thread>
#include <vector>

namespace kiln::comm {

namespace {

std::string mpiError(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS)
    return "MPI error " + std::to_string(code);
  return std::string(buf, (size_t)len);
}

MPI_Datatype mpiType(rt::DType t) {
  using rt::DType;
  switch (t) {
  case DType::F32: return MPI_FLOAT;
  case DType::F64: return MPI_DOUBLE;
  case DType::F16:
  case DType::BF16:
  case DType::U16: return MPI_UINT16_T;
  case DType::I64: return MPI_INT64_T;
  case DType::I32: return MPI_INT32_T;
  case DType::I16: return MPI_INT16_T;
  case DType::I8: return MPI_INT8_T;
  case DType::U64: return MPI_UINT64_T;
  case DType::U32: return MPI_UINT32_T;
  case DType::U8:
  case DType::Bool: return MPI_UINT8_T;
  }
  return MPI_BYTE;
}

template <float (*Load)(uint16_t), uint16_t (*Store)(float), int Kind>
void halfOp(void *in, void *inout, int *len, MPI_Datatype *) {
  auto *a = static_cast<const uint16_t *>(in);
  auto *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i) {
    float x = Load(a[i]), y = Load(b[i]);
    float r = Kind == 0 ? x + y : Kind == 1 ? (x > y ? x : y) : (x < y ? x : y);
    b[i] = Store(r);
  }
}

/// The process's MPI state and engine thread.
class Engine {
public:
  Engine() {
    std::promise<std::string> ready;
    auto started = ready.get_future();
    thread_ = std::thread([this, &ready] { run(ready); });
    std::string err = started.get();
    if (!err.empty()) {
      thread_.join();
      throw CommError("MPI: " + err);
    }
  }

  ~Engine() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable())
      thread_.join();
  }

  int worldRank() const { return worldRank_; }

  /// Ends the job from the engine thread (the only one that calls MPI).
  [[noreturn]] void abort(int code) {
    auto st = std::make_shared<Handle::State>();
    {
      std::lock_guard<std::mutex> lock(m_);
      queue_.push_back({st, [code](std::string &) -> MPI_Request {
                          MPI_Abort(MPI_COMM_WORLD, code);
                          return MPI_REQUEST_NULL;
                        }});
    }
    cv_.notify_all();
    // MPI_Abort kills this process; should it return, leave anyway.
    std::this_thread::sleep_for(std::chrono::seconds(30));
    std::_Exit(code);
  }
  int worldSize() const { return worldSize_; }
  std::atomic<int> *waiters() { return &waiters_; }

  /// Runs `start` on the engine thread; it returns the request to drive
  /// (MPI_REQUEST_NULL: already complete) or sets `err`.
  using Start = std::function<MPI_Request(std::string &err)>;
  void submit(std::shared_ptr<Handle::State> st, Start start,
              bool counted = true) {
    st->onTimeout = [this] { broken_ = true; };
    st->waiters = &waiters_;
    {
      std::lock_guard<std::mutex> lock(m_);
      queue_.push_back({std::move(st), std::move(start), counted});
    }
    cv_.notify_all();
  }

  /// After a collective timed out: asks every other rank's engine how many
  /// operations it has started and whether its compute waits on the
  /// communicator, for `patience`, and names the ranks that do not answer or
  /// are behind. Empty when it learns nothing.
  std::string diagnose(std::chrono::milliseconds patience) {
    if (probeComm_ == MPI_COMM_NULL || worldSize_ < 2)
      return "";
    const int64_t mine = started_.load();
    struct Probe {
      int ask = 0;
      int64_t answer[2] = {-1, 0};
      std::shared_ptr<Handle::State> st;
    };
    std::vector<std::shared_ptr<Probe>> probes(worldSize_);
    for (int p = 0; p < worldSize_; ++p) {
      if (p == worldRank_)
        continue;
      auto pr = std::make_shared<Probe>();
      pr->st = std::make_shared<Handle::State>();
      pr->st->what = "probe of rank " + std::to_string(p);
      probes[p] = pr;
      submit(pr->st, [this, pr, p](std::string &err) {
        MPI_Request s = MPI_REQUEST_NULL, r = MPI_REQUEST_NULL;
        int rc = MPI_Isend(&pr->ask, 1, MPI_INT, p, kProbeTag, probeComm_, &s);
        if (rc == MPI_SUCCESS)
          MPI_Request_free(&s);
        if (rc == MPI_SUCCESS)
          rc = MPI_Irecv(pr->answer, 2, MPI_INT64_T, p, kReplyTag, probeComm_, &r);
        if (rc != MPI_SUCCESS)
          err = mpiError(rc);
        return r;
      }, /*counted=*/false);
    }
    auto deadline = std::chrono::steady_clock::now() + patience;
    auto allDone = [&] {
      for (auto &pr : probes)
        if (pr && !Handle(pr->st).done())
          return false;
      return true;
    };
    while (!allDone() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::string out;
    auto add = [&](const std::string &s) { out += (out.empty() ? "" : "; ") + s; };
    for (int p = 0; p < worldSize_; ++p) {
      if (!probes[p])
        continue;
      Handle h(probes[p]->st);
      if (!h.done() || probes[p]->answer[0] < 0) {
        add("rank " + std::to_string(p) + " does not answer (stopped or gone)");
        continue;
      }
      int64_t theirs = probes[p]->answer[0];
      if (theirs < mine)
        add("rank " + std::to_string(p) + " is behind: it has started " +
            std::to_string(theirs) + " operations, this rank " +
            std::to_string(mine) + ", and it is " +
            (probes[p]->answer[1] ? "waiting on another one"
                                  : "not waiting on the communicator (stuck "
                                    "in compute or I/O)"));
    }
    return out;
  }

  MPI_Op op(rt::DType t, ReduceOp o) {
    if (t == rt::DType::F16)
      return halfOps_[(int)o];
    if (t == rt::DType::BF16)
      return bf16Ops_[(int)o];
    return o == ReduceOp::Sum ? MPI_SUM : o == ReduceOp::Max ? MPI_MAX : MPI_MIN;
  }

private:
  struct Pending {
    std::shared_ptr<Handle::State> st;
    Start start;
    bool counted = true; // false for the probes
  };
  struct InFlight {
    MPI_Request req;
    std::shared_ptr<Handle::State> st;
  };

  /// Answers another rank's probe, if one came: {started, waiting}.
  void answerProbe() {
    if (probeReq_ == MPI_REQUEST_NULL)
      return;
    int flag = 0;
    MPI_Status status;
    if (MPI_Test(&probeReq_, &flag, &status) != MPI_SUCCESS || !flag)
      return;
    replies_.push_back({started_.load(), waiters_.load() > 0 ? 1 : 0});
    MPI_Request r = MPI_REQUEST_NULL;
    if (MPI_Isend(replies_.back().data(), 2, MPI_INT64_T, status.MPI_SOURCE,
                  kReplyTag, probeComm_, &r) == MPI_SUCCESS)
      MPI_Request_free(&r);
    MPI_Irecv(&probeIn_, 1, MPI_INT, MPI_ANY_SOURCE, kProbeTag, probeComm_,
              &probeReq_);
  }

  void run(std::promise<std::string> &ready) {
    int provided = 0;
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) {
      ready.set_value("MPI_Init_thread failed: " + mpiError(rc));
      return;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &worldRank_);
    if (MPI_Comm_dup(MPI_COMM_WORLD, &probeComm_) == MPI_SUCCESS) {
      MPI_Comm_set_errhandler(probeComm_, MPI_ERRORS_RETURN);
      MPI_Irecv(&probeIn_, 1, MPI_INT, MPI_ANY_SOURCE, kProbeTag, probeComm_,
                &probeReq_);
    }
    MPI_Comm_size(MPI_COMM_WORLD, &worldSize_);
    MPI_Op_create(&halfOp<rt::halfToFloat, rt::floatToHalf, 0>, 1, &halfOps_[0]);
    MPI_Op_create(&halfOp<rt::halfToFloat, rt::floatToHalf, 1>, 1, &halfOps_[1]);
    MPI_Op_create(&halfOp<rt::halfToFloat, rt::floatToHalf, 2>, 1, &halfOps_[2]);
    MPI_Op_create(&halfOp<rt::bf16ToFloat, rt::floatToBf16, 0>, 1, &bf16Ops_[0]);
    MPI_Op_create(&halfOp<rt::bf16ToFloat, rt::floatToBf16, 1>, 1, &bf16Ops_[1]);
    MPI_Op_create(&halfOp<rt::bf16ToFloat, rt::floatToBf16, 2>, 1, &bf16Ops_[2]);
    ready.set_value("");

    std::vector<InFlight> inflight;
    std::chrono::steady_clock::time_point stopDeadline;
    while (true) {
      std::deque<Pending> batch;
      {
        std::unique_lock<std::mutex> lock(m_);
        if (queue_.empty() && inflight.empty())
          // Idle: wake every 10 ms to answer probes from other ranks.
          cv_.wait_for(lock, std::chrono::milliseconds(10),
                       [&] { return stop_ || !queue_.empty(); });
        else if (queue_.empty() && waiters_.load() == 0)
          // Operations in flight while the callers compute: poll every
          // 50 us, leaving the cores to them. With a caller blocked in
          // wait() the loop polls without pausing: MPI moves a large
          // message only as fast as it is tested (shared-memory fragments).
          cv_.wait_for(lock, std::chrono::microseconds(50),
                       [&] { return stop_ || !queue_.empty(); });
        batch.swap(queue_);
        if (stop_ && batch.empty()) {
          // At exit: what is still in flight gets a moment to finish.
          auto now = std::chrono::steady_clock::now();
          if (stopDeadline == std::chrono::steady_clock::time_point())
            stopDeadline = now + std::chrono::seconds(2);
          if (inflight.empty() || broken_ || now > stopDeadline)
            break;
        }
      }
      for (Pending &p : batch) {
        std::string err;
        if (p.counted)
          ++started_;
        MPI_Request req = p.start(err);
        if (!err.empty() || req == MPI_REQUEST_NULL)
          complete(*p.st, err);
        else
          inflight.push_back({req, std::move(p.st)});
      }
      answerProbe();
      bool moved = !batch.empty();
      for (size_t i = 0; i < inflight.size();) {
        int flag = 0;
        int rc = MPI_Test(&inflight[i].req, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || flag) {
          complete(*inflight[i].st, rc == MPI_SUCCESS ? "" : mpiError(rc));
          inflight[i] = std::move(inflight.back());
          inflight.pop_back();
          moved = true;
        } else {
          ++i;
        }
      }
      // Polling for a blocked caller: when nothing completed, give the core
      // to any other runnable thread first (with more ranks than cores, the
      // rank being waited for), then test again.
      if (!moved && !inflight.empty())
        std::this_thread::yield();
    }
    if (probeReq_ != MPI_REQUEST_NULL) {
      MPI_Cancel(&probeReq_);
      MPI_Request_free(&probeReq_);
    }
    if (broken_ || !inflight.empty()) {
      // A collective never completed: finalizing would wait for it forever.
      // End the whole job (the launcher stops the other ranks).
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (MPI_Op *o : {&halfOps_[0], &halfOps_[1], &halfOps_[2], &bf16Ops_[0],
                      &bf16Ops_[1], &bf16Ops_[2]})
      MPI_Op_free(o);
    MPI_Finalize();
  }

  std::thread thread_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;
  bool stop_ = false;
  std::atomic<bool> broken_{false};
  std::atomic<int> waiters_{0};
  /// Operations this process has started (probes excluded): ranks running
  /// the same program start the same ones in the same order, so a rank
  /// with fewer is behind.
  std::atomic<int64_t> started_{0};
  // The probe service: a duplicate of the world on which every engine
  // answers "how far are you" (kProbeTag) with {started, waiting}.
  static constexpr int kProbeTag = 7001, kReplyTag = 7002;
  MPI_Comm probeComm_ = MPI_COMM_NULL;
  MPI_Request probeReq_ = MPI_REQUEST_NULL;
  int probeIn_ = 0;
  std::deque<std::array<int64_t, 2>> replies_; // alive while their sends are
  int worldRank_ = 0, worldSize_ = 1;
  MPI_Op halfOps_[3], bf16Ops_[3];
};

class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator(std::shared_ptr<Engine> engine, MPI_Comm comm, int rank,
                  int size, std::string name)
      : engine_(std::move(engine)), comm_(comm), rank_(rank), size_(size),
        name_(std::move(name)) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string &name() const override { return name_; }
  const char *backend() const override { return "mpi"; }
  Engine &engine() { return *engine_; }
  std::atomic<int> *progressWaiters() override { return engine_->waiters(); }

  Handle allReduce(const void *send, void *recv, size_t count, rt::DType dtype,
                   ReduceOp op) override {
    checkCount(*this, "all_reduce", count, dtype, true);
    size_t bytes = count * rt::dtypeSize(dtype);
    account(ringBytes(size_, bytes, true));
    MPI_Datatype t = mpiType(dtype);
    MPI_Op o = engine_->op(dtype, op);
    return go("all_reduce (" + std::string(reduceOpName(op)) + ")", bytes,
              [=, c = comm_](MPI_Request &r) {
                return MPI_Iallreduce(send == recv ? MPI_IN_PLACE : send, recv,
                                      (int)count, t, o, c, &r);
              });
  }

  Handle reduceScatter(const void *send, void *recv, size_t count,
                       rt::DType dtype, ReduceOp op) override {
    checkCount(*this, "reduce_scatter", count, dtype, true);
    size_t bytes = count * rt::dtypeSize(dtype);
    account(ringBytes(size_, bytes * size_, false));
    MPI_Datatype t = mpiType(dtype);
    MPI_Op o = engine_->op(dtype, op);
    return go("reduce_scatter (" + std::string(reduceOpName(op)) + ")",
              bytes * size_, [=, c = comm_](MPI_Request &r) {
                return MPI_Ireduce_scatter_block(send, recv, (int)count, t, o, c,
                                                 &r);
              });
  }

  Handle allGather(const void *send, void *recv, size_t count,
                   rt::DType dtype) override {
    checkCount(*this, "all_gather", count, dtype, false);
    size_t bytes = count * rt::dtypeSize(dtype);
    account(ringBytes(size_, bytes * size_, false));
    MPI_Datatype t = mpiType(dtype);
    return go("all_gather", bytes * size_, [=, c = comm_](MPI_Request &r) {
      return MPI_Iallgather(send, (int)count, t, recv, (int)count, t, c, &r);
    });
  }

  Handle allToAll(const void *send, void *recv, size_t count,
                  rt::DType dtype) override {
    checkCount(*this, "all_to_all", count, dtype, false);
    size_t bytes = count * rt::dtypeSize(dtype);
    account(ringBytes(size_, bytes * size_, false));
    MPI_Datatype t = mpiType(dtype);
    return go("all_to_all", bytes * size_, [=, c = comm_](MPI_Request &r) {
      return MPI_Ialltoall(send, (int)count, t, recv, (int)count, t, c, &r);
    });
  }

  Handle broadcast(void *buf, size_t count, rt::DType dtype, int root) override {
    checkCount(*this, "broadcast", count, dtype, false);
    checkRank("broadcast", "root", root);
    size_t bytes = count * rt::dtypeSize(dtype);
    account(ringBytes(size_, bytes, false));
    MPI_Datatype t = mpiType(dtype);
    return go("broadcast from rank " + std::to_string(root), bytes,
              [=, c = comm_](MPI_Request &r) {
                return MPI_Ibcast(buf, (int)count, t, root, c, &r);
              });
  }

  Handle send(const void *buf, size_t count, rt::DType dtype, int peer,
              int tag) override {
    checkCount(*this, "send", count, dtype, false);
    checkRank("send", "peer", peer);
    size_t bytes = count * rt::dtypeSize(dtype);
    account(bytes);
    MPI_Datatype t = mpiType(dtype);
    return go("send to rank " + std::to_string(peer), bytes,
              [=, c = comm_](MPI_Request &r) {
                return MPI_Isend(buf, (int)count, t, peer, tag, c, &r);
              });
  }

  Handle recv(void *buf, size_t count, rt::DType dtype, int peer,
              int tag) override {
    checkCount(*this, "recv", count, dtype, false);
    checkRank("recv", "peer", peer);
    size_t bytes = count * rt::dtypeSize(dtype);
    MPI_Datatype t = mpiType(dtype);
    return go("recv from rank " + std::to_string(peer), bytes,
              [=, c = comm_](MPI_Request &r) {
                return MPI_Irecv(buf, (int)count, t, peer, tag, c, &r);
              });
  }

  Handle barrier() override {
    ++stats_.collectives;
    return go("barrier", 0, [c = comm_](MPI_Request &r) {
      return MPI_Ibarrier(c, &r);
    });
  }

  std::unique_ptr<Communicator> split(int color, int key,
                                      const std::string &name) override {
    if (color < 0)
      throw CommError("split of '" + name_ + "': color " +
                      std::to_string(color) + " is negative");
    return splitWith(name, [=](MPI_Comm c, MPI_Comm *out) {
      return MPI_Comm_split(c, color, key, out);
    });
  }

  std::unique_ptr<Communicator> splitShared(const std::string &name) override {
    return splitWith(name, [r = rank_](MPI_Comm c, MPI_Comm *out) {
      return MPI_Comm_split_type(c, MPI_COMM_TYPE_SHARED, r, MPI_INFO_NULL, out);
    });
  }

private:
  template <typename F>
  std::unique_ptr<Communicator> splitWith(const std::string &name, F how) {
    auto st = newState(*this, "split into '" + name + "'", 0);
    // Shared with the engine: a split that times out must not leave it
    // writing into this frame.
    struct Out {
      MPI_Comm comm = MPI_COMM_NULL;
      int rank = 0, size = 1;
    };
    auto out = std::make_shared<Out>();
    engine_->submit(st, [out, how, c = comm_](std::string &err) {
      int rc = how(c, &out->comm);
      if (rc != MPI_SUCCESS) {
        err = mpiError(rc);
        return MPI_REQUEST_NULL;
      }
      MPI_Comm_set_errhandler(out->comm, MPI_ERRORS_RETURN);
      MPI_Comm_rank(out->comm, &out->rank);
      MPI_Comm_size(out->comm, &out->size);
      return MPI_REQUEST_NULL;
    });
    Handle(st).wait();
    auto sub = std::make_unique<MpiCommunicator>(engine_, out->comm, out->rank,
                                                 out->size, name);
    sub->setTimeout(timeout_);
    return sub;
  }

  void account(uint64_t bytes) {
    ++stats_.collectives;
    stats_.bytesSent += bytes;
    stats_.interNodeBytes += bytes; // a flat communicator cannot tell
  }

  void checkRank(const char *op, const char *what, int r) const {
    if (r < 0 || r >= size_)
      throw CommError(std::string(op) + " on '" + name_ + "': " + what + " " +
                      std::to_string(r) + " is not a rank of " +
                      std::to_string(size_));
  }

  template <typename F>
  Handle go(const std::string &op, size_t bytes, F call) {
    auto st = newState(*this, op, bytes);
    engine_->submit(st, [call](std::string &err) {
      MPI_Request r = MPI_REQUEST_NULL;
      int rc = call(r);
      if (rc != MPI_SUCCESS) {
        err = mpiError(rc);
        return MPI_REQUEST_NULL;
      }
      return r;
    });
    return Handle(st);
  }

  std::shared_ptr<Engine> engine_;
  MPI_Comm comm_;
  int rank_, size_;
  std::string name_;
};

} // namespace

void abortMpiWorld(Communicator &world, int code) {
  static_cast<MpiCommunicator &>(world).engine().abort(code);
}

std::unique_ptr<Communicator> makeMpiWorld() {
  auto engine = std::make_shared<Engine>();
  std::weak_ptr<Engine> weak = engine;
  setStuckRankDiagnosis([weak] {
    auto e = weak.lock();
    return e ? e->diagnose(std::chrono::seconds(2)) : std::string();
  });
  return std::make_unique<MpiCommunicator>(engine, MPI_COMM_WORLD,
                                           engine->worldRank(),
                                           engine->worldSize(), "world");
}

} // namespace kiln::comm
