//===- ShapeCheck.h - shape rules in the CPU kernel factories ---*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The one way a CPU kernel factory reports a broken shape rule of
// kiln/runtime/ShapeRules.h, the rules the compiler's type inference
// applies as well. Internal to runtime/cpu.
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_CPU_SHAPECHECK_H
#define KILN_RUNTIME_CPU_SHAPECHECK_H

#include "kiln/runtime/Kernel.h"
#include "kiln/runtime/ShapeRules.h"

#include <string>

namespace kiln::rt::cpu {

/// Throws a failed shape rule (an error string, empty on success) as
/// "kernel '<name>': <message>".
inline void checkRule(const KernelSpec &spec, const std::string &err) {
  if (!err.empty())
    throw Error("kernel '" + spec.kernel + "': " + err);
}

} // namespace kiln::rt::cpu

#endif // KILN_RUNTIME_CPU_SHAPECHECK_H
