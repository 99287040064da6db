//===- KernelManifest.h - the compiler-runtime kernel contract --*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The kernel manifest: for every kernel a plan step may name, its operands
// and results (each one value, optional or variadic) and its attributes with
// their types. The table itself, KernelManifest.inc, is generated from the
// ODS definitions (include/kiln/Dialect/KRT/IR/KRTKernels.td) by
// `kiln-tblgen -gen-kernel-manifest` and committed, so that the runtime stays
// free of MLIR and buildable on its own; a check-kiln test regenerates it and
// fails when the committed copy is stale (docs/PlanFormat.md, "Kernel
// manifest").
//
// Header-only and exception-free: the compiler (built with -fno-exceptions)
// includes it too. The plan writer checks each step it writes against it;
// the runtime checks each plan step at load and each attribute a kernel
// reads (Attrs).
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_KERNELMANIFEST_H
#define KILN_RUNTIME_KERNELMANIFEST_H

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kiln::manifest {

/// How many values an operand or result stands for.
enum class Arity : uint8_t {
  Single,   // exactly one
  Optional, // zero or one (an absent optional operand is -1 in a plan)
  Variadic, // any number
};

/// An attribute's type, as the plan's JSON writes it.
enum class AttrType : uint8_t {
  Int,        // integer (I64Attr, I32Attr, enums)
  Float,      // number, or "inf", "-inf", "nan" (F32Attr, F64Attr)
  Bool,       // true/false (BoolAttr)
  String,     // string (StrAttr)
  IntArray,   // array of integers (DenseI64ArrayAttr, DenseI32ArrayAttr)
  FloatArray, // array of floats (DenseF32ArrayAttr, DenseF64ArrayAttr)
  StringArray, // array of strings (StrArrayAttr)
  Elements,   // tensor data: never in a plan (kiln.constant's value)
};

/// Whether a step must carry an attribute.
enum class Presence : uint8_t {
  Required, // always present
  Default,  // has a default value, which the compiler writes out
  Optional, // may be absent
};

struct Value {
  const char *name;
  Arity arity;
};

struct Attr {
  const char *name;
  AttrType type;
  Presence presence;
};

struct Kernel {
  const char *name; // the plan's kernel name: "matmul"
  const char *op;   // where it is defined: "kiln.matmul", or "" for a runtime kernel
  uint16_t firstOperand, numOperands; // into kOperands
  uint16_t firstResult, numResults;   // into kResults
  uint16_t firstAttr, numAttrs;       // into kAttrs
  /// False for the ops the lowering turns into something other than a launch
  /// (kiln.constant, kiln.reshape): no plan step names them.
  bool launched;

  inline const Value *operands() const;
  inline const Value *results() const;
  inline const Attr *attrs() const;
  /// The declared attribute `name`, or null.
  inline const Attr *attr(std::string_view name) const;
  /// Whether `n` values can fill `count` declared values starting at `vals`.
  static inline bool acceptsCount(const Value *vals, size_t count, size_t n);
  bool acceptsOperands(size_t n) const {
    return acceptsCount(operands(), numOperands, n);
  }
  bool acceptsResults(size_t n) const {
    return acceptsCount(results(), numResults, n);
  }
};

#include "kiln/runtime/KernelManifest.inc"

inline const Value *Kernel::operands() const { return kOperands + firstOperand; }
inline const Value *Kernel::results() const { return kResults + firstResult; }
inline const Attr *Kernel::attrs() const { return kAttrs + firstAttr; }

inline const Attr *Kernel::attr(std::string_view name) const {
  for (const Attr *a = attrs(), *e = a + numAttrs; a != e; ++a)
    if (name == a->name)
      return a;
  return nullptr;
}

inline bool Kernel::acceptsCount(const Value *vals, size_t count, size_t n) {
  size_t fixed = 0, optional = 0;
  bool variadic = false;
  for (size_t i = 0; i < count; ++i) {
    switch (vals[i].arity) {
    case Arity::Single: ++fixed; break;
    case Arity::Optional: ++optional; break;
    case Arity::Variadic: variadic = true; break;
    }
  }
  return n >= fixed && (variadic || n <= fixed + optional);
}

/// The number of kernels and the kernels, sorted by name.
constexpr size_t numKernels() { return sizeof(kKernels) / sizeof(kKernels[0]); }
inline const Kernel *begin() { return kKernels; }
inline const Kernel *end() { return kKernels + numKernels(); }

/// The kernel called `name`, or null.
inline const Kernel *find(std::string_view name) {
  size_t lo = 0, hi = numKernels();
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    std::string_view m = kKernels[mid].name;
    if (m == name)
      return &kKernels[mid];
    if (m < name)
      lo = mid + 1;
    else
      hi = mid;
  }
  return nullptr;
}

/// "int", "float array", ... (for messages).
inline const char *typeName(AttrType t) {
  switch (t) {
  case AttrType::Int: return "an integer";
  case AttrType::Float: return "a float";
  case AttrType::Bool: return "a boolean";
  case AttrType::String: return "a string";
  case AttrType::IntArray: return "an integer array";
  case AttrType::FloatArray: return "a float array";
  case AttrType::StringArray: return "a string array";
  case AttrType::Elements: return "tensor data";
  }
  return "?";
}

} // namespace kiln::manifest

#endif // KILN_RUNTIME_KERNELMANIFEST_H
