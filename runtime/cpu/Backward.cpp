//===- Backward.cpp - registration of the gradient kernels ------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The kernels of the ops --kiln-autodiff and --kiln-attach-optimizer add
// (docs/Training.md has their semantics) live in one file per op family:
// ActivationGrad.cpp, SoftmaxGrad.cpp, NormGrad.cpp, ConvGrad.cpp,
// PoolGrad.cpp, ShapeGrad.cpp, LossGrad.cpp and Optimizer.cpp, with their
// shared checks in GradUtil.h. registerCpuKernels (Registry.cpp) calls
// registerBackwardKernels, which registers them all.
//===----------------------------------------------------------------------===//
#include "GradUtil.h"
#include "Kernels.h"

namespace kiln::rt::cpu {

void registerBackwardKernels(KernelRegistry &r) {
  registerActivationGradKernels(r);
  registerSoftmaxGradKernels(r);
  registerNormGradKernels(r);
  registerConvGradKernels(r);
  registerPoolGradKernels(r);
  registerShapeGradKernels(r);
  registerLossGradKernels(r);
  registerOptimizerKernels(r);
}

} // namespace kiln::rt::cpu
