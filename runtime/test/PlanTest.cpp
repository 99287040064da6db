//===- PlanTest.cpp - plan container and header validation -------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Every error Program::load reports for a malformed container or header, and
// a fuzz pass (truncations, bit flips) that only requires load not to crash.
//===----------------------------------------------------------------------===//
#include "kiln/runtime/Kernel.h"
#include "kiln/runtime/PlanFile.h"
#include "kiln/runtime/Runtime.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <algorithm>
#include <cstdio>
#include <random>

using namespace kiln::rt;
using nlohmann::json;

namespace {

/// out = in0 + in1 (in1 optional) over f32, element by element.
class TestAdd : public Kernel {
public:
  explicit TestAdd(int64_t n) : n_(n) {}
  void run(ExecContext &, const void *const *in, void *const *out) override {
    const float *a = static_cast<const float *>(in[0]);
    const float *b = static_cast<const float *>(in[1]);
    float *o = static_cast<float *>(out[0]);
    for (int64_t i = 0; i < n_; ++i)
      o[i] = a[i] + (b ? b[i] : 0.0f);
  }

private:
  int64_t n_;
};

const KernelRegistry &testRegistry() {
  static const KernelRegistry r = [] {
    KernelRegistry r;
    r.add("add", [](const KernelSpec &s) -> std::unique_ptr<Kernel> {
      expectArity(s, 2, 1);
      if (s.inputs[0]->dtype != DType::F32)
        unsupportedType(s, s.inputs[0]->dtype);
      for (const TensorDesc *d : s.inputs)
        if (d && d->bytes() != s.outputs[0]->bytes())
          throw Error("operand sizes differ");
      return std::make_unique<TestAdd>(s.outputs[0]->numel());
    });
    r.add("fail_factory", [](const KernelSpec &) -> std::unique_ptr<Kernel> {
      throw Error("bad attrs");
    });
    r.add("null_factory",
          [](const KernelSpec &) -> std::unique_ptr<Kernel> { return nullptr; });
    return r;
  }();
  return r;
}

/// x: input f32[2,3]; w: param; c: constant; t = x + w; u = t + c; y = view(u).
json basicHeader() {
  return json::parse(R"({
    "format": "kiln-plan", "version": 1, "producer": "test",
    "function": "forward", "target": "cpu", "alignment": 64,
    "arena_bytes": 128,
    "values": [
      {"dtype": "f32", "shape": [2, 3], "kind": "input", "index": 0, "name": "x"},
      {"dtype": "f32", "shape": [2, 3], "kind": "param", "name": "w",
       "data_offset": 0, "data_bytes": 24},
      {"dtype": "f32", "shape": [2, 3], "kind": "constant",
       "data_offset": 64, "data_bytes": 24},
      {"dtype": "f32", "shape": [2, 3], "kind": "arena", "offset": 0},
      {"dtype": "f32", "shape": [2, 3], "kind": "arena", "offset": 64},
      {"dtype": "f32", "shape": [6], "kind": "view", "source": 4}
    ],
    "inputs": [0],
    "outputs": [5, 3],
    "output_names": ["y", "t"],
    "steps": [
      {"kernel": "add", "inputs": [0, 1], "outputs": [3], "attrs": {},
       "loc": "/Add_0"},
      {"kernel": "add", "inputs": [3, 2], "outputs": [4], "loc": "/Add_1"}
    ]
  })");
}

std::string basicBlob() {
  std::string blob(128, '\0');
  float w[6], c[6];
  for (int i = 0; i < 6; ++i) {
    w[i] = 10.0f;
    c[i] = 100.0f;
  }
  std::memcpy(&blob[0], w, 24);
  std::memcpy(&blob[64], c, 24);
  return blob;
}

std::string build(const json &h, const std::string &blob = basicBlob()) {
  return writePlanContainer(h.dump(), blob);
}

/// Loads with the test kernels; returns the error ("" on success).
std::string loadError(const std::string &bytes) {
  std::string err;
  auto p = Program::load(bytes.data(), bytes.size(), err, &testRegistry());
  if (p)
    return "";
  EXPECT_FALSE(err.empty());
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  return err;
}

