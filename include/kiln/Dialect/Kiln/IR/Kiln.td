//===- Kiln.td - kiln dialect umbrella ----------------------*- tablegen -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_KILN_IR_KILN_TD
#define KILN_DIALECT_KILN_IR_KILN_TD
include "kiln/Dialect/Kiln/IR/KilnDialect.td"
include "kiln/Dialect/Kiln/IR/KilnInterfaces.td"
include "kiln/Dialect/Kiln/IR/KilnOps.td"
include "kiln/Dialect/Kiln/IR/KilnGradOps.td"
#endif
