//===- Collective.cpp - collective kernels ----------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// `all_reduce` (KRTKernels.td): the output is the input's sum, max, min or
// average over the ranks of mesh axis `axis`; `mesh_broadcast`: rank `root`'s
// input. Both run on the program's Collectives (ExecContext::collectives;
// kiln-train installs one over runtime/comm). Without one the program is a
// single rank: a copy.
//===----------------------------------------------------------------------===//
#include "GradUtil.h"
#include "Kernels.h"

#include <atomic>
#include <cstring>

namespace kiln::rt::cpu {
namespace {

using namespace grad;

std::unique_ptr<Kernel> makeAllReduce(const KernelSpec &spec) {
  expectArity(spec, 1, 1);
  sameDesc(spec, spec.outputs[0], spec.inputs[0], "the output");
  const TensorDesc &d = *spec.inputs[0];
  std::string axis = spec.attrs.getString("axis", "");
  std::string reduction = spec.attrs.getString("reduction", "");
  if (axis.empty())
    fail(spec, "no mesh axis");
  bool average = reduction == "average";
  CollectiveOp op = reduction == "max"   ? CollectiveOp::Max
                    : reduction == "min" ? CollectiveOp::Min
                                         : CollectiveOp::Sum;
  if (!average && reduction != "sum" && reduction != "max" && reduction != "min")
    fail(spec, "reduction must be sum, max, min or average, got '" +
                   reduction + "'");
  if (average && d.dtype != DType::F32 && d.dtype != DType::F64)
    unsupportedType(spec, d.dtype);
  std::string compression = spec.attrs.getString("compression", "none");
  if (compression != "none" && compression != "bf16" && compression != "fp16" &&
      compression != "int8")
    fail(spec, "compression must be none, bf16, fp16 or int8, got '" +
                   compression + "'");
  if (compression != "none" &&
      (d.dtype != DType::F32 || (!average && reduction != "sum")))
    fail(spec, "compression applies to sums and averages of f32");
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
      ctx.collectives->allReduce(axis, out[0], n, dtype, op);
    if (!average)
      return;
    int ranks = ctx.collectives->groupSize(axis);
    if (ranks <= 1)
      return;
    if (dtype == DType::F32) {
      float *p = static_cast<float *>(out[0]);
      const float inv = 1.0f / (float)ranks;
      for (size_t i = 0; i < n; ++i)
        p[i] *= inv;
    } else {
      double *p = static_cast<double *>(out[0]);
      const double inv = 1.0 / (double)ranks;
      for (size_t i = 0; i < n; ++i)
        p[i] *= inv;
    }
  });
}

std::unique_ptr<Kernel> makeBroadcast(const KernelSpec &spec) {
  expectArity(spec, 1, 1);
  sameDesc(spec, spec.outputs[0], spec.inputs[0], "the output");
  const TensorDesc &d = *spec.inputs[0];
  std::string axis = spec.attrs.getString("axis", "");
  int64_t root = spec.attrs.getInt("root", 0);
  if (axis.empty())
    fail(spec, "no mesh axis");
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

} // namespace

void registerCollectiveKernels(KernelRegistry &r) {
  r.add("all_reduce", makeAllReduce);
  r.add("mesh_broadcast", makeBroadcast);
}

} // namespace kiln::rt::cpu
