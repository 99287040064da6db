//===- ExecutorTest.cpp - running plans end to end ----------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Hand-built plans run with test kernels: data flow through params,
// constants, the arena and views; parameters persisting across runs and
// setParam; input checks; run-time errors naming the step; the run context.
//===----------------------------------------------------------------------===//
#include "kiln/runtime/Kernel.h"
#include "kiln/runtime/PlanFile.h"
#include "kiln/runtime/Runtime.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

using namespace kiln::rt;
using nlohmann::json;

namespace {

void checkSameSize(const KernelSpec &s) {
  for (const TensorDesc *d : s.inputs)
    if (d && d->bytes() != s.outputs[0]->bytes())
      throw Error("operand sizes differ");
}

/// out = in0 + in1 (in1 optional) over f32.
class AddKernel : public Kernel {
public:
  explicit AddKernel(int64_t n) : n_(n) {}
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

/// out = in * factor (attribute, default 1) over f32.
class ScaleKernel : public Kernel {
public:
  ScaleKernel(int64_t n, float f) : n_(n), f_(f) {}
  void run(ExecContext &, const void *const *in, void *const *out) override {
    const float *a = static_cast<const float *>(in[0]);
    float *o = static_cast<float *>(out[0]);
    for (int64_t i = 0; i < n_; ++i)
      o[i] = a[i] * f_;
  }

private:
  int64_t n_;
  float f_;
};

/// Writes u64[3]: the seed, the step, and in[0]'s address.
class ContextKernel : public Kernel {
public:
  void run(ExecContext &ctx, const void *const *in, void *const *out) override {
    uint64_t *o = static_cast<uint64_t *>(out[0]);
    o[0] = ctx.seed;
    o[1] = ctx.step;
    o[2] = (uint64_t)(uintptr_t)in[0];
  }
};

class ScaleSubKernel : public Kernel {
public:
  explicit ScaleSubKernel(int64_t n) : n_(n) {}
  void run(ExecContext &, const void *const *in, void *const *out) override {
    const float *p = static_cast<const float *>(in[0]);
    const float *g = static_cast<const float *>(in[1]);
    float *o = static_cast<float *>(out[0]);
    for (int64_t i = 0; i < n_; ++i)
      o[i] = p[i] - g[i];
  }

private:
  int64_t n_;
};

class FailKernel : public Kernel {
public:
  void run(ExecContext &, const void *const *, void *const *) override {
    throw Error("boom");
  }
};

const KernelRegistry &testRegistry() {
  static const KernelRegistry r = [] {
    KernelRegistry r;
    r.add("add", [](const KernelSpec &s) -> std::unique_ptr<Kernel> {
      expectArity(s, 2, 1);
      checkSameSize(s);
      return std::make_unique<AddKernel>(s.outputs[0]->numel());
    });
    r.add("scale", [](const KernelSpec &s) -> std::unique_ptr<Kernel> {
      expectArity(s, 1, 1);
      checkSameSize(s);
      return std::make_unique<ScaleKernel>(s.outputs[0]->numel(),
                                           (float)s.attrs.getFloat("factor", 1.0));
    });
    r.add("context", [](const KernelSpec &s) -> std::unique_ptr<Kernel> {
      expectArity(s, 1, 1);
      if (s.outputs[0]->str() != "u64[3]")
        throw Error("context writes u64[3]");
      return std::make_unique<ContextKernel>();
    });
    // p' = p - g, in place (an optimizer update).
    r.add("toy_update", [](const KernelSpec &s) -> std::unique_ptr<Kernel> {
      expectArity(s, 2, 1);
      checkSameSize(s);
      return std::make_unique<ScaleSubKernel>(s.outputs[0]->numel());
    });
    r.add("fail", [](const KernelSpec &) -> std::unique_ptr<Kernel> {
      return std::make_unique<FailKernel>();
    });
    return r;
  }();
  return r;
}

json value(const char *dtype, std::vector<int64_t> shape, const char *kind) {
  return {{"dtype", dtype}, {"shape", shape}, {"kind", kind}};
}

json header(json values, std::vector<int64_t> inputs, std::vector<int64_t> outputs,
            json steps, int64_t arenaBytes) {
  json h = {{"format", "kiln-plan"}, {"version", 1},      {"alignment", 64},
            {"arena_bytes", arenaBytes}, {"values", values}, {"inputs", inputs},
            {"outputs", outputs},      {"steps", steps}};
  return h;
}

json step(const char *kernel, std::vector<int64_t> in, std::vector<int64_t> out,
          json attrs = json::object()) {
  return {{"kernel", kernel}, {"inputs", in}, {"outputs", out},
          {"attrs", attrs},   {"loc", std::string("/") + kernel}};
}

std::unique_ptr<Program> load(const json &h, const std::string &blob = "") {
  std::string bytes = writePlanContainer(h.dump(), blob), err;
  auto p = Program::load(bytes.data(), bytes.size(), err, &testRegistry());
  EXPECT_TRUE(p) << err;
  return p;
}

HostTensor f32(std::vector<int64_t> shape, std::vector<float> vals) {
  TensorDesc d{DType::F32, shape};
  HostTensor t(d);
  EXPECT_EQ((size_t)t.numel(), vals.size());
  std::memcpy(t.data(), vals.data(), vals.size() * 4);
  return t;
}

std::vector<float> values(const HostTensor &t) {
  return std::vector<float>(t.as<float>(), t.as<float>() + t.numel());
}

std::string blobOf(std::vector<std::vector<float>> parts) {
  std::string blob;
  for (auto &p : parts) {
    while (blob.size() % 64)
      blob.push_back('\0');
    blob.append(reinterpret_cast<const char *>(p.data()), p.size() * 4);
  }
  return blob;
}

/// x + w + c, through the arena and a view; w is a parameter.
json basicPlan() {
  json vals = json::array();
  vals.push_back(value("f32", {2, 3}, "input"));
  vals[0]["index"] = 0;
  vals[0]["name"] = "x";
  vals.push_back(value("f32", {2, 3}, "param"));
  vals[1]["name"] = "w";
  vals[1]["data_offset"] = 0;
  vals[1]["data_bytes"] = 24;
  vals.push_back(value("f32", {2, 3}, "constant"));
  vals[2]["data_offset"] = 64;
  vals[2]["data_bytes"] = 24;
  vals.push_back(value("f32", {2, 3}, "arena"));
  vals[3]["offset"] = 0;
  vals.push_back(value("f32", {2, 3}, "arena"));
  vals[4]["offset"] = 64;
  vals.push_back(value("f32", {6}, "view"));
  vals[5]["source"] = 4;
  json h = header(vals, {0}, {5, 3},
                  {step("add", {0, 1}, {3}), step("add", {3, 2}, {4})}, 128);
  h["output_names"] = {"y", "t"};
  return h;
}

std::string basicBlob() {
  return blobOf({{1, 2, 3, 4, 5, 6}, {100, 200, 300, 400, 500, 600}});
}

} // namespace

TEST(Executor, EndToEnd) {
  auto p = load(basicPlan(), basicBlob());
  ASSERT_TRUE(p);
  HostTensor x = f32({2, 3}, {10, 20, 30, 40, 50, 60});
  std::vector<HostTensor> out;
  std::string err;
  ASSERT_TRUE(p->run({&x}, out, err)) << err;
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].desc().str(), "f32[6]");
  EXPECT_EQ(values(out[0]), (std::vector<float>{111, 222, 333, 444, 555, 666}));
  EXPECT_EQ(out[1].desc().str(), "f32[2,3]");
  EXPECT_EQ(values(out[1]), (std::vector<float>{11, 22, 33, 44, 55, 66}));
  // Outputs are fresh: a second run does not change the first's tensors.
  HostTensor x2 = f32({2, 3}, {0, 0, 0, 0, 0, 0});
  std::vector<HostTensor> out2;
  ASSERT_TRUE(p->run({&x2}, out2, err)) << err;
  EXPECT_EQ(values(out[1]), (std::vector<float>{11, 22, 33, 44, 55, 66}));
  EXPECT_EQ(values(out2[1]), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_NE(out[0].data(), out2[0].data());
}

