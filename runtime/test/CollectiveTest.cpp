//===- CollectiveTest.cpp - collective kernels along any dimension -------===//
// SPDX-License-Identifier: Apache-2.0
//
// all_slice, all_gather and reduce_scatter split and join along `dim`
// (tensor parallelism's inner dimensions; ZeRO's axis 0). A fake group of
// ranks in one process stands in for the communicator: rank r's block of a
// gather is this rank's block plus 100 r, and a reduce-scatter sums every
// rank's copy of the input (all equal). Each kernel's output is checked
// element by element against the whole tensor indexed by hand.
//===----------------------------------------------------------------------===//
#include "GradUtil.h"
#include "TestUtil.h"

#include "kiln/runtime/Collectives.h"

#include <algorithm>
#include <cstring>
#include <map>

namespace {

using nlohmann::json;
using namespace kiln::rt;
using namespace kiln::rt::test;

const RegisterFn kReg = cpu::registerCollectiveKernels;

/// `ranks` ranks of one axis, this process being rank `me`; f32 only.
class FakeGroup final : public Collectives {
public:
  FakeGroup(int ranks, int me) : ranks_(ranks), me_(me) {}
  int groupSize(const std::string &) override { return ranks_; }
  int groupRank(const std::string &) override { return me_; }
  void reduceScatter(const std::string &, const void *send, void *recv,
                     size_t count, DType, CollectiveOp) override {
    const float *s = static_cast<const float *>(send) + (size_t)me_ * count;
    float *r = static_cast<float *>(recv);
    for (size_t i = 0; i < count; ++i)
      r[i] = s[i] * (float)ranks_;
  }
  void allGather(const std::string &, const void *send, void *recv, size_t count,
                 DType) override {
    const float *s = static_cast<const float *>(send);
    float *r = static_cast<float *>(recv);
    for (int k = 0; k < ranks_; ++k)
      for (size_t i = 0; i < count; ++i)
        r[(size_t)k * count + i] = s[i] + 100.0f * (float)(k - me_);
  }
  /// Member k sent this rank block `me` of its input, which is this
  /// rank's block + 100 (k - me).
  void allToAll(const std::string &, const void *send, void *recv, size_t count,
                DType) override {
    const float *s = static_cast<const float *>(send) + (size_t)me_ * count;
    float *r = static_cast<float *>(recv);
    for (int k = 0; k < ranks_; ++k)
      for (size_t i = 0; i < count; ++i)
        r[(size_t)k * count + i] = s[i] + 100.0f * (float)(k - me_);
  }
  void allReduce(const std::string &, void *, size_t, DType, CollectiveOp) override {}
  void allReduceCompressed(const std::string &, int, float *, size_t,
                           const std::string &) override {}
  void broadcast(const std::string &, void *, size_t, DType, int) override {}
  /// A loopback: what is sent to (peer, tag) is what a recv from it gets.
  void send(const std::string &, int peer, int tag, const void *buf,
            size_t count, DType dtype) override {
    const char *p = static_cast<const char *>(buf);
    mail_[{peer, tag}].assign(p, p + count * dtypeSize(dtype));
  }
  void recv(const std::string &, int peer, int tag, void *buf, size_t count,
            DType dtype) override {
    auto it = mail_.find({peer, tag});
    if (it == mail_.end() || it->second.size() != count * dtypeSize(dtype))
      throw Error("nothing of that size was sent to peer " + std::to_string(peer) +
                  " with tag " + std::to_string(tag));
    std::memcpy(buf, it->second.data(), it->second.size());
    mail_.erase(it);
  }

private:
  int ranks_, me_;
  std::map<std::pair<int, int>, std::vector<char>> mail_;
};

/// x[i, j, k] = 1000 i + 10 j + k / 10 (distinct, exact in f32).
HostTensor wholeOf(const std::vector<int64_t> &shape) {
  HostTensor t(TensorDesc{DType::F32, shape});
  for (int64_t i = 0; i < t.numel(); ++i) {
    std::vector<int64_t> c = coords(i, shape);
    t.as<float>()[i] = (float)(1000 * c[0] + 10 * c[1] + 0.1 * c[2]);
  }
  return t;
}

struct Case {
  std::vector<int64_t> shape;
  int64_t dim;
  int ranks, me;
};

class CollectiveDims : public ::testing::TestWithParam<Case> {};

TEST_P(CollectiveDims, SliceGatherScatterMatchTheWholeTensor) {
  const Case c = GetParam();
  std::vector<int64_t> blockShape = c.shape;
  blockShape[c.dim] /= c.ranks;
  const int64_t k = blockShape[c.dim];
  TensorDesc whole{DType::F32, c.shape}, block{DType::F32, blockShape};
  json attrs = {{"axis", "tp"}, {"dim", c.dim}};
  FakeGroup group(c.ranks, c.me);
  ExecContext ctx;
  ctx.collectives = &group;
  HostTensor x = wholeOf(c.shape);

  // all_slice: this rank's block along dim.
  HostTensor s(block);
  std::fill(s.as<float>(), s.as<float>() + s.numel(), -1.0f);
  {
    auto kern = build(kReg, "all_slice", {whole}, {block}, attrs);
    const void *in[] = {x.data()};
    void *out[] = {s.data()};
    kern->run(ctx, in, out);
  }
  for (int64_t i = 0; i < s.numel(); ++i) {
    std::vector<int64_t> bc = coords(i, blockShape), wc = bc;
    wc[c.dim] += c.me * k;
    ASSERT_EQ(s.as<float>()[i], x.as<float>()[linear(wc, c.shape)]) << "slice " << i;
  }

  // all_gather of the slice: rank r's block (this one + 100 (r - me)) at r.
  HostTensor g(whole);
  std::fill(g.as<float>(), g.as<float>() + g.numel(), -1.0f);
  {
    auto kern = build(kReg, "all_gather", {block}, {whole}, attrs);
    const void *in[] = {s.data()};
    void *out[] = {g.data()};
    kern->run(ctx, in, out);
  }
  for (int64_t i = 0; i < g.numel(); ++i) {
    std::vector<int64_t> wc = coords(i, c.shape), mine = wc;
    int64_t r = wc[c.dim] / k;
    mine[c.dim] = c.me * k + wc[c.dim] % k;
    ASSERT_EQ(g.as<float>()[i],
              x.as<float>()[linear(mine, c.shape)] + 100.0f * (float)(r - c.me))
        << "gather " << i;
  }

  // reduce_scatter: this rank's block of the sum (ranks x the input).
  HostTensor rs(block);
  std::fill(rs.as<float>(), rs.as<float>() + rs.numel(), -1.0f);
  {
    json a = attrs;
    a["reduction"] = "sum";
    auto kern = build(kReg, "reduce_scatter", {whole}, {block}, a);
    const void *in[] = {x.data()};
    void *out[] = {rs.data()};
    kern->run(ctx, in, out);
  }
  for (int64_t i = 0; i < rs.numel(); ++i)
    ASSERT_EQ(rs.as<float>()[i], (float)c.ranks * s.as<float>()[i]) << "scatter " << i;
}

INSTANTIATE_TEST_SUITE_P(
    Dims, CollectiveDims,
    ::testing::Values(Case{{4, 6, 8}, 0, 2, 1}, Case{{4, 6, 8}, 1, 3, 2},
                      Case{{4, 6, 8}, 2, 4, 1}, Case{{4, 6, 8}, 2, 2, 0},
                      Case{{3, 8, 5}, 1, 4, 3}));

TEST(Collective, RefusesADimOutsideTheTensorOrBlocksThatDoNotTile) {
  TensorDesc whole{DType::F32, {4, 6}}, block{DType::F32, {4, 3}};
  EXPECT_THROW(build(kReg, "all_slice", {whole}, {block}, {{"axis", "tp"}, {"dim", 2}}),
               Error);
  // Blocks split dim 1, but the kernel is told dim 0.
  EXPECT_THROW(build(kReg, "all_gather", {block}, {whole}, {{"axis", "tp"}, {"dim", 0}}),
               Error);
  TensorDesc odd{DType::F32, {4, 4}};
  EXPECT_THROW(build(kReg, "all_slice", {whole}, {odd}, {{"axis", "tp"}, {"dim", 1}}),
               Error);
}

} // namespace

