//===- CommCheck.cpp - the communicator on 1, 2 and 4 ranks -----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// kiln-comm-check runs every collective of kiln::comm::world() and checks
// each rank's result against its closed form (the inputs are small integers,
// exact in every dtype, bf16 and f16 included), in place and not, on the
// world and on split groups; that a collective progresses while the caller
// computes (no wait() called); the hierarchical all-reduce (simulated nodes
// of 2 ranks at 4 ranks, and the shared-memory nodes); and the bytes the
// communicator counts, inter-node bytes included; the compressed all-reduce
// (bf16, fp16, int8 with error feedback: bounded drift, int8's byte ratio).
// Run
// alone (the Self backend) or under `mpirun -np N`. Rank 0 prints
// "comm: N ranks (BACKEND), K checks passed" or the failures; exit 1 on any.
//   --hang: rank 1 skips an all-reduce; rank 0 must time out with a message.
//   --die:  rank 1 SIGKILLs itself before an all-reduce; the job must end.
//===----------------------------------------------------------------------===//
#include "kiln/comm/Communicator.h"
#include "kiln/comm/Compression.h"

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace kiln;
using namespace kiln::comm;
using rt::DType;

namespace {

int checks = 0, failures = 0;

void expect(bool ok, const std::string &what, int rank) {
  ++checks;
  if (!ok) {
    ++failures;
    std::fprintf(stderr, "FAIL rank %d: %s\n", rank, what.c_str());
  }
}

/// Stores and loads a small integer value in any dtype.
void put(std::vector<uint8_t> &buf, DType t, size_t i, double v) {
  uint8_t *p = buf.data() + i * rt::dtypeSize(t);
  switch (t) {
  case DType::F32: { float x = (float)v; std::memcpy(p, &x, 4); break; }
  case DType::F64: std::memcpy(p, &v, 8); break;
  case DType::F16: { uint16_t x = rt::floatToHalf((float)v); std::memcpy(p, &x, 2); break; }
  case DType::BF16: { uint16_t x = rt::floatToBf16((float)v); std::memcpy(p, &x, 2); break; }
  case DType::I64: { int64_t x = (int64_t)v; std::memcpy(p, &x, 8); break; }
  case DType::I32: { int32_t x = (int32_t)v; std::memcpy(p, &x, 4); break; }
  default: { uint8_t x = (uint8_t)v; *p = x; break; }
  }
}
double get(const std::vector<uint8_t> &buf, DType t, size_t i) {
  const uint8_t *p = buf.data() + i * rt::dtypeSize(t);
  switch (t) {
  case DType::F32: { float x; std::memcpy(&x, p, 4); return x; }
  case DType::F64: { double x; std::memcpy(&x, p, 8); return x; }
  case DType::F16: { uint16_t x; std::memcpy(&x, p, 2); return rt::halfToFloat(x); }
  case DType::BF16: { uint16_t x; std::memcpy(&x, p, 2); return rt::bf16ToFloat(x); }
  case DType::I64: { int64_t x; std::memcpy(&x, p, 8); return (double)x; }
  case DType::I32: { int32_t x; std::memcpy(&x, p, 4); return x; }
  default: return *p;
  }
}

/// Rank r's i-th input: small, exact everywhere, different per rank.
double value(int r, size_t i) { return (double)((r + 1) * (int)(i % 7)) - r; }

void checkAllReduce(Communicator &c, DType t, ReduceOp op, bool inPlace) {
  const size_t n = 1000;
  const int r = c.rank(), N = c.size();
  std::vector<uint8_t> send(n * rt::dtypeSize(t)), recv(send.size());
  for (size_t i = 0; i < n; ++i)
    put(send, t, i, value(r, i));
  std::vector<uint8_t> &out = inPlace ? send : recv;
  c.allReduce(send.data(), out.data(), n, t, op).wait();
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    double want = value(0, i);
    for (int q = 1; q < N; ++q) {
      double v = value(q, i);
      want = op == ReduceOp::Sum ? want + v
             : op == ReduceOp::Max ? std::max(want, v) : std::min(want, v);
    }
    bad += get(out, t, i) != want;
  }
  expect(!bad, std::string("all_reduce ") + reduceOpName(op) + " " +
                   rt::dtypeName(t) + (inPlace ? " in place" : "") + " on '" +
                   c.name() + "': " + std::to_string(bad) + " wrong",
         r);
}

