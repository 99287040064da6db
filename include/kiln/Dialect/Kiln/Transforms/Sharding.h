//===- Sharding.h - meshes and shardings for the sharding passes -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// What --kiln-shard, --kiln-shard-propagation and --kiln-partition share: the
// module's mesh (upstream `shard.grid @kiln_mesh` with `kiln.axis_names`),
// a value's sharding (for each dimension, the mesh axes it is split over,
// outermost first) read from and written to `kiln.sharding(s)` attributes,
// and the choice of an op's factor shardings from its ShardingRule.
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_KILN_TRANSFORMS_SHARDING_H
#define KILN_DIALECT_KILN_TRANSFORMS_SHARDING_H

#include "kiln/Dialect/Kiln/IR/KilnOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace kiln::sharding {

/// The symbol of the mesh every Kiln pass and the runtime use.
inline constexpr llvm::StringLiteral kMeshName = "kiln_mesh";

using Axes = llvm::SmallVector<mlir::shard::GridAxis>;
/// Per dimension, the mesh axes it is split over ([] = whole).
using Sharding = llvm::SmallVector<Axes>;

struct Mesh {
  mlir::shard::GridOp grid;
  llvm::SmallVector<std::string> names;
  llvm::SmallVector<int64_t> sizes;

  /// The axis called `name`, or -1.
  int axis(llvm::StringRef name) const;
  /// How many ranks `axes` span (1 for none).
  int64_t ranks(llvm::ArrayRef<mlir::shard::GridAxis> axes) const;
  /// "dp=2,tp=2".
  std::string str() const;
};

/// The module's @kiln_mesh; fails with an error naming `user` when the
/// module has none or its axes have no names.
mlir::FailureOr<Mesh> getMesh(mlir::ModuleOp m, llvm::StringRef user);

/// A whole (replicated) value of rank `rank`.
Sharding whole(int64_t rank);
/// Whether no dimension is split.
bool isWhole(const Sharding &s);

/// Reads a `kiln.sharding` attribute of a value of `shape`: every axis must
/// be one of the mesh's and divide its dimension. Errors name `what`.
mlir::FailureOr<Sharding> parseSharding(mlir::Attribute a, const Mesh &mesh,
                                        llvm::ArrayRef<int64_t> shape,
                                        mlir::Location loc,
                                        const llvm::Twine &what);
/// How function argument `i` is held (its `kiln.sharding`; whole without
/// one), read against the function type's (global) shape.
mlir::FailureOr<Sharding> argSharding(mlir::func::FuncOp f, unsigned i,
                                      const Mesh &mesh);
/// How function result `i` is to be returned (whole without `kiln.sharding`).
mlir::FailureOr<Sharding> resultSharding(mlir::func::FuncOp f, unsigned i,
                                         const Mesh &mesh);
/// The result shardings written on `op` (`kiln.shardings`); empty when none.
mlir::FailureOr<llvm::SmallVector<Sharding>>
writtenShardings(mlir::Operation *op, const Mesh &mesh);
/// The `kiln.sharding` attribute of `s`.
mlir::ArrayAttr shardingAttr(const Sharding &s, const Mesh &mesh,
                             mlir::MLIRContext *ctx);
/// The shape each rank holds of a value of `shape` sharded as `s`.
llvm::SmallVector<int64_t> localShape(llvm::ArrayRef<int64_t> shape,
                                      const Sharding &s, const Mesh &mesh);

/// The sharding of one op: the mesh axes of each of its rule's factors, and
/// the operand and result shardings they imply.
struct OpSharding {
  llvm::SmallVector<Axes> factorAxes;
  llvm::SmallVector<Sharding> operands, results;
};

/// Chooses the axes of `rule`'s factors from the known shardings of the
/// op's results (pinned by the user: they come first) and operands, in
/// order (null: unknown). A dimension's axes go to its factor when the
/// factor has none yet, no other factor has them, and they divide every
/// dimension of the factor; a conflicting operand is resharded by the
/// partitioner to what the op chose. `operandTypes` are the operands'
/// global types (the op's own when empty: the partitioner has already
/// given block arguments their per-rank types).
OpSharding assignFactors(mlir::Operation *op, const ShardingRule &rule,
                         llvm::ArrayRef<const Sharding *> operands,
                         llvm::ArrayRef<const Sharding *> results,
                         const Mesh &mesh,
                         mlir::TypeRange operandTypes = {});

/// The op's rule, or an error naming the op when it has none.
mlir::FailureOr<ShardingRule> ruleOf(mlir::Operation *op);

} // namespace kiln::sharding

#endif // KILN_DIALECT_KILN_TRANSFORMS_SHARDING_H