TEST(Executor, ParamsPersistAndCanBeSet) {
  // w = w + x every run; outputs w, through a view of it.
  json vals = json::array();
  vals.push_back(value("f32", {3}, "input"));
  vals[0]["index"] = 0;
  vals[0]["name"] = "x";
  vals.push_back(value("f32", {3}, "param"));
  vals[1]["name"] = "w";
  vals[1]["data_offset"] = 0;
  vals[1]["data_bytes"] = 12;
  vals.push_back(value("f32", {1, 3}, "view"));
  vals[2]["source"] = 1;
  vals.push_back(value("f32", {}, "param"));
  vals[3]["name"] = "s";
  vals[3]["data_offset"] = 64;
  vals[3]["data_bytes"] = 4;
  auto p = load(header(vals, {0}, {2}, {step("add", {1, 0}, {2})}, 0),
                blobOf({{1, 2, 3}, {9}}));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->paramNames(), (std::vector<std::string>{"w", "s"}));
  TensorDesc d;
  ASSERT_TRUE(p->getParamDesc("s", d));
  EXPECT_EQ(d.str(), "f32[]");
  EXPECT_FALSE(p->getParamDesc("nope", d));

  HostTensor x = f32({3}, {1, 1, 1});
  std::vector<HostTensor> out;
  std::string err;
  for (int r = 0; r < 3; ++r)
    ASSERT_TRUE(p->run({&x}, out, err)) << err;
  EXPECT_EQ(out[0].desc().str(), "f32[1,3]");
  EXPECT_EQ(values(out[0]), (std::vector<float>{4, 5, 6}));
  HostTensor w;
  ASSERT_TRUE(p->getParam("w", w, err)) << err;
  EXPECT_EQ(values(w), (std::vector<float>{4, 5, 6}));
  // getParam copies: changing the copy does not change the program.
  w.as<float>()[0] = -1;
  HostTensor w2;
  ASSERT_TRUE(p->getParam("w", w2, err));
  EXPECT_EQ(values(w2), (std::vector<float>{4, 5, 6}));

  HostTensor fresh = f32({3}, {0, 10, 20});
  ASSERT_TRUE(p->setParam("w", fresh, err)) << err;
  ASSERT_TRUE(p->run({&x}, out, err)) << err;
  EXPECT_EQ(values(out[0]), (std::vector<float>{1, 11, 21}));

  EXPECT_FALSE(p->setParam("w", f32({1, 3}, {0, 0, 0}), err));
  EXPECT_EQ(err, "parameter 'w' has type f32[3], the value has type f32[1,3]");
  EXPECT_FALSE(p->setParam("nope", fresh, err));
  EXPECT_EQ(err, "the model has no parameter 'nope'");
  EXPECT_FALSE(p->getParam("nope", w, err));
  EXPECT_EQ(err, "the model has no parameter 'nope'");
  HostTensor s;
  ASSERT_TRUE(p->getParam("s", s, err));
  EXPECT_EQ(values(s), std::vector<float>{9});
}

