//===- Backward.cpp - registration of the gradient kernels ------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The kernels of the ops --kiln-autodiff and --kiln-attach-optimizer add
// (docs/Training.md has their semantics) live in one file per op family:
// ActivationGrad.cpp, SoftmaxGrad.cpp, NormGrad.cpp, ConvGrad.cpp,
// PoolGrad.cpp, ShapeGrad.cpp, LossGrad.cpp and Optimizer.cpp, with their
// shared checks in GradUtil.h. registerCpuKernels (Registry.cpp) calls
// registerBackwardKernels, which registers them all, each taking f16/bf16
// operands through f32 staging (Widen16.h).
//===----------------------------------------------------------------------===//
#include "GradUtil.h"
#include "Kernels.h"
#include "Widen16.h"

namespace kiln::rt::cpu {

void registerBackwardKernels(KernelRegistry &r) {
  KernelRegistry grads;
  registerActivationGradKernels(grads);
  registerSoftmaxGradKernels(grads);
  registerNormGradKernels(grads);
  registerConvGradKernels(grads);
  registerPoolGradKernels(grads);
  registerShapeGradKernels(grads);
  registerLossGradKernels(grads);
  registerOptimizerKernels(grads);
  registerPruneKernels(grads);
  registerQuantKernels(grads);
  // Written for f32 and f64; mixed precision (bf16, fp16) gives them 16-bit
  // operands, which they take through f32 staging. `copy` moves bytes of
  // any type, `slice_grad` moves 16-bit values itself, relu_grad,
  // gelu_grad and dropout_grad compute them in float per element, the convolution and
  // pooling gradients run bf16 on oneDNN (and stage the rest themselves).
  for (const std::string &name : grads.names()) {
    const KernelFactory &f = *grads.find(name);
    bool native16 = name == "copy" || name == "slice_grad" ||
                    name == "conv_input_grad" || name == "conv_weight_grad" ||
                    name == "relu_grad" || name == "gelu_grad" ||
                    name == "dropout_grad" ||
                    name == "max_pool_grad" || name == "avg_pool_grad";
    r.add(name, native16 ? f : widening16(f));
  }
}

} // namespace kiln::rt::cpu
