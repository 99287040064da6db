//===- KRT.td - the krt dialect -----------------------------*- tablegen -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
include "kiln/Dialect/KRT/IR/KRTDialect.td"
include "kiln/Dialect/KRT/IR/KRTOps.td"
