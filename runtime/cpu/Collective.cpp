//===- Collective.cpp - collective kernels ----------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// `all_reduce` (KRTKernels.td): the output is the input's sum, max, min or
// average over the ranks of mesh axis `axis`; `mesh_broadcast`: rank `root`'s
// input. Both run on the program's Collectives (ExecContext::collectives;
// kiln-train installs one over runtime/comm). Without one the program is a
// single rank: a copy. `all_reduce_start` and `all_reduce_wait` are a
// bucket's two halves (dist.all_reduce_start/wait): the start packs its
// inputs into the bucket and starts the reduction, the wait waits and
// unpacks, and the steps between them compute meanwhile.
//===----------------------------------------------------------------------===//
#include "GradUtil.h"
#include "Kernels.h"

#include <atomic>
#include <cstring>
#include <memory>
#include <vector>

namespace kiln::rt::cpu {
namespace {

using namespace grad;

/// The mesh axis a collective kernel works over (`axis`).
std::string meshAxis(const KernelSpec &spec) {
  std::string axis = spec.attrs.getString("axis", "");
  if (axis.empty())
    fail(spec, "no mesh axis");
  return axis;
}

/// The reduction named by a collective kernel's `reduction` parameter; an
/// average needs floating-point `dtype`.
struct Reduction {
  CollectiveOp op;
  bool average;
};
Reduction parseReduction(const KernelSpec &spec, DType dtype) {
  std::string reduction = spec.attrs.getString("reduction", "");
  bool average = reduction == "average";
  if (!average && reduction != "sum" && reduction != "max" && reduction != "min")
    fail(spec, "reduction must be sum, max, min or average, got '" +
                   reduction + "'");
  if (average && dtype != DType::F32 && dtype != DType::F64)
    unsupportedType(spec, dtype);
  CollectiveOp op = reduction == "max"   ? CollectiveOp::Max
                    : reduction == "min" ? CollectiveOp::Min
                                         : CollectiveOp::Sum;
  return {op, average};
}

/// The wire format (`compression`): none, or bf16/fp16/int8 for sums and
/// averages of f32.
std::string parseCompression(const KernelSpec &spec, DType dtype,
                             const Reduction &red) {
  std::string compression = spec.attrs.getString("compression", "none");
  if (compression != "none" && compression != "bf16" && compression != "fp16" &&
      compression != "int8")
    fail(spec, "compression must be none, bf16, fp16 or int8, got '" +
                   compression + "'");
  if (compression != "none" && (dtype != DType::F32 || red.op != CollectiveOp::Sum))
    fail(spec, "compression applies to sums and averages of f32");
  return compression;
}

/// `dst` = `src` / ranks (n elements of f32 or f64; in place when equal).
void divideByRanks(const void *src, void *dst, size_t n, DType dtype, int ranks) {
  if (dtype == DType::F32) {
    const float *s = static_cast<const float *>(src);
    float *d = static_cast<float *>(dst);
    const float inv = 1.0f / (float)ranks;
    for (size_t i = 0; i < n; ++i)
      d[i] = s[i] * inv;
  } else {
    const double *s = static_cast<const double *>(src);
    double *d = static_cast<double *>(dst);
    const double inv = 1.0 / (double)ranks;
    for (size_t i = 0; i < n; ++i)
      d[i] = s[i] * inv;
  }
}

/// The bytes of each of a bucket's tensors (`parts`, "input" or "output"),
/// which have the bucket's element type and fill it exactly.
std::vector<size_t> bucketParts(const KernelSpec &spec,
                                const std::vector<const TensorDesc *> &parts,
                                const TensorDesc &bucket, const char *what) {
  std::vector<size_t> bytes;
  size_t total = 0;
  for (const TensorDesc *d : parts) {
    if (!d || d->dtype != bucket.dtype)
      fail(spec, std::string("every ") + what + " has the bucket's element type");
    bytes.push_back(d->bytes());
    total += d->bytes();
  }
  if (total != bucket.bytes())
    fail(spec, std::string("the ") + what + "s hold " + std::to_string(total) +
                   " bytes, the bucket " + std::to_string(bucket.bytes()));
  return bytes;
}

std::unique_ptr<Kernel> makeAllReduce(const KernelSpec &spec) {
  expectArity(spec, 1, 1);
  sameDesc(spec, spec.outputs[0], spec.inputs[0], "the output");
  const TensorDesc &d = *spec.inputs[0];
  const std::string axis = meshAxis(spec);
  const Reduction red = parseReduction(spec, d.dtype);
  const std::string compression = parseCompression(spec, d.dtype, red);
  // Error feedback is kept per kernel: the n-th all_reduce a process loads
  // has key n on every rank (every rank loads the same plan).
  static std::atomic<int> nextKey{0};
  const int key = compression != "none" ? nextKey.fetch_add(1) : -1;
  const size_t bytes = d.bytes(), n = (size_t)d.numel();
  const DType dtype = d.dtype;
  return make([=](ExecContext &ctx, const void *const *in, void *const *out) {
    if (in[0] != out[0])
      std::memmove(out[0], in[0], bytes);
    if (!ctx.collectives)
      return;
    if (compression != "none")
      ctx.collectives->allReduceCompressed(axis, key, static_cast<float *>(out[0]),
                                           n, compression);
    else
      ctx.collectives->allReduce(axis, out[0], n, dtype, red.op);
    int ranks = red.average ? ctx.collectives->groupSize(axis) : 1;
    if (ranks > 1)
      divideByRanks(out[0], out[0], n, dtype, ranks);
  });
}

/// all_reduce_start: packs the inputs into the bucket (the output) and
/// starts its reduction; the communicator owns the bucket until the wait.
std::unique_ptr<Kernel> makeAllReduceStart(const KernelSpec &spec) {
  if (spec.inputs.empty() || spec.outputs.size() != 1)
    fail(spec, "packs one or more inputs into one bucket");
  const TensorDesc &bucket = *spec.outputs[0];
  const std::string axis = meshAxis(spec);
  const Reduction red = parseReduction(spec, bucket.dtype);
  const std::string compression = parseCompression(spec, bucket.dtype, red);
  const std::vector<size_t> bytes = bucketParts(spec, spec.inputs, bucket, "input");
  static std::atomic<int> nextKey{1 << 20}; // apart from all_reduce's keys
  const int key = compression != "none" ? nextKey.fetch_add(1) : -1;
  const size_t n = (size_t)bucket.numel();
  const DType dtype = bucket.dtype;
  return make([=](ExecContext &ctx, const void *const *in, void *const *out) {
    // One input may be the bucket itself (in place): nothing to pack.
    char *dst = static_cast<char *>(out[0]);
    for (size_t k = 0; k < bytes.size(); ++k) {
      if (in[k] != dst)
        std::memmove(dst, in[k], bytes[k]);
      dst += bytes[k];
    }
    if (ctx.collectives)
      ctx.collectives->startAllReduce(axis, out[0], n, dtype, red.op, compression,
                                      key);
  });
}

/// all_reduce_wait: waits for the bucket and unpacks it (averaged).
std::unique_ptr<Kernel> makeAllReduceWait(const KernelSpec &spec) {
  if (spec.inputs.size() != 1 || spec.outputs.empty())
    fail(spec, "unpacks one bucket into one or more outputs");
  const TensorDesc &bucket = *spec.inputs[0];
  const std::string axis = meshAxis(spec);
  const Reduction red = parseReduction(spec, bucket.dtype);
  const std::vector<size_t> bytes = bucketParts(spec, spec.outputs, bucket, "output");
  const DType dtype = bucket.dtype;
  const size_t es = dtypeSize(dtype);
  return make([=](ExecContext &ctx, const void *const *in, void *const *out) {
    int ranks = 1;
    if (ctx.collectives) {
      ctx.collectives->waitAllReduce(const_cast<void *>(in[0]));
      if (red.average)
        ranks = ctx.collectives->groupSize(axis);
    }
    const char *src = static_cast<const char *>(in[0]);
    for (size_t k = 0; k < bytes.size(); ++k) {
      if (ranks > 1)
        divideByRanks(src, out[k], bytes[k] / es, dtype, ranks);
      else if (out[k] != src)
        std::memmove(out[k], src, bytes[k]);
      src += bytes[k];
    }
  });
}

/// The block of a sharded tensor: `whole` holds `ranks` blocks of
/// `block` along one dimension.
void checkBlocks(const KernelSpec &spec, const TensorDesc &whole,
                 const TensorDesc &block) {
  if (whole.dtype != block.dtype)
    fail(spec, "the input and output element types differ");
  if (block.numel() == 0 || whole.numel() % block.numel() != 0)
    fail(spec, "the whole tensor (" + std::to_string(whole.numel()) +
                   " elements) is not a whole number of blocks of " +
                   std::to_string(block.numel()));
}

/// The group's size, checked against the tensors: `whole` = size blocks.
int blocksOf(ExecContext &ctx, const std::string &axis, size_t whole,
             size_t block, const char *kernel) {
  int ranks = ctx.collectives ? ctx.collectives->groupSize(axis) : 1;
  if ((size_t)ranks * block != whole)
    throw Error(std::string(kernel) + ": " + std::to_string(whole) +
                " elements do not split into " + std::to_string(ranks) +
                " blocks of " + std::to_string(block) + " (mesh axis '" + axis +
                "')");
  return ranks;
}

/// How the blocks of a tensor split along dimension `dim` lie in memory:
/// `outer` runs, each holding every rank's `run` bytes in rank order
/// (outer = 1: each block is contiguous, block r at r * run).
struct BlockLayout {
  size_t outer = 1, run = 0;
};
BlockLayout blockLayout(const KernelSpec &spec, const TensorDesc &whole,
                        const TensorDesc &block, int64_t dim) {
  if (dim < 0 || dim >= (int64_t)whole.shape.size() ||
      whole.shape.size() != block.shape.size())
    fail(spec, "dim " + std::to_string(dim) + " is not a dimension of " +
                   whole.str() + " and " + block.str());
  for (size_t d = 0; d < whole.shape.size(); ++d)
    if ((int64_t)d != dim && whole.shape[d] != block.shape[d])
      fail(spec, whole.str() + " and its block " + block.str() +
                     " differ outside dimension " + std::to_string(dim));
  if (block.shape[dim] == 0 || whole.shape[dim] % block.shape[dim])
    fail(spec, "dimension " + std::to_string(dim) + " of " + whole.str() +
                   " is not a whole number of blocks of " + block.str());
  BlockLayout l;
  for (int64_t d = 0; d < dim; ++d)
    l.outer *= (size_t)whole.shape[d];
  l.run = l.outer ? block.bytes() / l.outer : 0;
  return l;
}
BlockLayout blockLayout(const KernelSpec &spec, const TensorDesc &whole,
                        const TensorDesc &block) {
  return blockLayout(spec, whole, block, spec.attrs.getInt("dim", 0));
}

/// `packed` (ranks blocks one after the other) from `whole` (blocks
/// interleaved along the dimension), or back with `unpack`.
void repack(const BlockLayout &l, int ranks, const char *from, char *to,
            bool unpack) {
  for (size_t o = 0; o < l.outer; ++o)
    for (int r = 0; r < ranks; ++r) {
      size_t interleaved = (o * (size_t)ranks + (size_t)r) * l.run;
      size_t packed = ((size_t)r * l.outer + o) * l.run;
      if (unpack)
        std::memcpy(to + interleaved, from + packed, l.run);
      else
        std::memcpy(to + packed, from + interleaved, l.run);
    }
}

/// reduce_scatter: the output is this rank's block (along `dim`) of the
/// input's reduction (sum, max, min or average) over the group of `axis`.
std::unique_ptr<Kernel> makeReduceScatter(const KernelSpec &spec) {
  expectArity(spec, 1, 1);
  const TensorDesc &whole = *spec.inputs[0], &block = *spec.outputs[0];
  checkBlocks(spec, whole, block);
  const BlockLayout layout = blockLayout(spec, whole, block);
  const std::string axis = meshAxis(spec);
  const Reduction red = parseReduction(spec, block.dtype);
  const size_t n = (size_t)block.numel(), all = (size_t)whole.numel();
  const DType dtype = block.dtype;
  // Blocks not contiguous: packed into rank order first.
  auto scratch = std::make_shared<std::vector<char>>(
      layout.outer > 1 ? whole.bytes() : 0);
  return make([=](ExecContext &ctx, const void *const *in, void *const *out) {
    int ranks = blocksOf(ctx, axis, all, n, "reduce_scatter");
    const void *send = in[0];
    if (layout.outer > 1) {
      repack(layout, ranks, static_cast<const char *>(in[0]), scratch->data(),
             /*unpack=*/false);
      send = scratch->data();
    }
    if (!ctx.collectives) {
      std::memmove(out[0], send, n * dtypeSize(dtype));
      return;
    }
    ctx.collectives->reduceScatter(axis, send, out[0], n, dtype, red.op);
    if (red.average && ranks > 1)
      divideByRanks(out[0], out[0], n, dtype, ranks);
  });
}

/// all_gather: the output is the group's inputs concatenated along `dim`.
std::unique_ptr<Kernel> makeAllGather(const KernelSpec &spec) {
  expectArity(spec, 1, 1);
  const TensorDesc &block = *spec.inputs[0], &whole = *spec.outputs[0];
  checkBlocks(spec, whole, block);
  const BlockLayout layout = blockLayout(spec, whole, block);
  const std::string axis = meshAxis(spec);
  const size_t n = (size_t)block.numel(), all = (size_t)whole.numel();
  const DType dtype = block.dtype;
  auto scratch = std::make_shared<std::vector<char>>(
      layout.outer > 1 ? whole.bytes() : 0);
  return make([=](ExecContext &ctx, const void *const *in, void *const *out) {
    int ranks = blocksOf(ctx, axis, all, n, "all_gather");
    if (!ctx.collectives) {
      std::memmove(out[0], in[0], n * dtypeSize(dtype));
      return;
    }
    void *recv = layout.outer > 1 ? scratch->data() : out[0];
    ctx.collectives->allGather(axis, in[0], recv, n, dtype);
    if (layout.outer > 1)
      repack(layout, ranks, scratch->data(), static_cast<char *>(out[0]),
             /*unpack=*/true);
  });
}

/// all_slice: this rank's block of the input along `dim` (no
/// communication: the input is the same on every rank).
std::unique_ptr<Kernel> makeAllSlice(const KernelSpec &spec) {
  expectArity(spec, 1, 1);
  const TensorDesc &whole = *spec.inputs[0], &block = *spec.outputs[0];
  checkBlocks(spec, whole, block);
  const BlockLayout layout = blockLayout(spec, whole, block);
  const std::string axis = meshAxis(spec);
  const size_t n = (size_t)block.numel(), all = (size_t)whole.numel();
  return make([=](ExecContext &ctx, const void *const *in, void *const *out) {
    int ranks = blocksOf(ctx, axis, all, n, "all_slice");
    size_t r = ctx.collectives ? (size_t)ctx.collectives->groupRank(axis) : 0;
    const char *src = static_cast<const char *>(in[0]);
    char *dst = static_cast<char *>(out[0]);
    for (size_t o = 0; o < layout.outer; ++o)
      std::memmove(dst + o * layout.run,
                   src + (o * (size_t)ranks + r) * layout.run, layout.run);
  });
}

/// all_to_all: the input cut into one block per rank along `split_dim`,
/// block j to rank j; the blocks received joined along `concat_dim` in rank
/// order (split_dim != concat_dim: the output is the input with
/// split_dim / ranks and concat_dim x ranks). Blocks are packed into rank
/// order before the one exchange and unpacked after.
std::unique_ptr<Kernel> makeAllToAll(const KernelSpec &spec) {
  expectArity(spec, 1, 1);
  const TensorDesc &in = *spec.inputs[0], &outD = *spec.outputs[0];
  const int64_t split = spec.attrs.getInt("split_dim"), concat = spec.attrs.getInt("concat_dim");
  const int64_t rank = (int64_t)in.rank();
  if (split < 0 || split >= rank || concat < 0 || concat >= rank || split == concat)
    fail(spec, "split_dim " + std::to_string(split) + " and concat_dim " +
                   std::to_string(concat) + " must be two dimensions of " + in.str());
  if (in.dtype != outD.dtype || outD.rank() != in.rank() || outD.shape[split] < 1 ||
      in.shape[split] % outD.shape[split])
    fail(spec, "the output " + outD.str() + " is not the input " + in.str() +
                   " cut along dimension " + std::to_string(split));
  const int64_t ranks0 = in.shape[split] / outD.shape[split];
  for (int64_t d = 0; d < rank; ++d)
    if (d != split && outD.shape[d] != (d == concat ? in.shape[d] * ranks0 : in.shape[d]))
      fail(spec, "the output " + outD.str() + " is not " + std::to_string(ranks0) +
                     " blocks of the input " + in.str() + " joined along dimension " +
                     std::to_string(concat));
  // The block each rank sends: the input cut along split_dim, which is
  // also the output cut along concat_dim.
  TensorDesc piece = in;
  piece.shape[split] = outD.shape[split];
  const BlockLayout sendL = blockLayout(spec, in, piece, split);
  const BlockLayout recvL = blockLayout(spec, outD, piece, concat);
  const std::string axis = meshAxis(spec);
  const DType dtype = in.dtype;
  const size_t n = (size_t)piece.numel(), bytes = in.bytes();
  auto scratch = std::make_shared<std::vector<char>>(2 * bytes);
  return make([=](ExecContext &ctx, const void *const *inp, void *const *out) {
    int ranks = ctx.collectives ? ctx.collectives->groupSize(axis) : 1;
    if (ranks != ranks0)
      fail(spec, "its blocks are cut for " + std::to_string(ranks0) + " ranks; mesh axis '" +
                     axis + "' has " + std::to_string(ranks));
    if (!ctx.collectives) {
      std::memmove(out[0], inp[0], bytes);
      return;
    }
    char *send = scratch->data(), *recv = scratch->data() + bytes;
    repack(sendL, ranks, static_cast<const char *>(inp[0]), send, /*unpack=*/false);
    ctx.collectives->allToAll(axis, send, recv, n, dtype);
    repack(recvL, ranks, recv, static_cast<char *>(out[0]), /*unpack=*/true);
  });
}

std::unique_ptr<Kernel> makeBroadcast(const KernelSpec &spec) {
  expectArity(spec, 1, 1);
  sameDesc(spec, spec.outputs[0], spec.inputs[0], "the output");
  const TensorDesc &d = *spec.inputs[0];
  const std::string axis = meshAxis(spec);
  int64_t root = spec.attrs.getInt("root", 0);
  if (root < 0 || root > (1 << 20))
    fail(spec, "root " + std::to_string(root) + " is out of range");
  const size_t bytes = d.bytes(), n = (size_t)d.numel();
  const DType dtype = d.dtype;
  return make([=](ExecContext &ctx, const void *const *in, void *const *out) {
    if (in[0] != out[0])
      std::memmove(out[0], in[0], bytes);
    if (ctx.collectives)
      ctx.collectives->broadcast(axis, out[0], n, dtype, (int)root);
  });
}

/// send / recv: a pipeline stage's point to point with member `peer` of
/// this rank's group along `axis`, matched by `tag`. A plan with them runs
/// only as one of a pipeline's ranks.
int64_t peerOf(const KernelSpec &spec) {
  int64_t peer = spec.attrs.getInt("peer", -1), tag = spec.attrs.getInt("tag", -1);
  if (peer < 0 || peer >= (int64_t(1) << 20))
    fail(spec, "peer " + std::to_string(peer) + " is not a rank index");
  if (tag < 0 || tag > 32767)
    fail(spec, "tag " + std::to_string(tag) + " is outside [0, 32767]");
  return peer;
}
void checkPeer(const KernelSpec &spec, ExecContext &ctx, const std::string &axis,
               int64_t peer) {
  if (!ctx.collectives)
    fail(spec, "it exchanges tensors between pipeline stages: run the "
               "executable under mpirun with the ranks it was compiled for");
  int ranks = ctx.collectives->groupSize(axis);
  if (peer >= ranks || peer == ctx.collectives->groupRank(axis))
    fail(spec, "peer " + std::to_string(peer) + " is not another of the " +
                   std::to_string(ranks) + " ranks of mesh axis '" + axis + "'");
}

std::unique_ptr<Kernel> makeSend(const KernelSpec &spec) {
  expectArity(spec, 1, 0);
  const TensorDesc d = *spec.inputs[0];
  const std::string axis = meshAxis(spec);
  const int64_t peer = peerOf(spec), tag = spec.attrs.getInt("tag");
  return make([=](ExecContext &ctx, const void *const *in, void *const *) {
    checkPeer(spec, ctx, axis, peer);
    ctx.collectives->send(axis, (int)peer, (int)tag, in[0], (size_t)d.numel(),
                          d.dtype);
  });
}

/// A receive posts itself when the run begins (Kernel::beginRun), so the
/// peer's send lands while the steps before it compute.
class RecvKernel final : public Kernel {
public:
  RecvKernel(const KernelSpec &spec)
      : spec_(spec), d_(*spec.outputs[0]), axis_(meshAxis(spec)),
        peer_(peerOf(spec)), tag_(spec.attrs.getInt("tag")) {}
  void beginRun(ExecContext &ctx) override {
    checkPeer(spec_, ctx, axis_, peer_);
    ctx.collectives->postRecv(axis_, (int)peer_, (int)tag_, (size_t)d_.numel(),
                              d_.dtype);
  }
  void run(ExecContext &ctx, const void *const *, void *const *out) override {
    checkPeer(spec_, ctx, axis_, peer_);
    ctx.collectives->recv(axis_, (int)peer_, (int)tag_, out[0], (size_t)d_.numel(),
                          d_.dtype);
  }

private:
  KernelSpec spec_; // for messages (its descs outlive the kernel)
  TensorDesc d_;
  std::string axis_;
  int64_t peer_, tag_;
};

std::unique_ptr<Kernel> makeRecv(const KernelSpec &spec) {
  expectArity(spec, 0, 1);
  return std::make_unique<RecvKernel>(spec);
}

} // namespace

void registerCollectiveKernels(KernelRegistry &r) {
  r.add("all_reduce", makeAllReduce);
  r.add("mesh_broadcast", makeBroadcast);
  r.add("all_reduce_start", makeAllReduceStart);
  r.add("all_reduce_wait", makeAllReduceWait);
  r.add("reduce_scatter", makeReduceScatter);
  r.add("all_gather", makeAllGather);
  r.add("all_slice", makeAllSlice);
  r.add("all_to_all", makeAllToAll);
  r.add("send", makeSend);
  r.add("recv", makeRecv);
}

} // namespace kiln::rt::cpu
