//===- TensorSplitTest.cpp - tensor parallelism's blocks ----------------===//
// SPDX-License-Identifier: Apache-2.0
//
// blockOfWhole cuts the block a rank holds (each split dimension cut by
// the linear index of the rank's positions on its axes, the first axis
// outermost), checked element by element; joinBlocks puts every rank's
// block back into the whole tensor; bad shapes and axes are refused.
//===----------------------------------------------------------------------===//
#include "TensorSplit.h"
#include "Util.h"

#include <gtest/gtest.h>

using namespace kiln;
using namespace kiln::train;

namespace {

Config mesh(int64_t dp, int64_t tp) {
  Config c;
  c.dp = dp;
  c.tp = tp;
  return c;
}

rt::HostTensor counting(const std::vector<int64_t> &shape) {
  rt::HostTensor t(rt::TensorDesc{rt::DType::F32, shape});
  for (int64_t i = 0; i < t.desc().numel(); ++i)
    t.as<float>()[i] = (float)i;
  return t;
}

TEST(TensorSplit, MeshPositionIsRowMajorWithTpFastest) {
  Config c = mesh(2, 3);
  MeshPosition p = meshPositionOf(c, 4);
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[3].axis, "pp");
  EXPECT_EQ(p[3].size, 1);
  EXPECT_EQ(p[0].axis, "dp");
  EXPECT_EQ(p[0].index, 1);
  EXPECT_EQ(p[1].axis, "ep");
  EXPECT_EQ(p[1].size, 1);
  EXPECT_EQ(p[2].axis, "tp");
  EXPECT_EQ(p[2].index, 1);
  EXPECT_EQ(p[2].size, 3);
  // pp outermost: rank 4 of pp=2 x dp=2 is stage 1's first rank.
  Config pc = mesh(2, 1);
  pc.pp = 2;
  MeshPosition pq = meshPositionOf(pc, 3);
  EXPECT_EQ(pq[3].index, 1);
  EXPECT_EQ(pq[0].index, 1);
  // dp x ep: ep inside dp, as tp is.
  Config e;
  e.dp = 2;
  e.ep = 4;
  for (int r = 0; r < 8; ++r) {
    MeshPosition q = meshPositionOf(e, r);
    EXPECT_EQ(q[0].index, r / 4);
    EXPECT_EQ(q[1].index, r % 4);
    EXPECT_EQ(q[1].size, 4);
    EXPECT_EQ(q[2].index, 0);
  }
}

TEST(TensorSplit, BlocksCutEachSplitDimensionAndJoinBack) {
  // [6, 4, 8]: dim 0 on tp (3 parts), dim 2 on dp (2 parts), dim 1 whole.
  Config c = mesh(2, 3);
  SplitSpec spec{{6, 4, 8}, {{"tp"}, {}, {"dp"}}};
  rt::HostTensor whole = counting(spec.shape);
  std::vector<float> all;
  for (int r = 0; r < (int)c.ranks(); ++r) {
    MeshPosition pos = meshPositionOf(c, r);
    rt::HostTensor b = blockOfWhole(whole, spec, pos);
    ASSERT_EQ(b.shape(), (std::vector<int64_t>{2, 4, 4}));
    int64_t tp = pos[2].index, dp = pos[0].index;
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 4; ++j)
        for (int64_t k = 0; k < 4; ++k)
          ASSERT_EQ(b.as<float>()[(i * 4 + j) * 4 + k],
                    whole.as<float>()[((tp * 2 + i) * 4 + j) * 8 + dp * 4 + k])
              << "rank " << r;
    all.insert(all.end(), b.as<float>(), b.as<float>() + b.desc().numel());
  }
  rt::HostTensor back = joinBlocks(all.data(), 32 * sizeof(float), rt::DType::F32,
                                   spec, c);
  ASSERT_EQ(back.shape(), spec.shape);
  for (int64_t i = 0; i < whole.desc().numel(); ++i)
    ASSERT_EQ(back.as<float>()[i], whole.as<float>()[i]) << i;
}

TEST(TensorSplit, TwoAxesOnOneDimensionTheFirstOutermost) {
  Config c = mesh(2, 2);
  SplitSpec spec{{8}, {{"dp", "tp"}}};
  rt::HostTensor whole = counting(spec.shape);
  for (int r = 0; r < 4; ++r) {
    rt::HostTensor b = blockOfWhole(whole, spec, meshPositionOf(c, r));
    // Rank r = 2 dp + tp holds part dp * 2 + tp = r.
    EXPECT_EQ(b.as<float>()[0], 2.0f * r) << r;
    EXPECT_EQ(b.as<float>()[1], 2.0f * r + 1) << r;
  }
}

TEST(TensorSplit, RefusesAWrongShapeOrAMissingAxis) {
  Config c = mesh(1, 2);
  SplitSpec spec{{4, 2}, {{"tp"}, {}}};
  rt::HostTensor wrong = counting({2, 4});
  EXPECT_THROW(blockOfWhole(wrong, spec, meshPositionOf(c, 0)), UserError);
  SplitSpec odd{{3, 2}, {{"tp"}, {}}};
  EXPECT_THROW(blockOfWhole(counting({3, 2}), odd, meshPositionOf(c, 1)), UserError);
  MeshPosition noTp = {{"dp", 0, 1}};
  EXPECT_THROW(blockOfWhole(counting({4, 2}), spec, noTp), UserError);
  std::vector<float> blocks(8);
  EXPECT_THROW(joinBlocks(blocks.data(), 3 * sizeof(float), rt::DType::F32, spec, c),
               UserError);
}

} // namespace
