//===- Collectives.h - the runtime's seam to the communicator ---*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// A plan's collective kernels (`all_reduce`, `mesh_broadcast`: upstream shard
// ops; `all_reduce_start` and `all_reduce_wait`: a dist bucket; `send` and
// `recv`: a pipeline's point to point)
// reach the ranks through this interface, set on the Program
// (Program::setCollectives) and seen by kernels in ExecContext. The runtime
// core stays free of MPI: runtime/comm implements it over its Communicator
// (kiln/comm/MeshCollectives.h) and kiln-train installs it. Without one a
// program is a single rank and a collective is the identity.
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_COLLECTIVES_H
#define KILN_RUNTIME_COLLECTIVES_H

#include "kiln/runtime/DType.h"

#include <cstddef>
#include <string>

namespace kiln::rt {

enum class CollectiveOp { Sum, Max, Min };

class Collectives {
public:
  virtual ~Collectives() = default;
  /// Ranks in this rank's group of mesh axis `axis` ("dp"). Throws Error
  /// for an axis the mesh does not have.
  virtual int groupSize(const std::string &axis) = 0;
  /// This rank's index in its group of mesh axis `axis`.
  virtual int groupRank(const std::string &axis) = 0;
  /// recv (count elements) becomes block `groupRank` of the `op` over the
  /// group of send (groupSize * count elements). Blocks. Throws Error.
  virtual void reduceScatter(const std::string &axis, const void *send, void *recv,
                             size_t count, DType dtype, CollectiveOp op) = 0;
  /// recv (groupSize * count elements) becomes every member's send (count
  /// elements), in group order. Blocks. Throws Error.
  virtual void allGather(const std::string &axis, const void *send, void *recv,
                         size_t count, DType dtype) = 0;
  /// Block j of send (count elements each, groupSize blocks) goes to
  /// member j; recv block i (count elements) comes from member i. Blocks.
  /// Throws Error.
  virtual void allToAll(const std::string &axis, const void *send, void *recv,
                        size_t count, DType dtype) = 0;
  /// buf (count elements of dtype) becomes `op` over the group of `axis`,
  /// on every member. Blocks until done. Throws Error (a timed-out rank).
  virtual void allReduce(const std::string &axis, void *buf, size_t count,
                         DType dtype, CollectiveOp op) = 0;
  /// buf (count f32) becomes the sum over the group of `axis`, sent in the
  /// wire format `compression` ("bf16", "fp16", "int8") with error
  /// feedback kept under `key` (one per kernel: the same on every rank).
  /// Throws Error.
  virtual void allReduceCompressed(const std::string &axis, int key, float *buf,
                                   size_t count, const std::string &compression) = 0;
  /// Starts the reduction of buf (count elements of dtype) over the group of
  /// `axis` and returns at once; the communicator writes buf until
  /// waitAllReduce(buf). `compression` ("none", or as for
  /// allReduceCompressed, f32 sums only) with error feedback under `key`.
  /// Every rank starts its reductions in the same order. This default runs
  /// the reduction to the end here (no overlap).
  virtual void startAllReduce(const std::string &axis, void *buf, size_t count,
                              DType dtype, CollectiveOp op,
                              const std::string &compression, int key) {
    if (compression != "none")
      allReduceCompressed(axis, key, static_cast<float *>(buf), count, compression);
    else
      allReduce(axis, buf, count, dtype, op);
  }
  /// Blocks until the reduction startAllReduce started on buf is complete.
  /// Throws Error (a timed-out rank).
  virtual void waitAllReduce(void *buf) { (void)buf; }
  /// buf of the group member `root` (its index in the group) is copied to
  /// every member's buf. Blocks until done. Throws Error.
  virtual void broadcast(const std::string &axis, void *buf, size_t count,
                         DType dtype, int root) = 0;
  /// Sends buf (count elements of dtype) to member `peer` of the group of
  /// `axis`, matched by the peer's recv with the same `tag`, and returns at
  /// once: buf may be overwritten as soon as this returns (a pipeline
  /// stage's send never waits for its receiver). Every send completes by
  /// flushSends(). Throws Error.
  virtual void send(const std::string &axis, int peer, int tag, const void *buf,
                    size_t count, DType dtype) = 0;
  /// Blocks until the tensor member `peer` of the group of `axis` sends with
  /// `tag` has arrived in buf (count elements of dtype). Throws Error (a
  /// timed-out or dead peer).
  virtual void recv(const std::string &axis, int peer, int tag, void *buf,
                    size_t count, DType dtype) = 0;
  /// Starts receiving what recv with the same arguments will take, so that
  /// the transfer runs while the caller computes; recv then waits for it
  /// and copies it out. Optional: without it recv receives by itself.
  virtual void postRecv(const std::string &axis, int peer, int tag, size_t count,
                        DType dtype) {
    (void)axis, (void)peer, (void)tag, (void)count, (void)dtype;
  }
  /// Blocks until every send started has been received. Throws Error.
  virtual void flushSends() {}
};

} // namespace kiln::rt

#endif // KILN_RUNTIME_COLLECTIVES_H
