//===- TraceTest.cpp - TraceRecorder and interval arithmetic ----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "kiln/runtime/Trace.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

using namespace kiln::rt;

TEST(Trace, UnionMergesOverlapsAndIgnoresEmptyIntervals) {
  EXPECT_DOUBLE_EQ(unionLength({}), 0.0);
  EXPECT_DOUBLE_EQ(unionLength({{0, 10}, {5, 15}, {20, 25}, {30, 30}}), 20.0);
  EXPECT_DOUBLE_EQ(unionLength({{20, 25}, {0, 10}, {1, 2}}), 15.0);
}

TEST(Trace, UncoveredIsCommunicationNotWaitedFor) {
  // Communication [0, 10) and [20, 30); compute waited [5, 12) and [25, 40):
  // hidden are [0, 5) and [20, 25).
  EXPECT_DOUBLE_EQ(uncoveredLength({{0, 10}, {20, 30}}, {{5, 12}, {25, 40}}), 10.0);
  // Nothing waited: all of it hidden; all waited: none.
  EXPECT_DOUBLE_EQ(uncoveredLength({{0, 10}}, {}), 10.0);
  EXPECT_DOUBLE_EQ(uncoveredLength({{0, 10}}, {{-5, 15}}), 0.0);
  // Overlapping holes count once.
  EXPECT_DOUBLE_EQ(uncoveredLength({{0, 10}}, {{2, 6}, {4, 8}}), 4.0);
  // A hole spanning two intervals.
  EXPECT_DOUBLE_EQ(uncoveredLength({{0, 4}, {6, 10}}, {{3, 7}}), 6.0);
}

TEST(Trace, RecordsOnlyWhileEnabledAndWritesChromeJson) {
  TraceRecorder t;
  auto now = TraceRecorder::Clock::now();
  t.record("skipped", "kernel", TraceThread::Compute, now, now);
  EXPECT_TRUE(t.events().empty());
  t.setEnabled(true);
  t.record("mat\"mul", "kernel", TraceThread::Compute, now,
           now + std::chrono::microseconds(250), {{"node", "/fc1/Gemm"}});
  t.record("bucket all_reduce", "collective", TraceThread::Communication, now,
           now + std::chrono::milliseconds(2));
  ASSERT_EQ(t.events().size(), 2u);
  EXPECT_NEAR(t.events()[0].durationUs, 250.0, 1e-6);

  auto j = nlohmann::json::parse("[" + t.chromeEvents(3, "rank 3") + "]");
  int complete = 0, named = 0;
  for (const auto &e : j) {
    EXPECT_EQ(e["pid"], 3);
    if (e["ph"] == "X") {
      ++complete;
      EXPECT_TRUE(e.contains("ts") && e.contains("dur") && e.contains("tid"));
    } else {
      EXPECT_EQ(e["ph"], "M");
      ++named;
    }
  }
  EXPECT_EQ(complete, 2);
  EXPECT_EQ(named, 4); // the process and its three threads
  EXPECT_EQ(j[4]["name"], "mat\"mul");
  EXPECT_EQ(j[4]["args"]["node"], "/fc1/Gemm");
  EXPECT_EQ(j[5]["tid"], 1);
  EXPECT_NEAR(j[5]["dur"].get<double>(), 2000.0, 1e-3);
}

TEST(Trace, LabelsAreInternedOnceAndResolvedWhenRead) {
  TraceRecorder t;
  auto args = std::make_shared<const TraceArgs>(
      TraceArgs{{"node", "/fc1/Gemm"}, {"flops", "128"}});
  TraceLabel mm = t.label("matmul", "kernel", args);
  TraceLabel relu = t.label("relu", "kernel");
  EXPECT_NE(mm, relu);
  auto now = TraceRecorder::Clock::now();
  t.record(mm, TraceThread::Compute, now, now + std::chrono::microseconds(5));
  EXPECT_TRUE(t.events().empty()); // not enabled yet
  t.setEnabled(true);
  t.reserve(8);
  for (int k = 0; k < 3; ++k)
    t.record(k == 1 ? relu : mm, TraceThread::Compute,
             now + std::chrono::microseconds(10 * k),
             now + std::chrono::microseconds(10 * k + 7));
  auto ev = t.events();
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].name, "matmul");
  EXPECT_EQ(ev[1].name, "relu");
  EXPECT_EQ(ev[2].category, "kernel");
  EXPECT_EQ(ev[0].args.get(), args.get()); // shared, not copied
  EXPECT_EQ(ev[1].args, nullptr);
  EXPECT_NEAR(ev[2].durationUs, 7.0, 1e-9);
  EXPECT_NEAR(ev[2].startUs - ev[0].startUs, 20.0, 1e-3);

  // clear() drops the events, not the labels.
  t.clear();
  EXPECT_TRUE(t.events().empty());
  t.record(relu, TraceThread::Communication, now, now);
  ev = t.events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].name, "relu");
  EXPECT_EQ(ev[0].thread, TraceThread::Communication);
  auto j = nlohmann::json::parse("[" + t.chromeEvents(0, "rank 0") + "]");
  EXPECT_EQ(j.back()["name"], "relu");
  EXPECT_EQ(j.back()["tid"], 1);
}
