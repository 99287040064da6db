//===- Prune.h - magnitude pruning's schedule and selection -----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The arithmetic of kiln.magnitude_prune (docs/Compression.md), shared by
// its kernel (Prune.cpp) and the unit tests.
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_CPU_PRUNE_H
#define KILN_RUNTIME_CPU_PRUNE_H

#include <cstdint>
#include <optional>

namespace kiln::rt::cpu {

/// The target sparsity at step index `s` (0-based) when `s` is a pruning
/// point of the cubic schedule (start <= s <= end and (s - start) % every
/// == 0, or s == end): sparsity * (1 - (1 - (s - start) / (end - start))^3),
/// `sparsity` when start == end. Not a pruning point: nullopt.
std::optional<double> pruneTarget(double sparsity, int64_t start, int64_t end,
                                  int64_t every, int64_t s);

/// How many of `n` elements a target sparsity prunes: round(target * n),
/// at most n.
int64_t prunedCount(double target, int64_t n);

/// Marks in `pruned` (1 pruned, 0 kept) the `k` elements of `param` with
/// the smallest key, where an element already pruned (`before[i] != 0`)
/// keys first, then |param[i]|, then its position; a NaN keys as +inf.
/// `pruned` may alias `before`.
template <typename T>
void selectPruned(const T *param, const T *before, T *pruned, int64_t n,
                  int64_t k);

} // namespace kiln::rt::cpu

#endif // KILN_RUNTIME_CPU_PRUNE_H
