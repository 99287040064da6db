//===- Registry.cpp - the CPU kernel registry -------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "Kernels.h"

namespace kiln::rt {

void registerCpuKernels(KernelRegistry &r) {
  cpu::registerElementwiseKernels(r);
  cpu::registerReductionKernels(r);
  cpu::registerShapeKernels(r);
  cpu::registerLinalgKernels(r);
  cpu::registerConvKernels(r);
  cpu::registerPoolKernels(r);
  cpu::registerNormKernels(r);
  cpu::registerSoftmaxKernels(r);
  cpu::registerRandomKernels(r);
  cpu::registerLossKernels(r);
  cpu::registerBackwardKernels(r);
}

const KernelRegistry &KernelRegistry::cpu() {
  static const KernelRegistry registry = [] {
    KernelRegistry r;
    registerCpuKernels(r);
    return r;
  }();
  return registry;
}

} // namespace kiln::rt
