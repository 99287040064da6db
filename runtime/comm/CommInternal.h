//===- CommInternal.h - shared by the communicator backends -----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#ifndef KILN_COMM_COMMINTERNAL_H
#define KILN_COMM_COMMINTERNAL_H

#include "kiln/comm/Communicator.h"

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>

namespace kiln::comm {

struct Handle::State {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::chrono::steady_clock::time_point finished; // when done became true
  std::string error; // set when the backend reported a failure
  std::string what;  // "all_reduce on 'dp' (2 ranks, rank 0, 4096 bytes)"
  std::chrono::milliseconds timeout{0};
  std::function<void()> onTimeout; // the backend's reaction (MPI: abort at exit)
  /// Counts the threads blocked in wait() on the backend's operations (MPI:
  /// its engine then polls without pausing, as nobody computes); may be null.
  std::atomic<int> *waiters = nullptr;
};

/// A fresh state describing `op` on `c`.
std::shared_ptr<Handle::State> newState(const Communicator &c,
                                        const std::string &op, size_t bytes);
/// What a timed-out wait appends to its error: the MPI backend names the
/// ranks that do not answer or are behind (Engine::diagnose). Set once, by
/// the backend that makes the world.
void setStuckRankDiagnosis(std::function<std::string()> f);

/// Marks `s` done (with `error` when it failed) and wakes its waiters.
void complete(Handle::State &s, std::string error = {});
/// Bytes one rank sends in a bandwidth-optimal ring over n ranks for a
/// buffer of `totalBytes` (twice for an all-reduce: reduce-scatter and
/// all-gather).
uint64_t ringBytes(size_t n, size_t totalBytes, bool twice);
/// Refuses a count MPI cannot take and a reduction of i1.
void checkCount(const Communicator &c, const char *op, size_t count,
                rt::DType dtype, bool reduce);

#ifdef KILN_HAVE_MPI
/// MpiCommunicator.cpp: MPI_COMM_WORLD behind the engine thread.
std::unique_ptr<Communicator> makeMpiWorld();
/// MPI_Abort on the engine thread; does not return.
[[noreturn]] void abortMpiWorld(Communicator &world, int code);
#endif

} // namespace kiln::comm

#endif // KILN_COMM_COMMINTERNAL_H
