//===- TensorSplit.cpp - tensor parallelism's blocks of a tensor -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
#include "TensorSplit.h"
#include "Util.h"

#include "kiln/runtime/SliceTensor.h"

#include <cstring>

namespace kiln::train {
namespace {

/// The block shape and, per dimension, the block's offset in the whole
/// tensor for the rank at `pos`.
void blockPlace(const SplitSpec &spec, const MeshPosition &pos,
                std::vector<int64_t> &local, std::vector<int64_t> &offset,
                const std::string &what) {
  local = spec.planShape();
  offset.assign(local.size(), 0);
  for (size_t d = 0; d < spec.dims.size() && d < local.size(); ++d) {
    int64_t idx = 0, parts = 1;
    for (const std::string &a : spec.dims[d]) {
      const rt::Program::MeshAxisPosition *p = nullptr;
      for (const auto &q : pos)
        if (q.axis == a)
          p = &q;
      if (!p)
        fail(what + " is split over mesh axis '" + a +
             "', which this run's mesh does not have");
      idx = idx * p->size + p->index;
      parts *= p->size;
    }
    if (parts < 1 || local[d] % parts)
      fail(what + ": dimension " + std::to_string(d) + " (" +
           std::to_string(local[d]) + ") does not split into " +
           std::to_string(parts) + " parts");
    local[d] /= parts;
    offset[d] = idx * local[d];
  }
}

} // namespace

MeshPosition meshPositionOf(const Config &config, int rank) {
  // pp outermost, then dp, then ep, tp fastest (ep and tp are not both
  // above 1). pp comes last in the list: entries 0-2 are the stage's axes.
  const int64_t inner = config.ep * config.tp, stage = config.stageRanks();
  const int64_t r = rank % stage;
  return {{"dp", r / inner, config.dp},
          {"ep", (r / config.tp) % config.ep, config.ep},
          {"tp", r % config.tp, config.tp},
          {"pp", rank / stage, config.pp}};
}

rt::HostTensor blockOfWhole(const rt::HostTensor &whole, const SplitSpec &spec,
                            const MeshPosition &pos) {
  if (whole.shape() != spec.shape)
    fail("a split tensor is " + whole.desc().str() + ", its whole shape has " +
         std::to_string(spec.shape.size()) + " dimensions of another size");
  std::vector<int64_t> local, offset;
  blockPlace(spec, pos, local, offset, "a tensor");
  rt::HostTensor block(rt::TensorDesc{whole.dtype(), local});
  if (block.bytes())
    copyTensorBlock(const_cast<char *>(static_cast<const char *>(whole.data())),
              static_cast<char *>(block.data()), spec.planShape(), local, offset,
              rt::dtypeSize(whole.dtype()), /*toWhole=*/false);
  return block;
}

rt::HostTensor joinBlocks(const void *blocks, size_t blockBytes, rt::DType dtype,
                          const SplitSpec &spec, const Config &config) {
  // Assembled in the plan's shape; the bytes are the model's shape's.
  rt::HostTensor whole(rt::TensorDesc{dtype, spec.shape});
  const std::vector<int64_t> &planShape = spec.planShape();
  const char *src = static_cast<const char *>(blocks);
  // Ranks that hold the same block (the dp replicas of a tp block) write
  // the same bytes.
  // (One pipeline stage's ranks: the same places on every stage.)
  for (int r = 0; r < (int)config.stageRanks(); ++r) {
    std::vector<int64_t> local, offset;
    blockPlace(spec, meshPositionOf(config, r), local, offset, "a tensor");
    rt::TensorDesc d{dtype, local};
    if (d.bytes() != blockBytes)
      fail("a split tensor's block is " + std::to_string(blockBytes) +
           " bytes, its shape " + d.str() + " needs " + std::to_string(d.bytes()));
    if (blockBytes)
      copyTensorBlock(static_cast<char *>(whole.data()),
                const_cast<char *>(src + (size_t)r * blockBytes), planShape,
                local, offset, rt::dtypeSize(dtype), /*toWhole=*/true);
  }
  return whole;
}

} // namespace kiln::train
