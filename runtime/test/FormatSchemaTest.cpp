//===- FormatSchemaTest.cpp - the shared format tables vs the schemas -----===//
// SPDX-License-Identifier: Apache-2.0
//
// The dtype table (DType.h) and the training config's field table
// (TrainConfig.h) are the one definition the compiler and the runtime use;
// the JSON schemas in runtime/schema/ are written by hand for outside tools.
// These tests hold the two in step: a dtype or config field added on one side
// only fails here.
//===----------------------------------------------------------------------===//
#include "kiln/runtime/DType.h"
#include "kiln/runtime/PlanFile.h"
#include "kiln/runtime/TrainConfig.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <vector>

using namespace kiln::rt;
using nlohmann::json;

namespace {

json loadSchema(const std::string &name) {
  std::string path = std::string(KILN_RT_TEST_DATA) + "/../../schema/" + name;
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return json::parse(in, nullptr, /*allow_exceptions=*/true);
}

std::vector<std::string> tableDTypeNames() {
  std::vector<std::string> names;
  for (int i = 0; i < kNumDTypes; ++i)
    names.push_back(dtypeName(DType(i)));
  return names;
}

} // namespace

// Both schemas list exactly KILN_DTYPES' names, in the table's order.
TEST(FormatSchema, DTypesMatchTheSchemas) {
  std::vector<std::string> want = tableDTypeNames();
  for (const char *file : {"plan-v1.schema.json", "train-config-v1.schema.json"}) {
    json s = loadSchema(file);
    std::vector<std::string> got = s["$defs"]["dtype"]["enum"];
    EXPECT_EQ(got, want) << file;
  }
}

// The parameter roles the loader accepts are the schema's, in its order.
TEST(FormatSchema, RolesMatchTheSchema) {
  std::vector<std::string> want(std::begin(kParamRoles), std::end(kParamRoles));
  std::vector<std::string> got = loadSchema("plan-v1.schema.json")["$defs"]["role"]["enum"];
  EXPECT_EQ(got, want);
  EXPECT_TRUE(isParamRole("optimizer"));
  EXPECT_FALSE(isParamRole("bias"));
}

// Every table row's size and kind agree with its name, so the table itself
// has no typo the schema check would miss.
TEST(FormatSchema, DTypeTableIsConsistent) {
  std::set<std::string> seen;
  for (int i = 0; i < kNumDTypes; ++i) {
    DType t = DType(i);
    std::string n = dtypeName(t);
    EXPECT_TRUE(seen.insert(n).second) << n << " listed twice";
    DType back;
    ASSERT_TRUE(parseDType(n, back)) << n;
    EXPECT_EQ(back, t);
    if (t == DType::Bool) {
      EXPECT_EQ(dtypeKind(t), DTypeKind::Bool);
      EXPECT_EQ(dtypeSize(t), 1u);
      continue;
    }
    char k = n[0];
    size_t bits = std::stoul(n.substr(n[0] == 'b' ? 2 : 1));
    EXPECT_EQ(dtypeSize(t) * 8, bits) << n;
    DTypeKind want = k == 'i'   ? DTypeKind::SignedInt
                     : k == 'u' ? DTypeKind::UnsignedInt
                                : DTypeKind::Float;
    EXPECT_EQ(dtypeKind(t), want) << n;
  }
}

namespace {

const char *jsonTypeName(JsonType t) {
  switch (t) {
  case JsonType::String: return "string";
  case JsonType::Integer: return "integer";
  case JsonType::Number: return "number";
  case JsonType::Boolean: return "boolean";
  case JsonType::Array: return "array";
  case JsonType::Object: return "object";
  }
  return "?";
}

/// The schema object describing the members of `o`.
const json &schemaObject(const json &schema, TrainConfigObject o) {
  switch (o) {
  case TrainConfigObject::Top: return schema;
  case TrainConfigObject::Optimizer: return schema["properties"]["optimizer"];
  case TrainConfigObject::Schedule: return schema["properties"]["schedule"];
  case TrainConfigObject::Mesh: return schema["properties"]["mesh"];
  case TrainConfigObject::LossScale: return schema["properties"]["loss_scale"];
  case TrainConfigObject::Prune: return schema["properties"]["prune"];
  case TrainConfigObject::Qat: return schema["properties"]["qat"];
  case TrainConfigObject::Data: return schema["properties"]["data"]["items"];
  case TrainConfigObject::QatSite:
    return schema["properties"]["qat"]["properties"]["sites"]["items"];
  case TrainConfigObject::PruneChannel:
    return schema["properties"]["prune"]["properties"]["channels"]["items"];
  case TrainConfigObject::MeshSplit:
    return schema["properties"]["mesh"]["properties"]["split"]["additionalProperties"];
  }
  return schema;
}

} // namespace

// Each field of the table is in the schema with its type, nullability,
// requiredness and default; each property of the schema is in the table.
TEST(FormatSchema, TrainConfigFieldsMatchTheSchema) {
  json schema = loadSchema("train-config-v1.schema.json");
  std::set<std::pair<int, std::string>> tableKeys;
  for (size_t i = 0; i < kNumTrainConfigFields; ++i) {
    const TrainConfigField &f = kTrainConfigFields[i];
    EXPECT_EQ(size_t(f.id), i) << f.key << ": table out of enum order";
    tableKeys.insert({int(f.object), f.key});
    const json &obj = schemaObject(schema, f.object);
    std::string where = std::string(trainConfigObjectKey(f.object)) + "." + f.key;
    ASSERT_TRUE(obj["properties"].contains(f.key)) << where << " not in the schema";
    const json &p = obj["properties"][f.key];
    json wantType = f.nullable ? json::array({jsonTypeName(f.type), "null"})
                               : json(jsonTypeName(f.type));
    EXPECT_EQ(p["type"], wantType) << where;
    std::vector<std::string> required = obj.value("required", std::vector<std::string>{});
    bool inRequired =
        std::find(required.begin(), required.end(), f.key) != required.end();
    EXPECT_EQ(inRequired, f.required) << where;
    EXPECT_EQ(p.contains("default"), f.dflt.present) << where;
    if (f.dflt.present && p.contains("default")) {
      switch (f.dflt.type) {
      case JsonType::String:
        EXPECT_EQ(p["default"], f.dflt.string) << where;
        break;
      case JsonType::Boolean:
        EXPECT_EQ(p["default"], f.dflt.boolean) << where;
        break;
      default:
        EXPECT_EQ(p["default"].get<double>(), f.dflt.number) << where;
      }
    }
  }
  for (TrainConfigObject o :
       {TrainConfigObject::Top, TrainConfigObject::Optimizer,
        TrainConfigObject::Schedule, TrainConfigObject::Mesh,
        TrainConfigObject::LossScale, TrainConfigObject::Prune,
        TrainConfigObject::Qat, TrainConfigObject::Data,
        TrainConfigObject::QatSite, TrainConfigObject::PruneChannel,
        TrainConfigObject::MeshSplit}) {
    const json &obj = schemaObject(schema, o);
    EXPECT_EQ(obj["additionalProperties"], false) << trainConfigObjectKey(o);
    for (auto it = obj["properties"].begin(); it != obj["properties"].end(); ++it)
      EXPECT_TRUE(tableKeys.count({int(o), it.key()}))
          << trainConfigObjectKey(o) << "." << it.key()
          << " is in the schema but not in KILN_TRAIN_CONFIG_FIELDS";
  }
  EXPECT_EQ(schema["properties"]["format"]["const"], kTrainConfigFormat);
  EXPECT_EQ(schema["properties"]["version"]["const"], kTrainConfigVersion);
}
