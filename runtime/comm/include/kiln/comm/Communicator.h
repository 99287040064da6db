//===- Communicator.h - collectives between ranks ---------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// One interface for every collective a distributed Kiln program issues
// (docs/Distributed.md; ../shared/design/DISTRIBUTION.md, "Runtime"):
// all-reduce, reduce-scatter, all-gather, all-to-all, broadcast, send, recv
// and barrier, each asynchronous: it returns a Handle at once and runs while
// the caller computes; Handle::wait() blocks until it is done. Backends:
//   - Self: one rank, no MPI (every run launched without a launcher);
//   - MPI (MpiCommunicator.cpp): CPU ranks under mpirun/srun. One engine
//     thread per process owns MPI, starts the non-blocking call of each
//     collective in submission order and drives them to completion, so
//     communication progresses while the compute threads work.
// Collectives on one communicator are issued by every member in the same
// order (MPI's rule). A wait that does not complete within the timeout
// (KILN_COMM_TIMEOUT seconds, default 600) throws CommError naming the
// collective, the group and the time waited: a stuck or lost rank never
// hangs the others forever. (A rank that dies makes the launcher end the
// job: mpirun names it.) Sub-communicators (one per mesh-axis group) come
// from split().
//===----------------------------------------------------------------------===//
#ifndef KILN_COMM_COMMUNICATOR_H
#define KILN_COMM_COMMUNICATOR_H

#include "kiln/runtime/DType.h"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

namespace kiln::comm {

/// A collective that failed or timed out; what() is one line.
class CommError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

enum class ReduceOp { Sum, Max, Min };
const char *reduceOpName(ReduceOp op);

/// Completion of one asynchronous operation. Waiting twice is a no-op.
class Handle {
public:
  struct State;
  Handle() = default;
  explicit Handle(std::shared_ptr<State> s) : state_(std::move(s)) {}
  /// Whether it has completed (never blocks). An empty handle is done.
  bool done() const;
  /// Blocks until it completes; throws CommError when it failed or did not
  /// complete within the communicator's timeout.
  void wait();
  /// As wait(), for a communicator's own worker thread: its wait is not
  /// compute standing still, so the backend keeps polling gently (a caller
  /// blocked in wait() makes the MPI engine poll without pausing).
  void waitInBackground();
  /// When it completed (now, if it has not or the handle is empty).
  std::chrono::steady_clock::time_point finishedAt() const;

private:
  void waitImpl(bool counted);
  std::shared_ptr<State> state_;
};

/// What one communicator has sent, for the tests and the compression
/// benchmark: bytes this rank put on the wire by the algorithm's count (a
/// ring all-reduce of n bytes over N ranks sends 2(N-1)/N n).
struct CommStats {
  uint64_t collectives = 0, bytesSent = 0;
  /// Of bytesSent, what crossed between nodes (hierarchical communicators;
  /// a flat one cannot tell and counts everything here too).
  uint64_t interNodeBytes = 0;
};

class Communicator {
public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "world", "dp", ...: named in messages.
  virtual const std::string &name() const = 0;
  /// The backend: "self" or "mpi".
  virtual const char *backend() const = 0;
  /// The count of threads blocked in Handle::wait() on this backend's
  /// operations (its progress engine polls harder while it is non-zero);
  /// null when the backend has no engine. A communicator built on another
  /// (hierarchical) gives its handles the other's counter.
  virtual std::atomic<int> *progressWaiters() { return nullptr; }

  /// recv[i] = op over ranks of send[i], i < count. send == recv is allowed.
  virtual Handle allReduce(const void *send, void *recv, size_t count,
                           rt::DType dtype, ReduceOp op) = 0;
  /// send holds size()·count elements; rank r receives block r of the
  /// reduction (count elements).
  virtual Handle reduceScatter(const void *send, void *recv, size_t count,
                               rt::DType dtype, ReduceOp op) = 0;
  /// recv (size()·count elements) holds every rank's `count`, in rank order.
  virtual Handle allGather(const void *send, void *recv, size_t count,
                           rt::DType dtype) = 0;
  /// Block j of send (count elements) goes to rank j; recv block i comes
  /// from rank i.
  virtual Handle allToAll(const void *send, void *recv, size_t count,
                          rt::DType dtype) = 0;
  /// buf of `root` is copied to every rank's buf.
  virtual Handle broadcast(void *buf, size_t count, rt::DType dtype,
                           int root) = 0;
  virtual Handle send(const void *buf, size_t count, rt::DType dtype, int peer,
                      int tag) = 0;
  virtual Handle recv(void *buf, size_t count, rt::DType dtype, int peer,
                      int tag) = 0;
  virtual Handle barrier() = 0;

  /// The members with the same `color` form a new communicator, ordered by
  /// `key` then rank; collective over this one (every member calls it).
  virtual std::unique_ptr<Communicator> split(int color, int key,
                                              const std::string &name) = 0;
  /// The members that share memory with this rank (one node), by rank;
  /// collective over this one. MPI: MPI_Comm_split_type(SHARED).
  virtual std::unique_ptr<Communicator> splitShared(const std::string &name) = 0;

  CommStats stats() const { return stats_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  void setTimeout(std::chrono::milliseconds t) { timeout_ = t; }

protected:
  CommStats stats_;
  std::chrono::milliseconds timeout_ = defaultTimeout();

public:
  /// KILN_COMM_TIMEOUT (seconds, may be fractional) or 600 s.
  static std::chrono::milliseconds defaultTimeout();
};

/// Whether this process was started by an MPI launcher (mpirun, srun:
/// OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK in the environment).
bool launchedUnderMpi();

/// The world: MPI when launchedUnderMpi() and Kiln was built with MPI, else
/// the one-rank Self communicator. Made once per process; throws CommError.
Communicator &world();

/// Ends the whole job at once with exit status `code` when world() has
/// several ranks (MPI_Abort: the launcher stops the others, which would
/// otherwise wait for this rank in their next collective until the
/// timeout); returns when the world is one rank or was never made. For a
/// rank that stops on an error.
void abortIfDistributed(int code);

/// A one-rank communicator (for tests and 1-rank runs).
std::unique_ptr<Communicator> makeSelf(const std::string &name = "world");

/// `flat`'s ranks grouped into nodes: `ranksPerNode` consecutive ranks each
/// (simulating several nodes on one machine), or with 0 the ranks that share
/// memory (MPI_Comm_split_type). Its all-reduce is intra-node reduce-scatter,
/// inter-node all-reduce of the shard, intra-node all-gather, so only 1/L of
/// the buffer crosses between nodes (L ranks per node); every other
/// collective is `flat`'s, issued in order after the all-reduces before it.
/// Nodes must have equal sizes. Collective over `flat`, which must outlive
/// the result and not be used directly while it lives; throws CommError.
std::unique_ptr<Communicator> makeHierarchical(Communicator &flat,
                                               int ranksPerNode);

} // namespace kiln::comm

#endif // KILN_COMM_COMMUNICATOR_H