TEST(Executor, SplitParamsLoadTheirRanksBlock) {
  // w: f32[2] split into 3 blocks (ZeRO-3): the blob holds all three; the
  // program starts from block 0 and setBatchShard picks the rank's.
  json vals = json::array();
  vals.push_back(value("f32", {2}, "input"));
  vals[0]["index"] = 0;
  vals[0]["name"] = "x";
  vals.push_back(value("f32", {2}, "param"));
  vals[1]["name"] = "w";
  vals[1]["data_offset"] = 0;
  vals[1]["data_bytes"] = 24;
  vals[1]["blocks"] = 3;
  vals.push_back(value("f32", {2}, "arena"));
  vals[2]["offset"] = 0;
  auto p = load(header(vals, {0}, {2}, {step("add", {1, 0}, {2})}, 64),
                blobOf({{1, 2, 3, 4, 5, 6}}));
  ASSERT_TRUE(p);
  std::string err;
  HostTensor w;
  ASSERT_TRUE(p->getParam("w", w, err)) << err;
  EXPECT_EQ(values(w), (std::vector<float>{1, 2}));
  p->setBatchShard(2, 3);
  ASSERT_TRUE(p->getParam("w", w, err)) << err;
  EXPECT_EQ(values(w), (std::vector<float>{5, 6}));
  HostTensor x = f32({2}, {10, 20});
  std::vector<HostTensor> out;
  ASSERT_TRUE(p->run({&x}, out, err)) << err;
  EXPECT_EQ(values(out[0]), (std::vector<float>{15, 26}));
  try {
    p->setBatchShard(1, 2);
    ADD_FAILURE() << "a mesh of 2 ranks was accepted for 3 blocks";
  } catch (const std::exception &e) {
    EXPECT_STREQ(e.what(),
                 "parameter 'w' is split into 3 blocks, but this is rank 1 of 2");
  }
}

