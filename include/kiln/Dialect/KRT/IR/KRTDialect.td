//===- KRTDialect.td - the krt runtime dialect --------------*- tablegen -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_KRT_IR_KRTDIALECT_TD
#define KILN_DIALECT_KRT_IR_KRTDIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/CommonTypeConstraints.td"

def KRT_Dialect : Dialect {
  let name = "krt";
  let cppNamespace = "::kiln::krt";
  let summary = "Kiln's runtime dialect: buffers, kernel launches, collectives";
  let description = [{
    The program the runtime executes, one level below `kiln`: values are
    buffers (`memref`s of static shape, row-major), and each `kiln` op has
    become a `krt.launch` of the runtime kernel of the same name, which reads
    its input buffers and writes its output buffers. `--kiln-lower-to-runtime`
    produces it; `--kiln-assign-buffers` gives every `krt.alloc` its offset in
    the device's arena; the plan writer (`kiln-translate --export-plan`)
    serialises it in the format of `docs/PlanFormat.md`.

    Ops execute in program order on a stream (`stream = 0` by default).
    Collectives, and events ordering streams, are declared here for the
    distributed and CUDA runtimes; the CPU plan (version 1) has one stream and
    no collectives.
  }];
  let extraClassDeclaration = [{
    /// Function: the bytes of the arena --kiln-assign-buffers laid the
    /// function's buffers out in (i64), which the plan records.
    static constexpr ::llvm::StringLiteral getArenaBytesAttrName() {
      return ::llvm::StringLiteral("krt.arena_bytes");
    }
  }];
}

class KRT_Op<string mnemonic, list<Trait> traits = []>
    : Op<KRT_Dialect, mnemonic, traits>;

def KRT_Buffer : MemRefOf<[AnyType]>;

#endif // KILN_DIALECT_KRT_IR_KRTDIALECT_TD
