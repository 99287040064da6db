//===- SliceTensor.h - keep some indices along axes of a tensor -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The raw-bytes gather structured channel pruning applies to a parameter's
// value (--kiln-prune-channels) and to the ONNX initializer the pruned
// model is exported with, so both cut the same elements; and the block copy
// tensor parallelism's split parameters use, in the plan the compiler
// writes (ExportPlan) and in the runtime's checkpoints and export
// (runtime/train/TensorSplit.cpp). Header-only.
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_SLICETENSOR_H
#define KILN_RUNTIME_SLICETENSOR_H

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace kiln {

/// The indices kept along each pruned axis of one tensor (ascending).
using KeptIndices = std::map<int64_t, std::vector<int64_t>>;

/// A row-major tensor of `shape` with elements of `eltBytes` bytes, keeping
/// along each axis of `kept` only those indices. Empty on a size mismatch.
inline std::string sliceTensorBytes(const std::string &data,
                                    const std::vector<int64_t> &shape,
                                    size_t eltBytes, const KeptIndices &kept) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  if ((int64_t)data.size() != n * (int64_t)eltBytes)
    return {};
  size_t rank = shape.size();
  std::vector<std::vector<int64_t>> idx(rank);
  std::vector<int64_t> out(rank);
  int64_t total = 1;
  for (size_t a = 0; a < rank; ++a) {
    auto it = kept.find((int64_t)a);
    if (it == kept.end()) {
      idx[a].resize(shape[a]);
      for (int64_t i = 0; i < shape[a]; ++i)
        idx[a][i] = i;
    } else {
      idx[a] = it->second;
    }
    out[a] = (int64_t)idx[a].size();
    total *= out[a];
  }
  std::vector<int64_t> stride(rank, 1);
  for (size_t a = rank; a-- > 1;)
    stride[a - 1] = stride[a] * shape[a];
  std::string res((size_t)total * eltBytes, '\0');
  std::vector<int64_t> pos(rank, 0);
  for (int64_t k = 0; k < total; ++k) {
    int64_t src = 0;
    for (size_t a = 0; a < rank; ++a)
      src += idx[a][pos[a]] * stride[a];
    std::memcpy(&res[(size_t)k * eltBytes], &data[(size_t)src * eltBytes], eltBytes);
    for (size_t a = rank; a-- > 0;) {
      if (++pos[a] < out[a])
        break;
      pos[a] = 0;
    }
  }
  return res;
}

/// Copies the block of shape `local` at `offset` (per dimension) of a
/// row-major tensor of shape `whole` (elements of `eltBytes` bytes) from
/// `wholeData` into the contiguous `block`, or back with `toWhole`; runs of
/// the last dimension at a time. The caller checks the sizes.
inline void copyTensorBlock(char *wholeData, char *block,
                            const std::vector<int64_t> &whole,
                            const std::vector<int64_t> &local,
                            const std::vector<int64_t> &offset, size_t eltBytes,
                            bool toWhole) {
  size_t rank = whole.size();
  if (rank == 0) {
    std::memcpy(toWhole ? wholeData : block, toWhole ? block : wholeData, eltBytes);
    return;
  }
  std::vector<int64_t> stride(rank, (int64_t)eltBytes);
  for (size_t d = rank - 1; d-- > 0;)
    stride[d] = stride[d + 1] * whole[d + 1];
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < rank; ++d)
    rows *= local[d];
  size_t run = (size_t)local[rank - 1] * eltBytes;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t at = offset[rank - 1] * (int64_t)eltBytes;
    int64_t q = r;
    for (size_t d = rank - 1; d-- > 0;) {
      at += (offset[d] + q % local[d]) * stride[d];
      q /= local[d];
    }
    if (toWhole)
      std::memcpy(wholeData + at, block + (size_t)r * run, run);
    else
      std::memcpy(block + (size_t)r * run, wholeData + at, run);
  }
}

} // namespace kiln

#endif // KILN_RUNTIME_SLICETENSOR_H