TEST(Executor, InputChecks) {
  auto p = load(basicPlan(), basicBlob());
  ASSERT_TRUE(p);
  HostTensor good = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  HostTensor wrongShape = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  HostTensor wrongType(TensorDesc{DType::F64, {2, 3}});
  EXPECT_EQ(p->checkInputs({&good}), "");
  EXPECT_EQ(p->checkInputs({}), "expected 1 input, got 0");
  EXPECT_EQ(p->checkInputs({&good, &good}), "expected 1 input, got 2");
  EXPECT_EQ(p->checkInputs({&wrongShape}),
            "input 'x' has type f32[3,2], the model expects f32[2,3]");
  EXPECT_EQ(p->checkInputs({&wrongType}),
            "input 'x' has type f64[2,3], the model expects f32[2,3]");
  EXPECT_EQ(p->checkInputs({nullptr}), "input 'x' is missing");
  std::vector<HostTensor> out;
  std::string err;
  EXPECT_FALSE(p->run({&wrongShape}, out, err));
  EXPECT_EQ(err, "input 'x' has type f32[3,2], the model expects f32[2,3]");
  EXPECT_FALSE(p->run({}, out, err));
  EXPECT_EQ(err, "expected 1 input, got 0");

  // A default HostTensor is an f32 scalar without storage.
  json vals = json::array();
  vals.push_back(value("f32", {}, "input"));
  vals[0]["index"] = 0;
  vals[0]["name"] = "s";
  auto q = load(header(vals, {0}, {0}, json::array(), 0));
  ASSERT_TRUE(q);
  HostTensor empty;
  EXPECT_EQ(q->checkInputs({&empty}), "input 's' has no data");
  HostTensor two = f32({2}, {1, 2});
  EXPECT_EQ(q->checkInputs({&two}),
            "input 's' has type f32[2], the model expects f32[]");
}

TEST(Executor, MultipleInputsAndUnnamed) {
  json vals = json::array();
  vals.push_back(value("f32", {2}, "input"));
  vals[0]["index"] = 1;
  vals[0]["name"] = "b";
  vals.push_back(value("f32", {2}, "input"));
  vals[1]["index"] = 0;
  vals.push_back(value("f32", {2}, "arena"));
  vals[2]["offset"] = 0;
  auto p = load(header(vals, {1, 0}, {2}, {step("add", {0, 1}, {2})}, 64));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->inputNames(), (std::vector<std::string>{"input_0", "b"}));
  HostTensor a = f32({2}, {1, 2}), b = f32({2}, {10, 20});
  std::vector<HostTensor> out;
  std::string err;
  ASSERT_TRUE(p->run({&a, &b}, out, err)) << err;
  EXPECT_EQ(values(out[0]), (std::vector<float>{11, 22}));
  EXPECT_EQ(p->checkInputs({&a}), "expected 2 inputs, got 1");
}