namespace {

// A vocab-parallel embedding: rank 1 of 2 holds rows [3, 6) of a 6-row
// table. Its gather returns those rows for the indices in its range (counted
// in the whole table, negative from its end) and zeros for the others; its
// gather_grad adds only into the rows it holds.
// all_to_all (expert parallelism's dispatch): the input cut along
// split_dim, block j to rank j; what rank k sends back (the fake group: this
// rank's block me + 100 (k - me)) lands at block k along concat_dim.
TEST(Collective, AllToAllCutsAlongOneDimAndJoinsAlongAnother) {
  for (auto [split, concat] : {std::pair<int64_t, int64_t>{1, 0}, {0, 2}, {2, 1}}) {
    for (int me : {0, 1, 2}) {
      const int ranks = 3;
      std::vector<int64_t> inShape = {3, 6, 3};
      std::vector<int64_t> outShape = inShape;
      outShape[split] /= ranks;
      outShape[concat] *= ranks;
      TensorDesc inD{DType::F32, inShape}, outD{DType::F32, outShape};
      FakeGroup group(ranks, me);
      ExecContext ctx;
      ctx.collectives = &group;
      HostTensor x = wholeOf(inShape), y(outD);
      std::fill(y.as<float>(), y.as<float>() + y.numel(), -1.0f);
      auto kern = build(kReg, "all_to_all", {inD}, {outD},
                        {{"axis", "ep"}, {"split_dim", split}, {"concat_dim", concat}});
      const void *in[] = {x.data()};
      void *out[] = {y.data()};
      kern->run(ctx, in, out);
      const int64_t bs = inShape[split] / ranks, bc = inShape[concat];
      for (int64_t i = 0; i < y.numel(); ++i) {
        std::vector<int64_t> oc = coords(i, outShape), src = oc;
        int64_t k = oc[concat] / bc;
        src[concat] = oc[concat] % bc;
        src[split] = me * bs + oc[split];
        ASSERT_EQ(y.as<float>()[i],
                  x.as<float>()[linear(src, inShape)] + 100.0f * (float)(k - me))
            << "split " << split << " concat " << concat << " rank " << me << " at " << i;
      }
    }
  }
  // Dimensions that do not cut or join into the output: one line each.
  expectError(
      [] {
        build(kReg, "all_to_all", {TensorDesc{DType::F32, {4, 6}}},
              {TensorDesc{DType::F32, {8, 3}}},
              {{"axis", "ep"}, {"split_dim", 1}, {"concat_dim", 1}});
      },
      "must be two dimensions");
  expectError(
      [] {
        build(kReg, "all_to_all", {TensorDesc{DType::F32, {4, 6}}},
              {TensorDesc{DType::F32, {4, 3}}},
              {{"axis", "ep"}, {"split_dim", 1}, {"concat_dim", 0}});
      },
      "joined along dimension 0");
}

TEST(SplitGather, LooksUpAndAccumulatesOnlyTheRowsThisRankHolds) {
  FakeGroup group(2, 1);
  ExecContext ctx;
  ctx.collectives = &group;
  TensorDesc table{DType::F32, {3, 2}}, ids{DType::I64, {5}}, out{DType::F32, {5, 2}};
  json attrs = {{"axis", 0}, {"split", "tp"}, {"whole_size", 6}};
  HostTensor t(table), i(ids), y(out), g(table);
  for (int k = 0; k < 6; ++k)
    t.as<float>()[k] = 10.0f + (float)k; // whole rows 3, 4, 5
  const int64_t idx[] = {0, 3, 5, -1, 2}; // -1 is whole row 5
  std::copy(idx, idx + 5, i.as<int64_t>());
  {
    auto kern = build(cpu::registerShapeKernels, "gather", {table, ids}, {out}, attrs);
    const void *in[] = {t.data(), i.data()};
    void *o[] = {y.data()};
    kern->run(ctx, in, o);
  }
  const float want[] = {0, 0, 10, 11, 14, 15, 14, 15, 0, 0};
  for (int k = 0; k < 10; ++k)
    EXPECT_EQ(y.as<float>()[k], want[k]) << k;
  {
    auto kern = build(cpu::registerShapeGradKernels, "gather_grad", {out, ids}, {table},
                      attrs);
    for (int k = 0; k < 10; ++k)
      y.as<float>()[k] = 1.0f + (float)k;
    const void *in[] = {y.data(), i.data()};
    void *o[] = {g.data()};
    kern->run(ctx, in, o);
  }
  // Local row 0 (whole 3) gets dy row 1; row 2 (whole 5) rows 2 and 3.
  const float grad[] = {3, 4, 0, 0, 5 + 7, 6 + 8};
  for (int k = 0; k < 6; ++k)
    EXPECT_EQ(g.as<float>()[k], grad[k]) << k;
  // An index outside the whole table is an error.
  i.as<int64_t>()[0] = 6;
  auto kern = build(cpu::registerShapeKernels, "gather", {table, ids}, {out}, attrs);
  const void *in[] = {t.data(), i.data()};
  void *o[] = {y.data()};
  EXPECT_THROW(kern->run(ctx, in, o), Error);
}

} // namespace
