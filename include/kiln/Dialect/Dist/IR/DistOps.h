//===- DistOps.h - dist dialect ---------------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Asynchronous collectives: a start and a wait joined by a bucket in flight.
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_DIST_IR_DISTOPS_H
#define KILN_DIALECT_DIST_IR_DISTOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"

#include "kiln/Dialect/Dist/IR/DistDialect.h.inc"

#define GET_TYPEDEF_CLASSES
#include "kiln/Dialect/Dist/IR/DistTypes.h.inc"

#define GET_OP_CLASSES
#include "kiln/Dialect/Dist/IR/DistOps.h.inc"

#endif // KILN_DIALECT_DIST_IR_DISTOPS_H