TEST(Executor, InputsAreNotCopiedAndViewsFollowThem) {
  // context(view(x)) records the address it was given.
  json vals = json::array();
  vals.push_back(value("f32", {2, 2}, "input"));
  vals[0]["index"] = 0;
  vals[0]["name"] = "x";
  vals.push_back(value("f32", {4}, "view"));
  vals[1]["source"] = 0;
  vals.push_back(value("u64", {3}, "arena"));
  vals[2]["offset"] = 0;
  auto p = load(header(vals, {0}, {2, 1, 0}, {step("context", {1}, {2})}, 64));
  ASSERT_TRUE(p);
  HostTensor x = f32({2, 2}, {1, 2, 3, 4}), y = f32({2, 2}, {5, 6, 7, 8});
  std::vector<HostTensor> out;
  std::string err;
  p->setSeed(1234);
  p->setStep(7);
  EXPECT_EQ(p->seed(), 1234u);
  EXPECT_EQ(p->step(), 7u);
  ASSERT_TRUE(p->run({&x}, out, err)) << err;
  EXPECT_EQ(out[0].as<uint64_t>()[0], 1234u);
  EXPECT_EQ(out[0].as<uint64_t>()[1], 7u);
  EXPECT_EQ(out[0].as<uint64_t>()[2], (uint64_t)(uintptr_t)x.data());
  // Outputs that are an input, or a view of one, are copies of its data.
  EXPECT_EQ(out[1].desc().str(), "f32[4]");
  EXPECT_EQ(values(out[1]), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(values(out[2]), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_NE(out[2].data(), x.data());
  ASSERT_TRUE(p->run({&y}, out, err)) << err;
  EXPECT_EQ(out[0].as<uint64_t>()[2], (uint64_t)(uintptr_t)y.data());
  EXPECT_EQ(values(out[1]), (std::vector<float>{5, 6, 7, 8}));
}

TEST(Executor, AbsentOptionalInputAndAttrs) {
  json vals = json::array();
  vals.push_back(value("f32", {3}, "input"));
  vals[0]["index"] = 0;
  vals.push_back(value("f32", {3}, "arena"));
  vals[1]["offset"] = 0;
  vals.push_back(value("f32", {3}, "arena"));
  vals[2]["offset"] = 64;
  auto p = load(header(vals, {0}, {1, 2},
                       {step("add", {0, -1}, {1}),
                        step("scale", {1}, {1}, {{"factor", 2.5}}),
                        step("scale", {1}, {2})},
                       128));
  ASSERT_TRUE(p);
  HostTensor x = f32({3}, {1, 2, 4});
  std::vector<HostTensor> out;
  std::string err;
  ASSERT_TRUE(p->run({&x}, out, err)) << err;
  EXPECT_EQ(values(out[0]), (std::vector<float>{2.5, 5, 10}));
  EXPECT_EQ(values(out[1]), (std::vector<float>{2.5, 5, 10}));
}

TEST(Executor, RunErrorsNameTheStep) {
  json vals = json::array();
  vals.push_back(value("f32", {3}, "input"));
  vals[0]["index"] = 0;
  vals.push_back(value("f32", {3}, "arena"));
  vals[1]["offset"] = 0;
  auto p = load(header(vals, {0}, {1},
                       {step("add", {0, 0}, {1}), step("fail", {1}, {1})}, 64));
  ASSERT_TRUE(p);
  HostTensor x = f32({3}, {1, 2, 4});
  std::vector<HostTensor> out;
  std::string err;
  EXPECT_FALSE(p->run({&x}, out, err));
  EXPECT_EQ(err, "step 1 ('fail' at /fail): boom");
  // The program stays usable.
  EXPECT_FALSE(p->run({&x}, out, err));
  EXPECT_EQ(err, "step 1 ('fail' at /fail): boom");
}

TEST(Executor, ZeroSizedAndNoSteps) {
  json vals = json::array();
  vals.push_back(value("f32", {0, 3}, "input"));
  vals[0]["index"] = 0;
  vals.push_back(value("f32", {0, 3}, "arena"));
  vals[1]["offset"] = 0;
  vals.push_back(value("i64", {0}, "constant"));
  vals[2]["data_offset"] = 0;
  vals[2]["data_bytes"] = 0;
  auto p = load(header(vals, {0}, {1, 2, 0}, {step("add", {0, 0}, {1})}, 0));
  ASSERT_TRUE(p);
  HostTensor x(TensorDesc{DType::F32, {0, 3}});
  std::vector<HostTensor> out;
  std::string err;
  ASSERT_TRUE(p->run({&x}, out, err)) << err;
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].desc().str(), "f32[0,3]");
  EXPECT_EQ(out[1].desc().str(), "i64[0]");

  auto q = load(header(json::array(), {}, {}, json::array(), 0));
  ASSERT_TRUE(q);
  ASSERT_TRUE(q->run({}, out, err)) << err;
  EXPECT_TRUE(out.empty());
}

TEST(Executor, ConstantsAndArenaAreAligned) {
  auto p = load(basicPlan(), basicBlob());
  ASSERT_TRUE(p);
  json vals = json::array();
  vals.push_back(value("u64", {3}, "arena"));
  vals[0]["offset"] = 0;
  vals.push_back(value("f32", {3}, "constant"));
  vals[1]["data_offset"] = 0;
  vals[1]["data_bytes"] = 12;
  auto q = load(header(vals, {}, {0}, {step("context", {1}, {0})}, 64),
                blobOf({{1, 2, 3}}));
  ASSERT_TRUE(q);
  std::vector<HostTensor> out;
  std::string err;
  ASSERT_TRUE(q->run({}, out, err)) << err;
  EXPECT_EQ(out[0].as<uint64_t>()[2] % 64, 0u);
}

