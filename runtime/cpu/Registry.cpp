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
  cpu::registerCollectiveKernels(r);
  cpu::registerIndexingKernels(r);
}

const std::vector<std::string> &runtimeOnlyKernels() {
  // Kernels a target may register that no plan names, each with why. Empty:
  // every CPU kernel is a manifest kernel (kiln.reshape's "reshape" is one,
  // though the lowering turns the op into a view). A helper kernel for tests
  // or tools would be listed here.
  static const std::vector<std::string> names = {};
  return names;
}

const KernelRegistry &KernelRegistry::cpu() {
  static const KernelRegistry registry = [] {
    KernelRegistry r;
    registerCpuKernels(r);
    // A CPU kernel the compiler cannot name is a contract mismatch (a
    // misspelt or dropped op): every load fails until it is fixed.
    checkRegistryAgainstManifest(r);
    return r;
  }();
  return registry;
}

} // namespace kiln::rt
