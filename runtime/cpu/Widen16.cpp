//===- Widen16.cpp - float32 kernels on f16/bf16 operands -------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "Widen16.h"

#include "Dnnl.h"

#include <memory>
#include <vector>

namespace kiln::rt::cpu {
namespace {

/// One operand or result: for a 16-bit one, its type and its f32 copy
/// (never empty, so `f32.size()` says whether it is staged).
struct Wide {
  bool half = false;
  int64_t n = 0;
  Scratch f32;
};

class Widened16Kernel final : public Kernel {
public:
  Widened16Kernel(std::unique_ptr<std::vector<TensorDesc>> descs,
                  std::unique_ptr<Kernel> inner, std::vector<Wide> ins,
                  std::vector<Wide> outs)
      : descs_(std::move(descs)), inner_(std::move(inner)), ins_(std::move(ins)),
        outs_(std::move(outs)), inPtrs_(ins_.size()), outPtrs_(outs_.size()) {}

  void run(ExecContext &ctx, const void *const *in, void *const *out) override {
    for (size_t i = 0; i < ins_.size(); ++i) {
      Wide &s = ins_[i];
      if (s.f32.size()) {
        widen16(s.half, static_cast<const uint16_t *>(in[i]), s.f32.as<float>(), s.n);
        inPtrs_[i] = s.f32.data();
      } else {
        inPtrs_[i] = in[i];
      }
    }
    for (size_t i = 0; i < outs_.size(); ++i)
      outPtrs_[i] = outs_[i].f32.size() ? outs_[i].f32.data() : out[i];
    inner_->run(ctx, inPtrs_.data(), outPtrs_.data());
    for (size_t i = 0; i < outs_.size(); ++i)
      if (outs_[i].f32.size())
        narrow16(outs_[i].half, outs_[i].f32.as<float>(),
                 static_cast<uint16_t *>(out[i]), outs_[i].n);
  }

private:
  std::unique_ptr<std::vector<TensorDesc>> descs_; // the f32 spec's tensors
  std::unique_ptr<Kernel> inner_;
  std::vector<Wide> ins_, outs_;
  std::vector<const void *> inPtrs_;
  std::vector<void *> outPtrs_;
};

bool has16(const std::vector<const TensorDesc *> &ds) {
  for (const TensorDesc *d : ds)
    if (d && is16BitFloat(d->dtype))
      return true;
  return false;
}

} // namespace

bool has16BitFloat(const KernelSpec &spec) {
  return has16(spec.inputs) || has16(spec.outputs);
}

KernelFactory widening16(KernelFactory inner) {
  return [inner = std::move(inner)](const KernelSpec &spec) -> std::unique_ptr<Kernel> {
    if (!has16BitFloat(spec))
      return inner(spec);
    // The f32 spec: its descs live as long as the kernel (a factory may keep
    // pointers to them).
    auto descs = std::make_unique<std::vector<TensorDesc>>();
    descs->reserve(spec.inputs.size() + spec.outputs.size());
    KernelSpec wide = spec;
    auto stage = [&](std::vector<const TensorDesc *> &ds) {
      std::vector<Wide> staged(ds.size());
      for (size_t i = 0; i < ds.size(); ++i) {
        if (!ds[i] || !is16BitFloat(ds[i]->dtype))
          continue;
        staged[i].half = ds[i]->dtype == DType::F16;
        staged[i].n = ds[i]->numel();
        // At least one byte, so an empty tensor still reads as staged.
        staged[i].f32.resize(std::max<size_t>(1, (size_t)staged[i].n * sizeof(float)));
        descs->push_back(TensorDesc{DType::F32, ds[i]->shape});
        ds[i] = &descs->back();
      }
      return staged;
    };
    std::vector<Wide> ins = stage(wide.inputs);
    std::vector<Wide> outs = stage(wide.outputs);
    std::unique_ptr<Kernel> k = inner(wide);
    return std::make_unique<Widened16Kernel>(std::move(descs), std::move(k),
                                             std::move(ins), std::move(outs));
  };
}

} // namespace kiln::rt::cpu