void checkOthers(Communicator &c) {
  const int r = c.rank(), N = c.size();
  const size_t n = 37;
  // reduce_scatter: block j of rank q is q + j + i; rank r gets block r.
  std::vector<float> send(n * N), recv(n);
  for (int j = 0; j < N; ++j)
    for (size_t i = 0; i < n; ++i)
      send[j * n + i] = (float)(r + j + (int)i);
  c.reduceScatter(send.data(), recv.data(), n, DType::F32, ReduceOp::Sum).wait();
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i)
    bad += recv[i] != (float)(N * (N - 1) / 2 + N * (r + (int)i));
  expect(!bad, "reduce_scatter on '" + c.name() + "'", r);

  // all_gather: rank q's block is 100 q + i.
  std::vector<int64_t> mine(n), all(n * N);
  for (size_t i = 0; i < n; ++i)
    mine[i] = 100 * r + (int64_t)i;
  c.allGather(mine.data(), all.data(), n, DType::I64).wait();
  bad = 0;
  for (int q = 0; q < N; ++q)
    for (size_t i = 0; i < n; ++i)
      bad += all[q * n + i] != 100 * q + (int64_t)i;
  expect(!bad, "all_gather on '" + c.name() + "'", r);

  // all_to_all: rank q sends 1000 q + j to rank j.
  std::vector<int32_t> to(n * N), from(n * N);
  for (int j = 0; j < N; ++j)
    for (size_t i = 0; i < n; ++i)
      to[j * n + i] = 1000 * r + 10 * j + (int)i;
  c.allToAll(to.data(), from.data(), n, DType::I32).wait();
  bad = 0;
  for (int q = 0; q < N; ++q)
    for (size_t i = 0; i < n; ++i)
      bad += from[q * n + i] != 1000 * q + 10 * r + (int)i;
  expect(!bad, "all_to_all on '" + c.name() + "'", r);

  // broadcast from the last rank.
  std::vector<double> b(n, r == N - 1 ? 0 : -1);
  if (r == N - 1)
    for (size_t i = 0; i < n; ++i)
      b[i] = 0.5 * (double)i;
  c.broadcast(b.data(), n, DType::F64, N - 1).wait();
  bad = 0;
  for (size_t i = 0; i < n; ++i)
    bad += b[i] != 0.5 * (double)i;
  expect(!bad, "broadcast on '" + c.name() + "'", r);

  // send/recv around the ring.
  if (N > 1) {
    std::vector<int64_t> out(n, r), in(n, -1);
    Handle hr = c.recv(in.data(), n, DType::I64, (r + N - 1) % N, 7);
    Handle hs = c.send(out.data(), n, DType::I64, (r + 1) % N, 7);
    hs.wait();
    hr.wait();
    bad = 0;
    for (size_t i = 0; i < n; ++i)
      bad += in[i] != (r + N - 1) % N;
    expect(!bad, "send/recv around the ring on '" + c.name() + "'", r);
  }
  c.barrier().wait();
}

} // namespace

