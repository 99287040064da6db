//===- Kernels.h - registration of the CPU kernels --------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// One registration function per kernel file of runtime/cpu; registerCpuKernels
// (Registry.cpp) calls them all. Registration is explicit so that a static
// link keeps every kernel.
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_CPU_KERNELS_H
#define KILN_RUNTIME_CPU_KERNELS_H

#include "kiln/runtime/Kernel.h"

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
void registerBackwardKernels(KernelRegistry &r);    // Backward.cpp
void registerCollectiveKernels(KernelRegistry &r);  // Collective.cpp
void registerIndexingKernels(KernelRegistry &r);    // Indexing.cpp

} // namespace kiln::rt::cpu

#endif // KILN_RUNTIME_CPU_KERNELS_H
