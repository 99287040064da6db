//===- TrainPayloadTest.cpp - the training payload trailer ----------------===//
// SPDX-License-Identifier: Apache-2.0
//
// appendTrainPayload and parseTrainPayload (TrainPayload.h): the bytes
// kiln-compile writes split back into the same parts, each 64-byte aligned,
// and a damaged trailer is refused with the part it names.
//===----------------------------------------------------------------------===//
#include "kiln/runtime/TrainPayload.h"

#include <gtest/gtest.h>

using namespace kiln::rt;

namespace {

std::string build(std::string exe, std::string_view plan,
                  std::string_view config, std::string_view model,
                  std::string_view eval) {
  TrainPayloadParts parts;
  parts[TrainPart::Plan] = plan;
  parts[TrainPart::Config] = config;
  parts[TrainPart::Model] = model;
  parts[TrainPart::Eval] = eval;
  appendTrainPayload(exe, parts);
  return exe;
}

void putU64(std::string &s, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    s[at + i] = char((v >> (8 * i)) & 0xff);
}

} // namespace

TEST(TrainPayload, RoundTrips) {
  std::string file = build("\x7f" "ELF...", "PLAN", "{\"c\":1}", "onnx", "");
  ASSERT_EQ(file.compare(file.size() - kTrainTrailerBytes, 8, "KILNTRN1"), 0);
  TrainPayloadParts got;
  std::string err;
  ASSERT_TRUE(parseTrainPayload(file.data(), file.size(), got, err)) << err;
  EXPECT_EQ(got[TrainPart::Plan], "PLAN");
  EXPECT_EQ(got[TrainPart::Config], "{\"c\":1}");
  EXPECT_EQ(got[TrainPart::Model], "onnx");
  EXPECT_TRUE(got[TrainPart::Eval].empty());
  for (TrainPart p : {TrainPart::Plan, TrainPart::Config, TrainPart::Model})
    EXPECT_EQ((got[p].data() - file.data()) % kTrainPartAlignment, 0u)
        << trainPartName(p);
}

TEST(TrainPayload, RefusesDamage) {
  std::string err;
  TrainPayloadParts got;
  EXPECT_FALSE(parseTrainPayload("short", 5, got, err));
  EXPECT_EQ(err, "not a Kiln training executable (no payload)");

  std::string file = build("exe", "PLAN", "CONF", "M", "E");
  size_t trailer = file.size() - kTrainTrailerBytes;
  std::string bad = file;
  putU64(bad, trailer + 8 + 16 * 2 + 8, 1u << 20); // model size past the end
  EXPECT_FALSE(parseTrainPayload(bad.data(), bad.size(), got, err));
  EXPECT_EQ(err, "not a Kiln training executable (no payload): the model [192, "
                 "+1048576) runs past the trailer at " +
                     std::to_string(trailer));

  bad = file;
  putU64(bad, trailer + 8 + 16 * 1 + 8, 0); // config size 0
  EXPECT_FALSE(parseTrainPayload(bad.data(), bad.size(), got, err));
  EXPECT_EQ(err, "not a Kiln training executable (no payload): the config is empty");
}

TEST(TrainPayload, NestsThePlanAfterPruneAt) {
  // --prune l1-channel --prune-at S: a KILNTRN2 trailer whose fifth part
  // is a whole payload of its own (the smaller model), parsed the same way.
  std::string then = build("", "SMALLPLAN", "{\"s\":1}", "small-onnx", "SMALLEVAL");
  ASSERT_EQ(then.compare(then.size() - kTrainTrailerBytes, 8, "KILNTRN1"), 0);
  TrainPayloadParts parts;
  parts[TrainPart::Plan] = "PLAN";
  parts[TrainPart::Config] = "{\"c\":1}";
  parts[TrainPart::Model] = "onnx";
  parts[TrainPart::Eval] = "EVAL";
  parts[TrainPart::Then] = then;
  std::string file = "\x7f" "ELF";
  appendTrainPayload(file, parts);
  ASSERT_EQ(file.compare(file.size() - kTrainTrailer2Bytes, 8, "KILNTRN2"), 0);
  TrainPayloadParts got, inner;
  std::string err;
  ASSERT_TRUE(parseTrainPayload(file.data(), file.size(), got, err)) << err;
  EXPECT_EQ(got[TrainPart::Plan], "PLAN");
  EXPECT_EQ(got[TrainPart::Eval], "EVAL");
  ASSERT_EQ(got[TrainPart::Then].size(), then.size());
  EXPECT_EQ((got[TrainPart::Then].data() - file.data()) % kTrainPartAlignment, 0u);
  ASSERT_TRUE(parseTrainPayload(got[TrainPart::Then].data(),
                                got[TrainPart::Then].size(), inner, err))
      << err;
  EXPECT_EQ(inner[TrainPart::Plan], "SMALLPLAN");
  EXPECT_EQ(inner[TrainPart::Model], "small-onnx");
  EXPECT_EQ(inner[TrainPart::Eval], "SMALLEVAL");
  EXPECT_TRUE(inner[TrainPart::Then].empty());
  // The inner plan is 64-byte aligned in the file, as the plans are mapped
  // in place.
  EXPECT_EQ((inner[TrainPart::Plan].data() - file.data()) % kTrainPartAlignment, 0u);
  // A KILNTRN1 payload has no Then part.
  std::string plain = build("exe", "PLAN", "CONF", "M", "E");
  ASSERT_TRUE(parseTrainPayload(plain.data(), plain.size(), got, err)) << err;
  EXPECT_TRUE(got[TrainPart::Then].empty());
  // A Then part running past the trailer is named.
  std::string bad = file;
  size_t trailer = file.size() - kTrainTrailer2Bytes;
  putU64(bad, trailer + 8 + 16 * 4 + 8, 1u << 20);
  EXPECT_FALSE(parseTrainPayload(bad.data(), bad.size(), got, err));
  EXPECT_NE(err.find("the plan after --prune-at ["), std::string::npos) << err;
}
