//===- Widen16.h - float32 kernels on f16/bf16 operands ---------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Mixed precision runs gradients through kernels written for f32 and f64
// (the gradient families, GradUtil.h). widening16 makes such a factory take
// f16/bf16 tensors as well: the kernel is built for the same spec with
// every 16-bit float tensor as f32, its 16-bit inputs are widened into
// scratch (allocated once, when the kernel is built) before it runs, and
// its 16-bit outputs are rounded to nearest even after: float32 arithmetic
// with 16-bit rounding at the op's boundary, what the issue asks of fp16
// and what PyTorch's CPU kernels do for bf16 (accumulating in float).
// Outputs are written only after every input was read, so an output that
// shares an input's buffer (in-place assignment) is safe.
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_CPU_WIDEN16_H
#define KILN_RUNTIME_CPU_WIDEN16_H

#include "kiln/runtime/Kernel.h"

namespace kiln::rt::cpu {

/// Whether any operand or result of `spec` is an f16/bf16 tensor.
bool has16BitFloat(const KernelSpec &spec);

/// `inner`, taking f16/bf16 operands through f32 staging; a spec without
/// 16-bit float tensors goes to `inner` unchanged.
KernelFactory widening16(KernelFactory inner);

} // namespace kiln::rt::cpu

#endif // KILN_RUNTIME_CPU_WIDEN16_H
