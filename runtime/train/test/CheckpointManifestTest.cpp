//===- CheckpointManifestTest.cpp - the manifest parser is strict ---------===//
// SPDX-License-Identifier: Apache-2.0
//
// A written manifest parses back to the same fields; each field that is
// missing, mistyped or out of range is refused with a message naming it;
// floats are not integers (issue 21: "step": 50.5 was read as 50).
//===----------------------------------------------------------------------===//
#include "CheckpointManifest.h"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

using namespace kiln::train;
using nlohmann::json;

namespace {

CheckpointManifest sample() {
  CheckpointManifest m;
  m.step = 50;
  m.epoch = 2;
  m.position = 3;
  m.seed = 18446744073709551615ull; // the whole uint64 range survives
  m.shuffle = false;
  m.model = "digits.onnx";
  m.modelSha256 = std::string(64, 'a');
  m.optimizer = "adamw";
  m.batchSize = 32;
  m.ranks = 1;
  m.params = {{"fc1.weight", "weight", "f32", {784, 64}},
              {"fc1.weight.m", "optimizer-state", "f32", {784, 64}},
              {"count", "state", "i64", {}}};
  m.tensorsBytes = 12345;
  m.tensorsSha256 = std::string(64, '0');
  return m;
}

std::string refuse(const json &j) {
  CheckpointManifest m;
  std::string why;
  EXPECT_FALSE(parseCheckpointManifest(j.dump(), m, why)) << j.dump();
  return why;
}

} // namespace

TEST(CheckpointManifest, RoundTrips) {
  CheckpointManifest a = sample(), b;
  std::string why;
  ASSERT_TRUE(parseCheckpointManifest(writeCheckpointManifest(a), b, why)) << why;
  EXPECT_EQ(b.step, 50);
  EXPECT_EQ(b.epoch, 2);
  EXPECT_EQ(b.position, 3);
  EXPECT_EQ(b.seed, a.seed);
  EXPECT_FALSE(b.shuffle);
  EXPECT_EQ(b.model, a.model);
  EXPECT_EQ(b.modelSha256, a.modelSha256);
  EXPECT_EQ(b.optimizer, "adamw");
  EXPECT_EQ(b.batchSize, 32);
  ASSERT_EQ(b.params.size(), 3u);
  EXPECT_EQ(b.params[1].name, "fc1.weight.m");
  EXPECT_EQ(b.params[1].role, "optimizer-state");
  EXPECT_EQ(b.params[0].shape, (std::vector<int64_t>{784, 64}));
  EXPECT_TRUE(b.params[2].shape.empty());
  EXPECT_EQ(b.tensorsBytes, 12345u);
  EXPECT_EQ(b.tensorsSha256, a.tensorsSha256);
}

TEST(CheckpointManifest, RefusesFloatsAndRanges) {
  json good = json::parse(writeCheckpointManifest(sample()));
  json j = good;
  j["step"] = 50.5;
  EXPECT_EQ(refuse(j), "field 'step' is not an integer");
  j = good;
  j["step"] = 50.0; // a float even when whole
  EXPECT_EQ(refuse(j), "field 'step' is not an integer");
  j = good;
  j["epoch"] = -1;
  EXPECT_NE(refuse(j).find("field 'epoch' is -1"), std::string::npos);
  j = good;
  j["position"] = 18446744073709551615ull;
  EXPECT_EQ(refuse(j), "field 'position' is out of range");
  j = good;
  j["seed"] = -3;
  EXPECT_EQ(refuse(j), "field 'seed' is not a non-negative integer");
  j = good;
  j["layout"]["batch_size"] = 0;
  EXPECT_NE(refuse(j).find("field 'layout.batch_size' is 0"), std::string::npos);
  j = good;
  j["params"][0]["shape"][1] = -64;
  EXPECT_NE(refuse(j).find("params[0].shape"), std::string::npos);
  j = good;
  j["params"][0]["shape"][1] = 1.5;
  EXPECT_NE(refuse(j).find("params[0].shape"), std::string::npos);
  j = good;
  j["files"]["tensors.safetensors"]["bytes"] = "12345";
  EXPECT_EQ(refuse(j),
            "field 'files.tensors.safetensors.bytes' is not a non-negative integer");
}