int main(int argc, char **argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  try {
    Communicator &w = world();
    const int r = w.rank(), N = w.size();
    if (mode == "--hang" || mode == "--die") {
      if (N < 2) {
        std::fprintf(stderr, "%s needs 2 ranks or more\n", mode.c_str());
        return 2;
      }
      std::vector<float> x(1024, 1.0f);
      if (r == 1) {
        if (mode == "--die")
          std::raise(SIGKILL);
        std::this_thread::sleep_for(std::chrono::seconds(60));
        return 0;
      }
      w.allReduce(x.data(), x.data(), x.size(), DType::F32, ReduceOp::Sum).wait();
      std::printf("rank %d: the all-reduce completed without rank 1\n", r);
      return 0;
    }

    for (DType t : {DType::F32, DType::F64, DType::I64, DType::I32, DType::BF16,
                    DType::F16})
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min})
        checkAllReduce(w, t, op, false);
    checkAllReduce(w, DType::F32, ReduceOp::Sum, true);
    checkOthers(w);

    // Groups: even and odd ranks, ordered by descending world rank.
    auto g = w.split(r % 2, -r, "parity");
    expect(g->size() == (N + 1 - r % 2) / 2, "split size", r);
    int want = 0; // my index among my parity's ranks, highest first
    for (int q = N - 1; q > r; --q)
      want += q % 2 == r % 2;
    expect(g->rank() == want, "split rank " + std::to_string(g->rank()) +
                                  ", want " + std::to_string(want), r);
    checkAllReduce(*g, DType::F32, ReduceOp::Sum, false);
    checkOthers(*g);

    // Hierarchical: nodes of 2 ranks (simulated) when there are 4 or more,
    // and the ranks sharing memory (here: all) otherwise.
    for (int rpn : {N >= 4 && N % 2 == 0 ? 2 : 0, 0}) {
      auto h = makeHierarchical(w, rpn);
      for (DType t : {DType::F32, DType::BF16, DType::I64})
        for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min})
          checkAllReduce(*h, t, op, false);
      checkAllReduce(*h, DType::F64, ReduceOp::Sum, true);
      checkOthers(*h);
      // Only a 1/L shard crosses nodes: 1000 f32 with L = 2, M = N / 2
      // send 2 (M-1)/M x 500 x 4 bytes between nodes.
      CommStats before = h->stats();
      std::vector<float> x(1000, 1.0f);
      h->allReduce(x.data(), x.data(), 1000, DType::F32, ReduceOp::Sum).wait();
      CommStats after = h->stats();
      expect(x[999] == (float)N, "hierarchical sum", r);
      if (rpn == 2) {
        uint64_t M = N / 2, want = 2 * (M - 1) * 2000 / M;
        expect(after.interNodeBytes - before.interNodeBytes == want,
               "inter-node bytes " +
                   std::to_string(after.interNodeBytes - before.interNodeBytes) +
                   ", want " + std::to_string(want),
               r);
      }
    }
    if (N >= 2) {
      try {
        makeHierarchical(w, N + 1);
        expect(false, "nodes that do not divide the ranks were accepted", r);
      } catch (const CommError &e) {
        expect(std::string(e.what()) ==
                   std::to_string(N) + " ranks do not divide into nodes of " +
                       std::to_string(N + 1) + " (--ranks-per-node)",
               std::string("message: ") + e.what(), r);
      }
    }

    // Compressed all-reduce with error feedback: over K steps of the same
    // input the summed outputs stay within about one step's error of K
    // times the exact sum (without feedback they would drift K times that),
    // and int8 sends at most 1/3.5 of f32's bytes.
    for (Compression kind : {Compression::BF16, Compression::FP16, Compression::Int8}) {
      const size_t n = 4099; // not a multiple of the ranks
      const int K = 40;
      std::vector<float> mine(n);
      std::vector<double> exact(n, 0.0), total(n, 0.0);
      for (size_t i = 0; i < n; ++i) {
        for (int q = 0; q < N; ++q) {
          float v = (float)(std::sin(0.37 * (double)i * (q + 1)) * (1 + i % 5));
          exact[i] += v;
          if (q == r)
            mine[i] = v;
        }
      }
      CompressedAllReducer red(w, kind);
      double first = 0, drift = 0;
      for (int k = 0; k < K; ++k) {
        std::vector<float> buf(mine);
        red.allReduceSum(3, buf.data(), n);
        for (size_t i = 0; i < n; ++i) {
          total[i] += buf[i];
          if (k == 0)
            first = std::max(first, std::fabs(buf[i] - exact[i]));
        }
      }
      for (size_t i = 0; i < n; ++i)
        drift = std::max(drift, std::fabs(total[i] - K * exact[i]));
      std::string name = compressionName(kind);
      expect(first > 0 && first < 0.05 * (N + 1),
             name + ": one step's error " + std::to_string(first), r);
      expect(drift <= 3 * first,
             name + ": after " + std::to_string(K) + " steps the error is " +
                 std::to_string(drift) + ", one step's is " + std::to_string(first),
             r);
      if (kind == Compression::Int8 && N > 1) {
        std::vector<float> big(1 << 16, 1.0f);
        CommStats s0 = w.stats();
        w.allReduce(big.data(), big.data(), big.size(), DType::F32, ReduceOp::Sum).wait();
        CommStats s1 = w.stats();
        red.allReduceSum(4, big.data(), big.size());
        CommStats s2 = w.stats();
        double ratio = double(s1.bytesSent - s0.bytesSent) /
                       double(s2.bytesSent - s1.bytesSent);
        expect(ratio >= 3.5, "int8 sends 1/" + std::to_string(ratio) +
                                 " of f32's bytes, want at most 1/3.5", r);
      }
    }

    // Progress without wait(): the engine drives a collective while this
    // thread computes.
    {
      std::vector<float> big(1 << 18, 1.0f);
      Handle h = w.allReduce(big.data(), big.data(), big.size(), DType::F32,
                             ReduceOp::Sum);
      auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      volatile double sink = 0;
      while (!h.done() && std::chrono::steady_clock::now() < until)
        for (int i = 0; i < 100000; ++i)
          sink = sink + std::sqrt((double)i);
      expect(h.done(), "a 1 MiB all-reduce did not complete while computing", r);
      h.wait();
      expect(big[12345] == (float)N, "the overlapped all-reduce's sum", r);
    }

    // Bytes counted: one all-reduce of 4000 bytes sends 2 (N-1)/N of it.
    {
      CommStats before = w.stats();
      std::vector<float> x(1000, 1.0f);
      w.allReduce(x.data(), x.data(), 1000, DType::F32, ReduceOp::Sum).wait();
      CommStats after = w.stats();
      uint64_t want = N > 1 ? 2 * (uint64_t)4000 * (N - 1) / N : 0;
      expect(after.bytesSent - before.bytesSent == want &&
                 after.collectives == before.collectives + 1,
             "bytes counted " + std::to_string(after.bytesSent - before.bytesSent) +
                 ", want " + std::to_string(want), r);
    }

    // Errors are one line naming the operation.
    try {
      std::vector<double> b(4);
      w.broadcast(b.data(), 4, DType::F64, N);
      expect(false, "broadcast from a rank out of range was accepted", r);
    } catch (const CommError &e) {
      expect(std::string(e.what()) == "broadcast on 'world': root " +
                                          std::to_string(N) + " is not a rank of " +
                                          std::to_string(N),
             std::string("message: ") + e.what(), r);
    }

    int bad = failures;
    w.allReduce(&bad, &bad, 1, DType::I32, ReduceOp::Sum).wait();
    if (r == 0) {
      if (bad)
        std::printf("comm: %d rank%s (%s), %d failures\n", N, N == 1 ? "" : "s", w.backend(), bad);
      else
        std::printf("comm: %d rank%s (%s), %d checks passed\n", N,
                    N == 1 ? "" : "s", w.backend(),
                    checks);
    }
    return bad ? 1 : 0;
  } catch (const CommError &e) {
    std::fprintf(stderr, "kiln-comm-check: %s\n", e.what());
    return 1;
  }
}