std::string headerError(const std::function<void(json &)> &mutate) {
  json h = basicHeader();
  mutate(h);
  return loadError(build(h));
}

bool startsWith(const std::string &s, const std::string &prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

} // namespace

TEST(Plan, BasicPlanLoads) {
  std::string bytes = build(basicHeader());
  std::string err;
  auto p = Program::load(bytes.data(), bytes.size(), err, &testRegistry());
  ASSERT_TRUE(p) << err;
  EXPECT_EQ(p->inputNames(), std::vector<std::string>{"x"});
  EXPECT_EQ(p->outputNames(), (std::vector<std::string>{"y", "t"}));
  EXPECT_EQ(p->inputDescs()[0].str(), "f32[2,3]");
  EXPECT_EQ(p->outputDescs()[0].str(), "f32[6]");
  EXPECT_EQ(p->outputDescs()[1].str(), "f32[2,3]");
  EXPECT_EQ(p->arenaBytes(), 128u);
  EXPECT_EQ(p->numSteps(), 2u);
  EXPECT_EQ(p->paramNames(), std::vector<std::string>{"w"});
}

TEST(Plan, ContainerRoundTrip) {
  std::string bytes = writePlanContainer("{}", "abc");
  EXPECT_EQ(bytes.size(), 64u + 3u);
  PlanContainer c;
  std::string err;
  ASSERT_TRUE(parsePlanContainer(bytes.data(), bytes.size(), c, err)) << err;
  EXPECT_EQ(c.json, "{}");
  EXPECT_EQ(c.blob, "abc");
  EXPECT_EQ(c.version, 1u);
  // An empty blob needs no padding after the JSON.
  std::string bare = writePlanContainer("{}", "").substr(0, 34);
  EXPECT_TRUE(parsePlanContainer(bare.data(), bare.size(), c, err)) << err;
}

TEST(Plan, ContainerErrors) {
  std::string good = build(basicHeader());
  EXPECT_EQ(loadError(""), "not a Kiln plan (bad magic)");
  EXPECT_EQ(loadError("KILNPLA"), "not a Kiln plan (bad magic)");
  std::string bad = good;
  bad[0] = 'X';
  EXPECT_EQ(loadError(bad), "not a Kiln plan (bad magic)");
  EXPECT_EQ(loadError(good.substr(0, 20)),
            "truncated plan: 20 bytes, the container header needs 32");
  std::string v2 = writePlanContainer(basicHeader().dump(), basicBlob(), 2);
  EXPECT_EQ(loadError(v2), "plan format version 2, this runtime reads version 1");
  std::string v7 = writePlanContainer("", "", 7);
  EXPECT_EQ(loadError(v7), "plan format version 7, this runtime reads version 1");
  // Sizes running past the end.
  std::string longJson = good;
  longJson[16 + 7] = 1; // J += 2^56
  EXPECT_TRUE(startsWith(loadError(longJson), "truncated plan: the JSON header is"))
      << loadError(longJson);
  EXPECT_TRUE(startsWith(loadError(good.substr(0, good.size() - 1)),
                         "truncated plan: the data blob is"));
  std::string longBlob = good;
  longBlob[24 + 7] = (char)0x80; // D huge
  EXPECT_TRUE(startsWith(loadError(longBlob), "truncated plan: the data blob is"));
  EXPECT_EQ(loadError(good + "xyz"), "plan has 3 bytes after its data blob");
  // Broken JSON.
  std::string notJson = writePlanContainer("{\"format\": ", basicBlob());
  EXPECT_TRUE(startsWith(loadError(notJson), "plan header is not valid JSON: "))
      << loadError(notJson);
  EXPECT_EQ(loadError(writePlanContainer("[1, 2]", "")),
            "plan header is not a JSON object");
}