TEST(CheckpointManifest, RefusesMissingAndMistypedFields) {
  json good = json::parse(writeCheckpointManifest(sample()));
  for (const char *key : {"step", "epoch", "position", "seed", "shuffle",
                          "model", "model_sha256", "optimizer", "layout",
                          "params", "files"}) {
    json j = good;
    j.erase(key);
    EXPECT_EQ(refuse(j), std::string("lacks field '") + key + "'");
  }
  json j = good;
  j["format"] = "other";
  EXPECT_NE(refuse(j).find("not a kiln-checkpoint"), std::string::npos);
  j = good;
  j["version"] = 2;
  EXPECT_NE(refuse(j).find("not version 1"), std::string::npos);
  j = good;
  j["shuffle"] = 1;
  EXPECT_EQ(refuse(j), "field 'shuffle' is not a boolean");
  j = good;
  j["optimizer"] = "";
  EXPECT_EQ(refuse(j), "field 'optimizer' is empty");
  j = good;
  j["files"]["tensors.safetensors"]["sha256"] = std::string(63, '0');
  EXPECT_NE(refuse(j).find("64 lowercase hex"), std::string::npos);
  j = good;
  j["params"][1]["name"] = "fc1.weight";
  EXPECT_EQ(refuse(j), "names parameter 'fc1.weight' twice");
  j = good;
  j["params"][2].erase("role");
  EXPECT_EQ(refuse(j), "lacks field 'params[2].role'");
  EXPECT_EQ(refuse(json::array()), "is not a JSON object");
  CheckpointManifest m;
  std::string why;
  EXPECT_FALSE(parseCheckpointManifest("{\"step\": ", m, why));
  EXPECT_EQ(why, "is not valid JSON");
  EXPECT_FALSE(parseCheckpointManifest("", m, why));
  EXPECT_FALSE(parseCheckpointManifest(std::string(100000, '['), m, why));
}

// ZeRO shard files, per-rank state and the loss scale: written, read back,
// and refused when they do not add up (a missing shard file, one the ranks
// do not imply, a wrong type, more skipped steps than steps).
TEST(CheckpointManifest, ShardsRankStateAndLossScale) {
  CheckpointManifest a = sample();
  a.ranks = 2;
  a.params[1].sharded = true;
  a.rankState = true;
  a.shards = {{100, std::string(64, '1')}, {100, std::string(64, '2')}};
  a.lossScale = 32768;
  a.growthTracker = 5;
  a.skipped = 3;
  a.skippedInARow = 1;
  CheckpointManifest b;
  std::string why;
  ASSERT_TRUE(parseCheckpointManifest(writeCheckpointManifest(a), b, why)) << why;
  EXPECT_TRUE(b.params[1].sharded);
  EXPECT_FALSE(b.params[0].sharded);
  EXPECT_TRUE(b.rankState);
  ASSERT_EQ(b.shards.size(), 2u);
  EXPECT_EQ(b.shards[1].sha256, std::string(64, '2'));
  EXPECT_EQ(b.lossScale, 32768);
  EXPECT_EQ(b.growthTracker, 5);
  EXPECT_EQ(b.skipped, 3);
  EXPECT_EQ(b.skippedInARow, 1);

  json good = json::parse(writeCheckpointManifest(a));
  json j = good;
  j["files"].erase("shard-00001-of-00002.safetensors");
  EXPECT_EQ(refuse(j), "lacks field 'files.shard-00001-of-00002.safetensors'");
  j = good;
  j["files"]["shard-00002-of-00003.safetensors"] = j["files"]["shard-00000-of-00002.safetensors"];
  EXPECT_EQ(refuse(j), "field 'files' lists 'shard-00002-of-00003.safetensors', "
                       "which is not a file of this checkpoint");
  j = good;
  j["params"][1]["sharded"] = "yes";
  EXPECT_EQ(refuse(j), "field 'params[1].sharded' is not a boolean");
  j = good;
  j["rank_state"] = 1;
  EXPECT_EQ(refuse(j), "field 'rank_state' is not a boolean");
  j = good;
  j["loss_scale"]["scale"] = 0;
  EXPECT_EQ(refuse(j), "field 'loss_scale.scale' is not a positive float32");
  j = good;
  j["loss_scale"]["skipped"] = 51; // more than the 50 steps
  EXPECT_EQ(refuse(j), "field 'loss_scale' counts more skipped steps than steps");
  // A checkpoint without shards lists no shard file.
  j = json::parse(writeCheckpointManifest(sample()));
  j["files"]["shard-00000-of-00001.safetensors"] = j["files"]["tensors.safetensors"];
  EXPECT_EQ(refuse(j), "field 'files' lists 'shard-00000-of-00001.safetensors', "
                       "which is not a file of this checkpoint");
  EXPECT_EQ(shardFileName(3, 16), "shard-00003-of-00016.safetensors");
  EXPECT_TRUE(isShardFileName("shard-00003-of-00016.safetensors"));
  EXPECT_FALSE(isShardFileName("shard-00016-of-00016.safetensors"));
  EXPECT_FALSE(isShardFileName("shard-3-of-16.safetensors"));
  EXPECT_FALSE(isShardFileName("shard-00003-of-00016.safetensors.tmp"));
}
