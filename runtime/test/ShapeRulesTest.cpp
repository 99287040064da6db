//===- ShapeRulesTest.cpp - tests of kiln/runtime/ShapeRules.h --*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The shape rules the compiler's type inference and the kernel factories
// share: results against hand-computed shapes and, for the window output
// size, against a brute-force count of window positions; every error case
// with the message both sides print.
//===----------------------------------------------------------------------===//
#include "kiln/runtime/ShapeRules.h"

#include <gtest/gtest.h>

#include <vector>

namespace {

using namespace kiln::shape;
using Shape = std::vector<int64_t>;

TEST(ShapeRules, Broadcast) {
  Shape out;
  EXPECT_EQ(broadcastShapes(Shape{2, 1, 4}, Shape{3, 1}, out), "");
  EXPECT_EQ(out, (Shape{2, 3, 4}));
  EXPECT_EQ(broadcastShapes(Shape{}, Shape{5}, out), "");
  EXPECT_EQ(out, (Shape{5}));
  EXPECT_EQ(broadcastShapes(Shape{0, 1}, Shape{1, 7}, out), "");
  EXPECT_EQ(out, (Shape{0, 7}));
  out = {9};
  EXPECT_EQ(broadcastShapes(Shape{4, 3}, Shape{4}, out),
            "shapes [4,3] and [4] do not broadcast");
  EXPECT_EQ(out, (Shape{9})) << "a failed rule leaves the result alone";
}

TEST(ShapeRules, Axes) {
  EXPECT_EQ(checkAxis(1, 2), "");
  EXPECT_EQ(checkAxis(2, 2), "axis 2 is out of range for rank 2");
  EXPECT_EQ(checkAxis(-1, 2, "class_axis"), "class_axis -1 is out of range for rank 2");
  int64_t a = -1;
  EXPECT_EQ(normalizeAxis(a, 3), "");
  EXPECT_EQ(a, 2);
  a = -4;
  EXPECT_EQ(normalizeAxis(a, 3), "axis -4 is out of range for rank 3");
  EXPECT_EQ(a, -4);
}

TEST(ShapeRules, Reduce) {
  Shape out;
  std::vector<bool> flags;
  EXPECT_EQ(reducedShape(Shape{2, 3, 4}, Shape{0, 2}, true, out, &flags), "");
  EXPECT_EQ(out, (Shape{1, 3, 1}));
  EXPECT_EQ(flags, (std::vector<bool>{true, false, true}));
  EXPECT_EQ(reducedShape(Shape{2, 3, 4}, Shape{0, 2}, false, out), "");
  EXPECT_EQ(out, (Shape{3}));
  EXPECT_EQ(reducedShape(Shape{2, 3}, Shape{}, false, out), "");
  EXPECT_EQ(out, (Shape{2, 3})) << "no axes: nothing reduced";
  EXPECT_EQ(reducedShape(Shape{2, 3}, Shape{0, 1}, false, out), "");
  EXPECT_EQ(out, (Shape{}));
  EXPECT_EQ(reducedShape(Shape{2, 3}, Shape{1, 0}, true, out),
            "axes must be sorted and unique");
  EXPECT_EQ(reducedShape(Shape{2, 3}, Shape{1, 1}, true, out),
            "axes must be sorted and unique");
  EXPECT_EQ(reducedShape(Shape{2, 3}, Shape{2}, true, out),
            "axis 2 is out of range for rank 2");
}

TEST(ShapeRules, Gather) {
  Shape out;
  EXPECT_EQ(gatherShape(Shape{5, 6, 7}, Shape{2, 3}, 1, out), "");
  EXPECT_EQ(out, (Shape{5, 2, 3, 7}));
  EXPECT_EQ(gatherShape(Shape{5, 6}, Shape{}, 0, out), "");
  EXPECT_EQ(out, (Shape{6})) << "a scalar index drops the axis";
  EXPECT_EQ(gatherShape(Shape{5, 6}, Shape{3}, 2, out),
            "axis 2 is out of range for rank 2");

  EXPECT_EQ(gatherElementsShape(Shape{4, 5}, Shape{9, 2}, 0, out), "");
  EXPECT_EQ(out, (Shape{9, 2})) << "any length on the axis";
  EXPECT_EQ(gatherElementsShape(Shape{2, 2}, Shape{2}, 1, out),
            "indices have rank 1, the input rank 2");
  EXPECT_EQ(gatherElementsShape(Shape{2, 2}, Shape{3, 1}, 1, out),
            "indices dimension 0 (3) is larger than the input's (2)");
  EXPECT_EQ(gatherElementsShape(Shape{2, 2}, Shape{1, 1}, -1, out),
            "axis -1 is out of range for rank 2");
}

/// The number of window positions o = 0, 1, ... whose dilated window
/// [o*s - pl, o*s - pl + span) lies inside the padded input [-pl, in + ph).
int64_t countWindows(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pl,
                     int64_t ph) {
  int64_t n = 0;
  for (int64_t o = 0;; ++o) {
    int64_t last = o * s - pl + d * (k - 1);
    if (last >= in + ph)
      return n;
    ++n;
  }
}

TEST(ShapeRules, WindowOutputSizeCountsWindows) {
  for (int64_t in = 1; in <= 9; ++in)
    for (int64_t k = 1; k <= 4; ++k)
      for (int64_t s = 1; s <= 3; ++s)
        for (int64_t d = 1; d <= 2; ++d)
          for (int64_t pl = 0; pl <= 2; ++pl)
            for (int64_t ph = 0; ph <= 2; ++ph)
              EXPECT_EQ(windowOutputSize(in, k, s, d, pl, ph),
                        countWindows(in, k, s, d, pl, ph))
                  << "in " << in << " k " << k << " s " << s << " d " << d
                  << " pads " << pl << "," << ph;
  // Hand-checked: a ResNet stem conv (224, 7x7, stride 2, pad 3) and its
  // max pool (112, 3x3, stride 2, pad 1).
  EXPECT_EQ(windowOutputSize(224, 7, 2, 1, 3, 3), 112);
  EXPECT_EQ(windowOutputSize(112, 3, 2, 1, 1, 1), 56);
  EXPECT_EQ(windowOutputSize(2, 5, 1, 1, 1, 1), 0) << "window does not fit";
}

TEST(ShapeRules, TransposedOutputSize) {
  // ONNX ConvTranspose: stride * (in - 1) + output_padding + span - pads.
  EXPECT_EQ(transposedOutputSize(3, 3, 2, 1, 1, 1, 1), 6);
  EXPECT_EQ(transposedOutputSize(3, 3, 1, 1, 0, 0, 0), 5);
  // It inverts the forward size: conv of the result gives the input back.
  for (int64_t in = 1; in <= 6; ++in)
    for (int64_t s = 1; s <= 3; ++s)
      EXPECT_EQ(windowOutputSize(transposedOutputSize(in, 3, s, 1, 1, 1, 0), 3, s,
                                 1, 1, 1),
                in);
}

TEST(ShapeRules, ConvGeometry) {
  WindowAttrs a;
  Shape strides{2, 1}, dil{1, 2}, pad{1, 0, 1, 0};
  a.strides = strides;
  a.dilations = dil;
  a.padding = pad;
  a.groups = 2;
  WindowGeometry g;
  ASSERT_EQ(convGeometry(Shape{8, 4, 9, 10}, Shape{6, 2, 3, 3}, a, false, g), "");
  EXPECT_EQ(g.outShape(), (Shape{8, 6, 5, 6}));
  EXPECT_EQ(g.nsp, 2);
  EXPECT_EQ(g.cpg(), 2);
  EXPECT_EQ(g.opg(), 3);
  // The real spatial dims come last, after a neutral one.
  EXPECT_EQ(g.first(), 1);
  EXPECT_EQ(g.dim(0), 1);
  EXPECT_EQ(g.in, (std::array<int64_t, 3>{1, 9, 10}));
  EXPECT_EQ(g.out, (std::array<int64_t, 3>{1, 5, 6}));
  EXPECT_EQ(g.pl, (std::array<int64_t, 3>{0, 1, 0}));
  EXPECT_EQ(g.inSize(), 90);
  EXPECT_EQ(g.kSize(), 9);
  // The descriptor dims derived from it.
  EXPECT_EQ(g.srcDims(), (Shape{8, 4, 9, 10}));
  EXPECT_EQ(g.dstDims(), (Shape{8, 6, 5, 6}));
  EXPECT_EQ(g.weightDims(), (Shape{2, 3, 2, 3, 3}));
  EXPECT_EQ(g.strideDims(), (Shape{2, 1}));
  EXPECT_EQ(g.holeDims(), (Shape{0, 1}));
  EXPECT_EQ(g.padLoDims(), (Shape{1, 0}));
  EXPECT_EQ(g.padHiDims(), (Shape{1, 0}));

  // 1d, ungrouped: [O, C, K] weights.
  Shape s1{1}, d1{1}, p1{0, 0};
  WindowAttrs b;
  b.strides = s1;
  b.dilations = d1;
  b.padding = p1;
  ASSERT_EQ(convGeometry(Shape{2, 3, 7}, Shape{4, 3, 2}, b, false, g), "");
  EXPECT_EQ(g.outShape(), (Shape{2, 4, 6}));
  EXPECT_EQ(g.weightDims(), (Shape{4, 3, 2}));
  EXPECT_EQ(g.in, (std::array<int64_t, 3>{1, 1, 7}));
}

TEST(ShapeRules, ConvTransposeGeometry) {
  WindowAttrs a;
  Shape strides{2, 2}, dil{1, 1}, pad{1, 1, 1, 1}, outPad{1, 0};
  a.strides = strides;
  a.dilations = dil;
  a.padding = pad;
  a.outputPadding = outPad;
  WindowGeometry g;
  // weight [C, O/groups, K...]
  ASSERT_EQ(convGeometry(Shape{1, 3, 3, 3}, Shape{3, 5, 3, 3}, a, true, g), "");
  EXPECT_TRUE(g.transposed);
  EXPECT_EQ(g.outShape(), (Shape{1, 5, 6, 5}));
  EXPECT_EQ(g.op, (std::array<int64_t, 3>{0, 1, 0}));

  EXPECT_EQ(convGeometry(Shape{1, 3, 3, 3}, Shape{4, 5, 3, 3}, a, true, g),
            "channels do not match: input has 3, weight has 4");
  Shape negative{-1, 0};
  a.outputPadding = negative;
  EXPECT_EQ(convGeometry(Shape{1, 3, 3, 3}, Shape{3, 5, 3, 3}, a, true, g),
            "output_padding must be >= 0");
  Shape one{0};
  a.outputPadding = one;
  EXPECT_EQ(convGeometry(Shape{1, 3, 3, 3}, Shape{3, 5, 3, 3}, a, true, g),
            "expected 2 output_padding values");
  Shape big{5, 5, 5, 5};
  a.outputPadding = outPad;
  a.padding = big;
  EXPECT_EQ(convGeometry(Shape{1, 3, 3, 3}, Shape{3, 5, 3, 3}, a, true, g),
            "empty output in spatial dim 0");
}

TEST(ShapeRules, ConvGeometryErrors) {
  WindowAttrs a;
  Shape strides{1, 1}, dil{1, 1}, pad{0, 0, 0, 0};
  a.strides = strides;
  a.dilations = dil;
  a.padding = pad;
  WindowGeometry g;
  EXPECT_EQ(convGeometry(Shape{1, 3, 5, 5}, Shape{4, 2, 3, 3}, a, false, g),
            "channels do not match: input has 3, weight expects 2 x 1 groups");
  EXPECT_EQ(convGeometry(Shape{1, 3, 5}, Shape{4, 3, 3, 3}, a, false, g),
            "input [1,3,5] and weight [4,3,3,3] must both have rank N+2 with N >= 1");
  EXPECT_EQ(convGeometry(Shape{1, 3, 2, 2}, Shape{4, 3, 3, 3}, a, false, g),
            "kernel larger than padded input in spatial dim 0");
  EXPECT_EQ(convGeometry(Shape{1, 3, 5, 5}, Shape{4, 3, 0, 3}, a, false, g),
            "empty kernel in [4,3,0,3]");
  EXPECT_EQ(convGeometry(Shape{1, 3, -1, 5}, Shape{4, 3, 3, 3}, a, false, g),
            "negative dimension in [1,3,-1,5]");
  EXPECT_EQ(convGeometry(Shape{1, 1, 2, 2, 2, 2}, Shape{1, 1, 1, 1, 1, 1}, a, false, g),
            "4 spatial dims, at most 3 are supported");
  a.groups = 0;
  EXPECT_NE(convGeometry(Shape{1, 3, 5, 5}, Shape{4, 3, 3, 3}, a, false, g), "");
  a.groups = 1;
  Shape s1{1};
  a.strides = s1;
  EXPECT_EQ(convGeometry(Shape{1, 3, 5, 5}, Shape{4, 3, 3, 3}, a, false, g),
            "expected 2 strides, 2 dilations and 4 pads, got 1, 2 and 4");
  Shape s0{0, 1};
  a.strides = s0;
  EXPECT_EQ(convGeometry(Shape{1, 3, 5, 5}, Shape{4, 3, 3, 3}, a, false, g),
            "strides and dilations must be >= 1");
  Shape negPad{0, -1, 0, 0};
  a.strides = strides;
  a.padding = negPad;
  EXPECT_EQ(convGeometry(Shape{1, 3, 5, 5}, Shape{4, 3, 3, 3}, a, false, g),
            "pads must be >= 0");
}

// Found by the plan fuzzer (runtime/fuzz): attributes or kernel sizes near
// 2^62 overflowed the window arithmetic (signed overflow, UB) before any
// check could refuse them. Every product and sum is checked now.
TEST(ShapeRules, WindowArithmeticOverflowIsRefused) {
  const int64_t big = int64_t(1) << 62;
  WindowAttrs a;
  // IntSpan views: every array is a named vector that outlives its use.
  Shape one{1}, four{4}, pad{1, 1}, noPad{0, 0}, bigOne{big}, bigPads{big, big},
      zero{0};
  a.strides = one;
  a.dilations = bigOne; // dilation * (k - 1) + 1
  a.padding = pad;
  WindowGeometry g;
  EXPECT_EQ(convGeometry(Shape{1, 1, 4}, Shape{1, 1, 3}, a, false, g),
            "window of spatial dim 0 overflows 64-bit arithmetic (kernel 3, "
            "stride 1, dilation 4611686018427387904, pads 1 and 1)");
  a.dilations = one;
  a.padding = bigPads; // in + padLo + padHi
  EXPECT_EQ(convGeometry(Shape{1, 1, 4}, Shape{1, 1, 3}, a, false, g).rfind(
                "window of spatial dim 0 overflows 64-bit arithmetic", 0),
            0u);
  a.padding = noPad;
  a.strides = bigOne; // stride * (in - 1)
  a.outputPadding = zero;
  EXPECT_EQ(convGeometry(Shape{1, 1, 4}, Shape{1, 1, 3}, a, true, g).rfind(
                "window of spatial dim 0 overflows 64-bit arithmetic", 0),
            0u);
  a.strides = one;
  a.groups = big; // output channels = weight[1] * groups, with 0 inputs
  EXPECT_EQ(convGeometry(Shape{1, 0, 4}, Shape{0, 4, 3}, a, true, g),
            "output channels overflow: 4 x 4611686018427387904 groups");
  a.groups = 1;
  // Pooling: a huge window, and windows whose product overflows.
  a.kernel = bigOne;
  a.strides = one;
  a.dilations = four;
  a.padding = noPad;
  EXPECT_EQ(poolGeometry(Shape{1, 1, 4}, a, g).rfind(
                "window of spatial dim 0 overflows 64-bit arithmetic", 0),
            0u);
  Shape k3{int64_t(1) << 32, int64_t(1) << 32, int64_t(1) << 32}, s3{1, 1, 1},
      p3(6, int64_t(1) << 31);
  a.kernel = k3;
  a.strides = s3;
  a.dilations = s3;
  a.padding = p3;
  EXPECT_EQ(poolGeometry(Shape{1, 1, 1, 1, 1}, a, g),
            "the window's sizes overflow 64-bit arithmetic");
  // Large but representable windows still pass.
  Shape k1{int64_t(1) << 40}, p1{int64_t(1) << 40, 0};
  a.kernel = k1;
  a.strides = one;
  a.dilations = one;
  a.padding = p1;
  EXPECT_EQ(poolGeometry(Shape{1, 1, 4}, a, g), "");
  EXPECT_EQ(g.out[2], 5);
}

TEST(ShapeRules, PoolGeometry) {
  WindowAttrs a;
  Shape k{3}, s{2}, d{1}, p{1, 1};
  a.kernel = k;
  a.strides = s;
  a.dilations = d;
  a.padding = p;
  WindowGeometry g;
  ASSERT_EQ(poolGeometry(Shape{2, 3, 8}, a, g), "");
  EXPECT_EQ(g.outShape(), (Shape{2, 3, 4}));
  EXPECT_EQ(g.c, 3);
  EXPECT_EQ(g.o, 3);
  EXPECT_EQ(g.kernelDims(), (Shape{3}));
  EXPECT_EQ(g.k, (std::array<int64_t, 3>{1, 1, 3}));

  EXPECT_EQ(poolGeometry(Shape{2, 3}, a, g),
            "input must have rank N+2 with N >= 1, got [2,3]");
  EXPECT_EQ(poolGeometry(Shape{2, 3, 8, 8}, a, g), "expected 2 kernel sizes, got 1");
  Shape big{11};
  a.kernel = big;
  EXPECT_EQ(poolGeometry(Shape{2, 3, 8}, a, g),
            "window larger than padded input in spatial dim 0");
  Shape zero{0};
  a.kernel = zero;
  EXPECT_EQ(poolGeometry(Shape{2, 3, 8}, a, g), "kernel sizes must be >= 1");
}

} // namespace
