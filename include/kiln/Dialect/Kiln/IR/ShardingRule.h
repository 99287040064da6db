//===- ShardingRule.h - how an op's dimensions shard ------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// An op's sharding rule, in Shardy's factor form: the op's iteration space is
// a list of factors, and each dimension of each operand and result is one
// factor or none. Sharding a factor over mesh axes shards every dimension
// that is that factor; a dimension that is no factor (a window, a softmax
// axis, a broadcast dimension of size 1) is always whole on every rank.
// ShardingRuleOpInterface (KilnInterfaces.td) returns it; propagation,
// partitioning and (later) the cost model are generic code over it.
//
//   kiln.matmul [M, K] x [K, N] -> [M, N]
//     factors  m: parallel   n: parallel   k: reduction (sum)
//     lhs = [m, k]   rhs = [k, n]   result = [m, n]
//
// Sharding k over axis `tp` makes each rank's product a partial sum: the
// partitioner all-reduces the result over `tp` with the factor's reduction.
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_KILN_IR_SHARDINGRULE_H
#define KILN_DIALECT_KILN_IR_SHARDINGRULE_H

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>

namespace kiln {

enum class FactorKind : uint8_t {
  /// Every result has the factor; each shard of it is computed alone.
  Parallel,
  /// A contracted factor: results lack it, and their shards combine with
  /// the factor's `combine` reduction (a partial sum, max, ...).
  Reduction,
  /// Sharding the factor makes the op act on each shard on its own, which is
  /// not what the whole op computes: BatchNorm's batch statistics, which
  /// PyTorch DDP also computes per rank. Results that lack the factor are
  /// per-rank values unless `combine` is set.
  PerShard,
};

struct ShardingFactor {
  /// The factor's size: every dimension that is this factor has this many
  /// elements, except the outer dimension of a reshape group (a multiple).
  int64_t size = 1;
  FactorKind kind = FactorKind::Parallel;
  /// How the shards of a result that lacks the factor combine (a Reduction
  /// factor's reduction; the sum of LayerNorm's scale gradient over the
  /// rows). None: such a result is a per-shard value (see PerShard).
  std::optional<mlir::shard::ReductionKind> combine =
      mlir::shard::ReductionKind::Sum;
  /// The op divides the results that have this factor by the factor's
  /// whole size (the gradient of a mean loss): with the factor sharded over
  /// k ranks each rank divides by size / k, so the partitioner scales the
  /// result by 1 / k.
  bool dividesBySize = false;
};

/// For one op: its factors, and for each operand and each result, the factor
/// of every dimension (-1: no factor, the dimension is kept whole). Operands
/// that are not ranked tensors have no dimensions.
struct ShardingRule {
  llvm::SmallVector<ShardingFactor> factors;
  llvm::SmallVector<llvm::SmallVector<int>> operands, results;
  /// A reduction the op's one operand still owes (a partial sum over ranks)
  /// can be done on its result instead, so the partitioner may carry it
  /// through: the op only moves elements (reshape, transpose) or widens
  /// their float type (a bf16 gradient cast to f32 is then summed over the
  /// ranks in f32, as PyTorch DDP sums the f32 gradients of autocast).
  bool carriesReductions = false;
  /// The result is a sum or difference of the operands (add, sub): when
  /// every operand owes the same partial sums over ranks, the result owes
  /// them instead, so partial results combine before one collective (the
  /// three partial input gradients of a split Q, K, V projection are added
  /// and all-reduced once, as Megatron-LM does).
  bool sumsOperands = false;

  /// An empty rule for `op`: every dimension whole (no factor).
  static ShardingRule allWhole(mlir::Operation *op);
  /// Adds a factor and returns its index.
  int add(int64_t size, FactorKind kind = FactorKind::Parallel,
          std::optional<mlir::shard::ReductionKind> combine =
              mlir::shard::ReductionKind::Sum);
  /// `dims` of result `r`, factor by factor: a readable one-line form,
  /// e.g. "(m, k), (k, n) -> (m, n); k: reduction sum".
  std::string str() const;
};

namespace detail {
/// The rule of an op whose operands broadcast (NumPy, aligned right) to the
/// shape of result 0 and whose results all have that shape: one parallel
/// factor per result dimension; an operand's dimension of size 1 that
/// broadcasts is no factor.
ShardingRule broadcastRule(mlir::Operation *op);
/// The rule of a reshape from `in` to `out`: dimensions group into runs of
/// equal element count; the outer dimension of each group is one factor
/// (sharding it shards the group's rows), the others are whole.
void reshapeRule(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> out,
                 ShardingRule &rule);
} // namespace detail
} // namespace kiln

#endif // KILN_DIALECT_KILN_IR_SHARDINGRULE_H