TEST(Plan, HeaderErrors) {
  EXPECT_EQ(headerError([](json &h) { h.erase("format"); }),
            "plan header has no 'format'");
  EXPECT_EQ(headerError([](json &h) { h["format"] = "onnx"; }),
            "plan header 'format' is not \"kiln-plan\"");
  EXPECT_EQ(headerError([](json &h) { h["version"] = 2; }),
            "plan header says version 2, this runtime reads version 1");
  EXPECT_EQ(headerError([](json &h) { h["target"] = "cuda"; }),
            "plan target 'cuda' is not supported (this runtime runs 'cpu')");
  EXPECT_EQ(headerError([](json &h) { h["alignment"] = 48; }),
            "plan alignment 48 is not a power of two up to 4096");
  EXPECT_EQ(headerError([](json &h) { h["arena_bytes"] = -1; }),
            "plan header 'arena_bytes' must be a non-negative integer");
  EXPECT_EQ(headerError([](json &h) { h["arena_bytes"] = 1.5; }),
            "plan header 'arena_bytes' must be a non-negative integer");
  EXPECT_EQ(headerError([](json &h) { h.erase("arena_bytes"); }),
            "plan header has no 'arena_bytes'");
  EXPECT_EQ(headerError([](json &h) { h["steps"] = json::object(); }),
            "plan 'values', 'inputs', 'outputs' and 'steps' must be arrays");
}

TEST(Plan, ValueErrors) {
  EXPECT_EQ(headerError([](json &h) { h["values"][0] = 3; }),
            "value 0: must be an object");
  EXPECT_EQ(headerError([](json &h) { h["values"][0]["dtype"] = "f128"; }),
            "value 0: unknown dtype 'f128'");
  EXPECT_EQ(headerError([](json &h) { h["values"][0].erase("dtype"); }),
            "value 0: has no 'dtype'");
  EXPECT_EQ(headerError([](json &h) { h["values"][0]["shape"] = {2, -3}; }),
            "value 0: 'shape' must be an array of non-negative integers");
  EXPECT_EQ(headerError([](json &h) { h["values"][0]["shape"] = "2x3"; }),
            "value 0: 'shape' must be an array of non-negative integers");
  EXPECT_EQ(headerError([](json &h) {
              h["values"][0]["shape"] = {int64_t(1) << 40, int64_t(1) << 40};
            }),
            "value 0: shape is too large");
  EXPECT_EQ(headerError([](json &h) {
              h["values"][3]["shape"] = {uint64_t(1) << 62, 0};
            }),
            "value 3: shape is too large");
  EXPECT_EQ(headerError([](json &h) { h["values"][0]["kind"] = "magic"; }),
            "value 0: unknown kind 'magic'");
  EXPECT_EQ(headerError([](json &h) { h["values"][0]["name"] = 5; }),
            "value 0: 'name' must be a string");
  // Inputs.
  EXPECT_EQ(headerError([](json &h) { h["values"][0]["index"] = 1; }),
            "value 0: input index 1 is out of range (the plan has 1 inputs)");
  EXPECT_EQ(headerError([](json &h) { h["values"][0].erase("index"); }),
            "value 0: has no 'index'");
  EXPECT_EQ(headerError([](json &h) {
              h["values"].push_back(h["values"][0]);
              h["inputs"] = {0, 6};
            }),
            "value 6: input index 0 is used by value 0 too");
  // Params and constants.
  EXPECT_EQ(headerError([](json &h) { h["values"][1]["data_offset"] = 200; }),
            "value 1: data [200, +24) runs past the end of the 128-byte data "
            "blob");
  EXPECT_EQ(headerError([](json &h) { h["values"][2]["data_offset"] = 112; }),
            "value 2: data [112, +24) runs past the end of the 128-byte data "
            "blob");
  EXPECT_EQ(headerError([](json &h) {
              h["values"][2]["data_offset"] = uint64_t(-8);
            }),
            "value 2: data [18446744073709551608, +24) runs past the end of the "
            "128-byte data blob");
  EXPECT_EQ(headerError([](json &h) { h["values"][1]["data_bytes"] = 20; }),
            "value 1: 'data_bytes' is 20, f32[2,3] needs 24");
  // A parameter split into blocks (one per rank) holds all of them.
  EXPECT_EQ(headerError([](json &h) { h["values"][1]["blocks"] = 2; }),
            "value 1: 'data_bytes' is 24, f32[2,3] in 2 blocks needs 48");
  EXPECT_EQ(headerError([](json &h) { h["values"][1]["blocks"] = 0; }),
            "value 1: 'blocks' is 0, not in [1, 65536]");
  EXPECT_EQ(headerError([](json &h) {
              h["values"][1]["blocks"] = 2;
              h["values"][1]["data_bytes"] = 48;
              h["values"][2]["data_offset"] = 128;
            }),
            "value 2: data [128, +24) runs past the end of the 128-byte data blob");
  EXPECT_EQ(headerError([](json &h) { h["values"][1]["data_offset"] = 2; }),
            "value 1: 'data_offset' 2 is not a multiple of the element size");
  EXPECT_EQ(headerError([](json &h) { h["values"][1].erase("name"); }),
            "value 1: a parameter needs a 'name'");
  EXPECT_EQ(headerError([](json &h) {
              json dup = h["values"][1];
              h["values"].push_back(dup);
            }),
            "value 6: parameter name 'w' is used by value 1 too");
  // Arena.
  EXPECT_EQ(headerError([](json &h) { h["values"][3]["offset"] = 32; }),
            "value 3: arena offset 32 is not a multiple of the alignment 64");
  EXPECT_EQ(headerError([](json &h) { h["values"][3]["offset"] = 128; }),
            "value 3: arena bytes [128, +24) run past arena_bytes 128");
  EXPECT_EQ(headerError([](json &h) { h["arena_bytes"] = 80; }),
            "value 4: arena bytes [64, +24) run past arena_bytes 80");
  // Views.
  EXPECT_EQ(headerError([](json &h) { h["values"][5]["source"] = 5; }),
            "value 5: view source 5 is not an earlier value");
  EXPECT_EQ(headerError([](json &h) { h["values"][5]["shape"] = {5}; }),
            "value 5: view f32[5] has 20 bytes, its source (value 4, f32[2,3]) "
            "has 24");
  // A view may reinterpret the bytes with another dtype of the same size.
  EXPECT_EQ(headerError([](json &h) { h["values"][5]["dtype"] = "i32"; }), "");
}