// captureGradients: the next run (only) copies what each update step reads
// as its gradient, keyed by the parameter, before the update runs.
TEST(Executor, CapturesTheGradientsOfUpdates) {
  json vals = json::array();
  vals.push_back(value("f32", {3}, "input"));
  vals[0]["index"] = 0;
  vals[0]["name"] = "x";
  vals.push_back(value("f32", {3}, "param"));
  vals[1]["name"] = "w";
  vals[1]["data_offset"] = 0;
  vals[1]["data_bytes"] = 12;
  vals.push_back(value("f32", {3}, "arena"));
  vals[2]["offset"] = 0;
  // g = 2x (into the arena); w = w - g; then the arena slot is reused.
  json h = header(vals, {0}, {1},
                  {step("scale", {0}, {2}, {{"factor", 2.0}}),
                   step("toy_update", {1, 2}, {1}),
                   step("scale", {0}, {2}, {{"factor", 7.0}})},
                  64);
  auto p = load(h, blobOf({{10, 20, 30}}));
  ASSERT_TRUE(p);
  HostTensor x = f32({3}, {1, 2, 3});
  std::vector<HostTensor> out;
  std::string err;
  std::map<std::string, HostTensor> grads;
  p->captureGradients(&grads);
  ASSERT_TRUE(p->run({&x}, out, err)) << err;
  ASSERT_EQ(grads.size(), 1u);
  EXPECT_EQ(values(grads["w"]), (std::vector<float>{2, 4, 6}));
  EXPECT_EQ(values(out[0]), (std::vector<float>{8, 16, 24}));
  grads.clear();
  ASSERT_TRUE(p->run({&x}, out, err)) << err; // not captured again
  EXPECT_TRUE(grads.empty());
  EXPECT_EQ(values(out[0]), (std::vector<float>{6, 12, 18}));
}

// A step's `flops` (the op's cost) gives the table's GFLOP/s; one without
// gives none.
TEST(Executor, ProfileReportGivesFlops) {
  json h = basicPlan();
  h["steps"][0]["flops"] = 6;
  ::setenv("KILN_PROFILE", "1", 1);
  auto p = load(h, basicBlob());
  ::unsetenv("KILN_PROFILE");
  ASSERT_TRUE(p);
  HostTensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  std::vector<HostTensor> out;
  std::string err;
  ASSERT_TRUE(p->run({&x}, out, err)) << err;
  ::testing::internal::CaptureStderr();
  p.reset();
  std::string report = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(report.find("GFLOP/s"), std::string::npos) << report;
  EXPECT_NE(report.find("GB/s"), std::string::npos) << report;
  // A negative count is refused when the plan loads.
  h["steps"][0]["flops"] = -1;
  std::string bytes = writePlanContainer(h.dump(), basicBlob());
  EXPECT_FALSE(Program::load(bytes.data(), bytes.size(), err, &testRegistry()));
  EXPECT_NE(err.find("'flops' must be an integer >= 0"), std::string::npos) << err;
}

TEST(Executor, ProfileReport) {
  ::setenv("KILN_PROFILE", "1", 1);
  auto p = load(basicPlan(), basicBlob());
  ::unsetenv("KILN_PROFILE");
  ASSERT_TRUE(p);
  HostTensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  std::vector<HostTensor> out;
  std::string err;
  ASSERT_TRUE(p->run({&x}, out, err)) << err;
  ASSERT_TRUE(p->run({&x}, out, err)) << err;
  ::testing::internal::CaptureStderr();
  p.reset();
  std::string report = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(report.find("kiln profile: 2 runs"), std::string::npos) << report;
  EXPECT_NE(report.find("add"), std::string::npos) << report;
  EXPECT_NE(report.find("4 calls"), std::string::npos) << report;
}

// A plan the compiler wrote (test/data/export.plan, see make_fixtures.py)
// loads; its kernels here are stand-ins that check only the operand types.
TEST(Executor, LoadsACompilerPlan) {
  KernelRegistry r;
  std::vector<std::string> seen;
  auto standIn = [&seen](const KernelSpec &s) -> std::unique_ptr<Kernel> {
    seen.push_back(s.kernel + " " + s.inputs[0]->str() + " -> " +
                   s.outputs[0]->str() + " @" + s.loc);
    return std::make_unique<FailKernel>();
  };
  r.add("add", standIn);
  r.add("leaky_relu", standIn);
  std::string err;
  auto p = Program::loadFile(std::string(KILN_RT_TEST_DATA) + "/export.plan",
                             err, &r);
  ASSERT_TRUE(p) << err;
  EXPECT_EQ(p->inputNames(), std::vector<std::string>{"x"});
  EXPECT_EQ(p->inputDescs()[0].str(), "f32[2,3]");
  EXPECT_EQ(p->outputNames(), (std::vector<std::string>{"y", "z"}));
  EXPECT_EQ(p->outputDescs()[1].str(), "f32[6]");
  EXPECT_EQ(p->arenaBytes(), 128u);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], "add f32[2,3] -> f32[2,3] @add_node");
  EXPECT_EQ(seen[1].rfind("leaky_relu f32[6] -> f32[6] @", 0), 0u) << seen[1];
}
