//===- Kernels.h - registration of the CPU kernels --------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// One registration function per kernel file of runtime/cpu; registerCpuKernels
// (Registry.cpp) calls them all. Registration is explicit so that a static
// link keeps every kernel. Also the one way a factory reports a broken shape
// rule of kiln/runtime/ShapeRules.h.
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_CPU_KERNELS_H
#define KILN_RUNTIME_CPU_KERNELS_H

#include "kiln/runtime/Kernel.h"

#include <string>

namespace kiln::rt::cpu {

void registerElementwiseKernels(KernelRegistry &r); // Elementwise.cpp
void registerReductionKernels(KernelRegistry &r);   // Reduction.cpp
void registerShapeKernels(KernelRegistry &r);       // Shape.cpp
void registerLinalgKernels(KernelRegistry &r);      // Linalg.cpp
void registerConvKernels(KernelRegistry &r);        // Conv.cpp
void registerPoolKernels(KernelRegistry &r);        // Pool.cpp
void registerNormKernels(KernelRegistry &r);        // Norm.cpp
void registerSoftmaxKernels(KernelRegistry &r);     // Softmax.cpp
void registerRandomKernels(KernelRegistry &r);      // Random.cpp
void registerLossKernels(KernelRegistry &r);        // Loss.cpp
void registerBackwardKernels(KernelRegistry &r);    // Backward.cpp: all below

// The gradient and optimizer kernels, one file per op family.
void registerActivationGradKernels(KernelRegistry &r); // ActivationGrad.cpp
void registerSoftmaxGradKernels(KernelRegistry &r);    // SoftmaxGrad.cpp
void registerNormGradKernels(KernelRegistry &r);       // NormGrad.cpp
void registerConvGradKernels(KernelRegistry &r);       // ConvGrad.cpp
void registerPoolGradKernels(KernelRegistry &r);       // PoolGrad.cpp
void registerShapeGradKernels(KernelRegistry &r);      // ShapeGrad.cpp
void registerLossGradKernels(KernelRegistry &r);       // LossGrad.cpp
void registerOptimizerKernels(KernelRegistry &r);      // Optimizer.cpp

/// Throws a failed shape rule (kiln/runtime/ShapeRules.h: an error string,
/// empty on success) as "kernel '<name>': <message>".
inline void checkRule(const KernelSpec &spec, const std::string &err) {
  if (!err.empty())
    throw Error("kernel '" + spec.kernel + "': " + err);
}

} // namespace kiln::rt::cpu

#endif // KILN_RUNTIME_CPU_KERNELS_H