TEST(Plan, InputOutputErrors) {
  EXPECT_EQ(headerError([](json &h) { h["inputs"] = {1}; }),
            "inputs[0] is value 1, a param value, not an input");
  EXPECT_EQ(headerError([](json &h) { h["inputs"] = {9}; }),
            "inputs[0] is value 9, out of range (the plan has 6 values)");
  EXPECT_EQ(headerError([](json &h) { h["inputs"] = {"x"}; }),
            "inputs[0] must be a value index");
  EXPECT_EQ(headerError([](json &h) { h["inputs"] = json::array(); }),
            "value 0: input index 0 is out of range (the plan has 0 inputs)");
  EXPECT_EQ(headerError([](json &h) {
              h["values"].push_back(h["values"][0]);
              h["values"][6]["index"] = 1;
              h["inputs"] = {6, 0};
            }),
            "inputs[0] is value 6, whose input index is 1");
  EXPECT_EQ(headerError([](json &h) { h["outputs"][0] = -1; }),
            "outputs[0] is -1 (only a step's inputs may be absent)");
  EXPECT_EQ(headerError([](json &h) { h["outputs"][1] = 6; }),
            "outputs[1] is value 6, out of range (the plan has 6 values)");
  EXPECT_EQ(headerError([](json &h) { h["output_names"] = {"y"}; }),
            "plan 'output_names' must be an array as long as 'outputs' (2)");
  EXPECT_EQ(headerError([](json &h) { h["output_names"][1] = 3; }),
            "output_names[1] must be a string");
  // Without output_names, outputs are output_<k>.
  json h = basicHeader();
  h.erase("output_names");
  std::string bytes = build(h), err;
  auto p = Program::load(bytes.data(), bytes.size(), err, &testRegistry());
  ASSERT_TRUE(p) << err;
  EXPECT_EQ(p->outputNames(), (std::vector<std::string>{"output_0", "output_1"}));
}

