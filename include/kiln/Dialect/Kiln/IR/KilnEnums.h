//===- KilnEnums.h - kiln's closed sets of names ----------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The enums of KilnEnums.td (parameter roles, losses, optimizers, ...) with
// their generated stringify/symbolize functions, and the command-line parser
// every enum pass option uses.
//
// llvm::cl's own parser answers an unknown value with "Cannot find option
// named 'x'!", which names neither the choices nor what was being chosen.
// The specialisations below keep llvm::cl's matching against the option's
// `llvm::cl::values` and only replace that message with one that lists the
// valid names: "for the --optimizer option: unknown optimizer 'lion'
// (expected sgd, momentum, adam or adamw)". Declaring them here, next to the
// enums, means no translation unit can instantiate the default parser for
// these types.
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_KILN_IR_KILNENUMS_H
#define KILN_DIALECT_KILN_IR_KILNENUMS_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>

#include "kiln/Dialect/Kiln/IR/KilnEnums.h.inc"

namespace kiln::detail {
/// The message for `value`, which is none of `parser`'s names: "unknown
/// <option> '<value>' (expected a, b or c)".
std::string unknownEnumValue(const llvm::cl::generic_parser_base &parser,
                             const llvm::cl::Option &option,
                             llvm::StringRef value);
} // namespace kiln::detail

/// Declares the parse() of llvm::cl::parser<E> (defined in KilnAttrs.cpp).
#define KILN_ENUM_OPTION_PARSER(E)                                             \
  template <>                                                                  \
  bool parser<E>::parse(Option &option, StringRef argName, StringRef arg,      \
                        E &value);

namespace llvm::cl {
KILN_ENUM_OPTION_PARSER(::kiln::ParamRole)
KILN_ENUM_OPTION_PARSER(::kiln::ParamInit)
KILN_ENUM_OPTION_PARSER(::kiln::LossKind)
KILN_ENUM_OPTION_PARSER(::kiln::OptimizerKind)
KILN_ENUM_OPTION_PARSER(::kiln::BNRunningVar)
KILN_ENUM_OPTION_PARSER(::kiln::TargetKind)
KILN_ENUM_OPTION_PARSER(::kiln::LRSchedule)
} // namespace llvm::cl

#undef KILN_ENUM_OPTION_PARSER

#endif // KILN_DIALECT_KILN_IR_KILNENUMS_H