TEST(Plan, StepErrors) {
  EXPECT_EQ(headerError([](json &h) { h["steps"][0] = "add"; }),
            "step 0: must be an object");
  EXPECT_EQ(headerError([](json &h) { h["steps"][0].erase("kernel"); }),
            "step 0: has no 'kernel'");
  EXPECT_EQ(headerError([](json &h) { h["steps"][0]["inputs"][1] = 17; }),
            "step 0: input 1 is value 17, out of range (the plan has 6 values)");
  EXPECT_EQ(headerError([](json &h) { h["steps"][0]["inputs"][1] = -2; }),
            "step 0: input 1 must be a value index");
  EXPECT_EQ(headerError([](json &h) { h["steps"][0]["outputs"][0] = -1; }),
            "step 0: output 0 is -1 (only a step's inputs may be absent)");
  EXPECT_EQ(headerError([](json &h) { h["steps"][1]["outputs"] = 4; }),
            "step 1: 'inputs' and 'outputs' must be arrays of value indices");
  EXPECT_EQ(headerError([](json &h) { h["steps"][0]["outputs"][0] = 0; }),
            "step 0: output 0 is value 0, which is read-only (an input)");
  EXPECT_EQ(headerError([](json &h) { h["steps"][0]["outputs"][0] = 2; }),
            "step 0: output 0 is value 2, which is read-only (a constant)");
  EXPECT_EQ(headerError([](json &h) {
              h["values"].push_back(
                  {{"dtype", "f32"}, {"shape", {6}}, {"kind", "view"}, {"source", 2}});
              h["steps"][1]["outputs"][0] = 6;
            }),
            "step 1: output 0 is value 6, which is read-only (a constant, "
            "through a view)");
  EXPECT_EQ(headerError([](json &h) { h["steps"][0]["attrs"] = {1, 2}; }),
            "step 0: 'attrs' must be an object");
  EXPECT_EQ(headerError([](json &h) { h["steps"][0]["loc"] = 1; }),
            "step 0: 'loc' must be a string");
  EXPECT_EQ(headerError([](json &h) { h["steps"][1]["kernel"] = "foo"; }),
            "step 1 ('foo' at /Add_1): no CPU kernel 'foo'");
  // A step may write a parameter (training updates them in place).
  EXPECT_EQ(headerError([](json &h) { h["steps"][0]["outputs"][0] = 1; }), "");
  // An absent optional input is -1.
  EXPECT_EQ(headerError([](json &h) { h["steps"][0]["inputs"][1] = -1; }), "");
}

TEST(Plan, FactoryErrorsNameTheStep) {
  EXPECT_EQ(headerError([](json &h) {
              h["steps"][1]["kernel"] = "fail_factory";
            }),
            "step 1 ('fail_factory' at /Add_1): bad attrs");
  EXPECT_EQ(headerError([](json &h) {
              h["steps"][1]["kernel"] = "fail_factory";
              h["steps"][1].erase("loc");
            }),
            "step 1 ('fail_factory'): bad attrs");
  EXPECT_EQ(headerError([](json &h) { h["steps"][0]["inputs"] = {0}; }),
            "step 0 ('add' at /Add_0): kernel 'add' takes 2 inputs and 1 "
            "outputs, the step has 1 and 1");
  EXPECT_EQ(headerError([](json &h) {
              for (auto &v : h["values"])
                v["dtype"] = "i32";
            }),
            "step 0 ('add' at /Add_0): unsupported element type i32 for kernel "
            "'add'");
  EXPECT_EQ(headerError([](json &h) { h["steps"][0]["kernel"] = "null_factory"; }),
            "step 0 ('null_factory' at /Add_0): the kernel factory made no "
            "kernel");
}

TEST(Plan, DefaultRegistryIsTheCpuOne) {
  json h = basicHeader();
  h["steps"][0]["kernel"] = "no_such_kernel_anywhere";
  std::string bytes = build(h), err;
  EXPECT_FALSE(Program::load(bytes.data(), bytes.size(), err));
  EXPECT_EQ(err, "step 0 ('no_such_kernel_anywhere' at /Add_0): no CPU kernel "
            "'no_such_kernel_anywhere'");
}

TEST(Plan, LoadFile) {
  std::string err;
  EXPECT_FALSE(Program::loadFile("/nonexistent/dir/x.plan", err));
  EXPECT_EQ(err, "/nonexistent/dir/x.plan: No such file or directory");
  std::string path = ::testing::TempDir() + "/kiln_plan_test.plan";
  std::string bytes = build(basicHeader());
  {
    std::FILE *f = std::fopen(path.c_str(), "wb");
    ASSERT_TRUE(f);
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  }
  auto p = Program::loadFile(path, err, &testRegistry());
  EXPECT_TRUE(p) << err;
  {
    std::FILE *f = std::fopen(path.c_str(), "wb");
    ASSERT_TRUE(f);
    std::fwrite(bytes.data(), 1, 40, f);
    std::fclose(f);
  }
  EXPECT_FALSE(Program::loadFile(path, err, &testRegistry()));
  EXPECT_TRUE(startsWith(err, path + ": truncated plan: ")) << err;
  std::remove(path.c_str());
}

// Load must never crash on a corrupted plan: every truncation, every single
// bit flip, and random byte runs. A load may succeed (e.g. a flipped bit in
// the blob); then the program must also run without crashing.
TEST(Plan, FuzzNeverCrashes) {
  const std::string good = build(basicHeader());
  float x[6] = {1, 2, 3, 4, 5, 6};
  auto tryOne = [&](const std::string &bytes) {
    std::string err;
    auto p = Program::load(bytes.data(), bytes.size(), err, &testRegistry());
    if (!p) {
      EXPECT_FALSE(err.empty());
      EXPECT_EQ(err.find('\n'), std::string::npos);
      return;
    }
    std::vector<HostTensor> ins;
    for (const TensorDesc &d : p->inputDescs()) {
      if (d.bytes() > (1u << 20))
        return;
      HostTensor t(d);
      std::memcpy(t.data(), x, std::min<size_t>(sizeof x, t.bytes()));
      ins.push_back(t);
    }
    std::vector<const HostTensor *> in;
    for (auto &t : ins)
      in.push_back(&t);
    std::vector<HostTensor> out;
    p->run(in, out, err);
  };
  for (size_t n = 0; n < good.size(); ++n)
    tryOne(good.substr(0, n));
  for (size_t i = 0; i < good.size(); ++i)
    for (int b = 0; b < 8; ++b) {
      std::string bad = good;
      bad[i] ^= (char)(1 << b);
      tryOne(bad);
    }
  std::mt19937 rng(42);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bad = good;
    size_t at = rng() % bad.size(), len = 1 + rng() % 8;
    for (size_t k = at; k < at + len && k < bad.size(); ++k)
      bad[k] = "0123456789-.,:[]{}\"e "[rng() % 21];
    tryOne(bad);
  }
}

// Plans found fuzzing the loader (runtime/fuzz/PlanFuzzer.cpp), loaded with
// the CPU kernels: each is refused with a one-line message. Before, the
// window ones were signed overflows in the window geometry (ShapeRules.h,
// undefined behaviour), slice_grad's range check overflowed too, and pad
// allocated its 2^40-entry index map (8 TiB)
// before comparing its result with the step's output shape.
TEST(Plan, FuzzerRegressions) {
  auto window = [](const std::string &kernel, const std::string &attrs) {
    json h = json::parse(R"({
      "format": "kiln-plan", "version": 1, "arena_bytes": 64,
      "values": [
        {"dtype": "f32", "shape": [1, 1, 4], "kind": "input", "index": 0},
        {"dtype": "f32", "shape": [1, 1, 3], "kind": "input", "index": 1},
        {"dtype": "f32", "shape": [1, 1, 4], "kind": "arena", "offset": 0}
      ],
      "inputs": [0, 1], "outputs": [2], "steps": []})");
    json step = {{"kernel", kernel}, {"outputs", {2}}, {"loc", "/w"},
                 {"attrs", json::parse(attrs)}};
    step["inputs"] = kernel.find("conv") == 0 ? json::array({0, 1})
                                               : json::array({0});
    h["steps"].push_back(step);
    std::string bytes = writePlanContainer(h.dump(), "");
    std::string err;
    EXPECT_FALSE(Program::load(bytes.data(), bytes.size(), err));
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
    return err;
  };
  EXPECT_EQ(window("conv", R"({"strides": [1], "dilations": [4611686018427387904],
                               "padding": [1, 1], "groups": 1})"),
            "step 0 ('conv' at /w): kernel 'conv': window of spatial dim 0 "
            "overflows 64-bit arithmetic (kernel 3, stride 1, dilation "
            "4611686018427387904, pads 1 and 1)");
  EXPECT_NE(window("conv", R"({"strides": [1], "dilations": [1], "groups": 1,
                               "padding": [4611686018427387904, 4611686018427387904]})")
                .find("overflows 64-bit arithmetic"),
            std::string::npos);
  EXPECT_NE(window("conv_transpose",
                   R"({"strides": [4611686018427387904], "dilations": [1],
                       "padding": [0, 0], "output_padding": [0], "groups": 1})")
                .find("overflows 64-bit arithmetic"),
            std::string::npos);
  EXPECT_NE(window("max_pool", R"({"kernel": [4611686018427387903], "strides": [1],
                                   "dilations": [4], "padding": [0, 0]})")
                .find("overflows 64-bit arithmetic"),
            std::string::npos);
  EXPECT_EQ(window("slice_grad", R"({"starts": [0, 0, 0], "limits": [1, 1, 4],
                                     "strides": [1, 1, 4611686018427387904]})"),
            "step 0 ('slice_grad' at /w): kernel 'slice_grad': slice out of "
            "range in dim 2");
  EXPECT_EQ(window("pad", R"({"low": [0, 0, 1099511627776], "high": [0, 0, 0]})"),
            "step 0 ('pad' at /w): kernel 'pad' result f32[1,1,4] should have "
            "shape [1,1,1099511627780]");
}

// The schema (runtime/schema/plan-v1.schema.json) agrees with the loader on
// what is required and on the dtype names, and accepts the test plan's shape.
TEST(Plan, SchemaMatchesLoader) {
  std::string path = std::string(KILN_RT_TEST_DATA) + "/../../schema/plan-v1.schema.json";
  std::FILE *f = std::fopen(path.c_str(), "rb");
  ASSERT_TRUE(f) << path;
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
    text.append(buf, n);
  std::fclose(f);
  json schema = json::parse(text);
  EXPECT_EQ(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
  // Removing any required top-level key makes the loader refuse the plan.
  for (const json &key : schema["required"]) {
    std::string k = key.get<std::string>();
    EXPECT_NE(headerError([&](json &h) { h.erase(k); }), "") << k;
  }
  // Every schema dtype parses and every runtime dtype is in the schema.
  std::vector<std::string> names;
  for (const json &d : schema["$defs"]["dtype"]["enum"]) {
    DType t;
    EXPECT_TRUE(parseDType(d.get<std::string>(), t)) << d;
    names.push_back(d.get<std::string>());
  }
  for (int i = 0; i <= (int)DType::Bool; ++i)
    EXPECT_NE(std::find(names.begin(), names.end(), dtypeName((DType)i)),
              names.end());
  // The value kinds are the loader's.
  for (const json &k : schema["$defs"]["value"]["properties"]["kind"]["enum"]) {
    std::string kind = k.get<std::string>();
    std::string err = headerError([&](json &h) { h["values"][3]["kind"] = kind; });
    EXPECT_EQ(err.find("unknown kind"), std::string::npos) << kind << ": " << err;
  }
}

// Deeply nested JSON neither overflows the stack while parsing nor while
// being checked or destroyed (attributes are never copied).
TEST(Plan, DeepJsonNesting) {
  const size_t depth = 200000;
  std::string deep = std::string(depth, '[') + std::string(depth, ']');
  EXPECT_EQ(loadError(writePlanContainer("{\"a\":" + deep + "}", "")),
            "plan header has no 'format'");
  std::string text = basicHeader().dump();
  size_t at = text.find("\"attrs\":{}");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 10, "\"attrs\":{\"deep\":" + deep + "}");
  // The kernel manifest declares no 'deep' for 'add', so the loader refuses
  // the step, having parsed and checked the tree (and it is destroyed).
  EXPECT_EQ(loadError(writePlanContainer(text, basicBlob())),
            "step 0 ('add' at /Add_0): attribute 'deep' is not declared for "
            "kernel 'add' by the kernel manifest");
  EXPECT_EQ(loadError(writePlanContainer(std::string(depth, '{'), "")).rfind(
                "plan header is not valid JSON: ", 0),
            0u);
}
