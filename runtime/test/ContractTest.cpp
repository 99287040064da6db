//===- ContractTest.cpp - the kernel manifest against targets -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The compiler-runtime contract (KernelManifest.h): every kernel a plan may
// name has a kernel on each target that claims it, every registered kernel is
// declared (or runtime-only), and the checks that keep kernels and plans to
// the declarations refuse what they should.
//===----------------------------------------------------------------------===//
#include "kiln/runtime/Kernel.h"
#include "kiln/runtime/KernelManifest.h"
#include "kiln/runtime/PlanFile.h"
#include "kiln/runtime/Runtime.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

using namespace kiln::rt;
namespace manifest = kiln::manifest;
using nlohmann::json;

namespace {

/// The targets and the kernels each claims. Today only the CPU, which claims
/// every launched manifest kernel; a target that claims fewer (a CUDA target
/// that falls back for some) lists the kernels it does not claim.
struct Target {
  const char *name;
  const KernelRegistry &registry;
  std::set<std::string> notClaimed;
};

std::vector<Target> targets() { return {{"cpu", KernelRegistry::cpu(), {}}}; }

} // namespace

TEST(Contract, ManifestIsSortedAndUnique) {
  ASSERT_GT(manifest::numKernels(), 0u);
  for (const manifest::Kernel *k = manifest::begin() + 1; k != manifest::end();
       ++k)
    EXPECT_LT(std::string(k[-1].name), std::string(k->name));
  for (const manifest::Kernel *k = manifest::begin(); k != manifest::end(); ++k)
    EXPECT_EQ(manifest::find(k->name), k) << k->name;
  EXPECT_EQ(manifest::find("no_such_kernel"), nullptr);
}

TEST(Contract, ManifestDescribesOps) {
  const manifest::Kernel *matmul = manifest::find("matmul");
  ASSERT_NE(matmul, nullptr);
  EXPECT_STREQ(matmul->op, "kiln.matmul");
  EXPECT_TRUE(matmul->launched);
  EXPECT_TRUE(matmul->acceptsOperands(2));
  EXPECT_FALSE(matmul->acceptsOperands(3));
  EXPECT_TRUE(matmul->acceptsResults(1));
  // Optional and variadic operands.
  const manifest::Kernel *sce = manifest::find("softmax_cross_entropy");
  ASSERT_NE(sce, nullptr);
  EXPECT_TRUE(sce->acceptsOperands(2));
  EXPECT_TRUE(sce->acceptsOperands(3));
  EXPECT_FALSE(sce->acceptsOperands(4));
  const manifest::Kernel *concat = manifest::find("concat");
  ASSERT_NE(concat, nullptr);
  EXPECT_TRUE(concat->acceptsOperands(1));
  EXPECT_TRUE(concat->acceptsOperands(7));
  ASSERT_NE(concat->attr("axis"), nullptr);
  EXPECT_EQ(concat->attr("axis")->type, manifest::AttrType::Int);
  EXPECT_EQ(concat->attr("axes"), nullptr);
  // What the lowering emits itself, and what it never launches.
  const manifest::Kernel *copy = manifest::find("copy");
  ASSERT_NE(copy, nullptr);
  EXPECT_STREQ(copy->op, "");
  EXPECT_TRUE(copy->launched);
  ASSERT_NE(manifest::find("constant"), nullptr);
  EXPECT_FALSE(manifest::find("constant")->launched);
  EXPECT_FALSE(manifest::find("reshape")->launched);
}

// Every kernel a plan may name has a kernel on each target that claims it.
TEST(Contract, EveryLaunchedKernelHasAKernelOnEachTarget) {
  for (const Target &t : targets())
    for (const manifest::Kernel *k = manifest::begin(); k != manifest::end();
         ++k)
      if (k->launched && !t.notClaimed.count(k->name))
        EXPECT_NE(t.registry.find(k->name), nullptr)
            << "target " << t.name << " has no kernel '" << k->name
            << "' (" << (*k->op ? k->op : "a runtime kernel") << ")";
}

// Every registered kernel is declared, or runtime-only on purpose.
TEST(Contract, EveryRegisteredKernelIsDeclared) {
  const std::vector<std::string> &extra = runtimeOnlyKernels();
  for (const Target &t : targets()) {
    for (const std::string &name : t.registry.names())
      EXPECT_TRUE(manifest::find(name) ||
                  std::count(extra.begin(), extra.end(), name))
          << "target " << t.name << " registers '" << name
          << "', which the kernel manifest does not declare";
    EXPECT_NO_THROW(checkRegistryAgainstManifest(t.registry));
  }
  for (const std::string &name : extra)
    EXPECT_EQ(manifest::find(name), nullptr)
        << name << " is in the manifest; drop it from runtimeOnlyKernels()";
}

TEST(Contract, RegistryCheckNamesAnUndeclaredKernel) {
  KernelRegistry r;
  registerCpuKernels(r);
  r.add("frobnicate", [](const KernelSpec &) -> std::unique_ptr<Kernel> {
    return nullptr;
  });
  try {
    checkRegistryAgainstManifest(r);
    FAIL() << "an undeclared kernel passed";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("'frobnicate'"), std::string::npos)
        << e.what();
  }
}

// A manifest kernel's factory reads only declared attributes, as declared.
TEST(Contract, KernelsReadOnlyDeclaredAttributes) {
  KernelRegistry r;
  std::string seen;
  r.add("concat", [&seen](const KernelSpec &s) -> std::unique_ptr<Kernel> {
    seen = std::to_string(s.attrs.getInt("axis"));
    s.attrs.getInt("axes", 0);
    return nullptr;
  });
  r.add("transpose", [](const KernelSpec &s) -> std::unique_ptr<Kernel> {
    s.attrs.getFloat("perm", 0.0); // declared as an integer array
    return nullptr;
  });
  r.add("stand_in", [](const KernelSpec &s) -> std::unique_ptr<Kernel> {
    s.attrs.getInt("anything", 0); // not a manifest kernel: unchecked
    return nullptr;
  });
  json attrs = {{"axis", 1}};
  KernelSpec spec;
  spec.attrs = Attrs(&attrs);
  spec.kernel = "concat";
  try {
    (*r.find("concat"))(spec);
    FAIL() << "an undeclared read passed";
  } catch (const Error &e) {
    EXPECT_EQ(seen, "1");
    EXPECT_STREQ(e.what(), "kernel 'concat' reads attribute 'axes', which the "
                           "kernel manifest does not declare for it");
  }
  spec.kernel = "transpose";
  try {
    (*r.find("transpose"))(spec);
    FAIL() << "a mistyped read passed";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(), "kernel 'transpose' reads attribute 'perm' as "
                           "another type than an integer array, which the "
                           "kernel manifest declares");
  }
  spec.kernel = "stand_in";
  EXPECT_NO_THROW((*r.find("stand_in"))(spec));
  // Attrs built by hand are unchecked.
  EXPECT_EQ(Attrs(&attrs).getInt("whatever", 7), 7);
}

namespace {

/// A one-step plan: x f32[2,3] -> kernel -> y f32[2,3].
std::string loadOneStep(const std::string &kernel, const json &attrs) {
  json h = {{"format", "kiln-plan"},
            {"version", 1},
            {"alignment", 64},
            {"arena_bytes", 64},
            {"values",
             {{{"dtype", "f32"}, {"shape", {2, 3}}, {"kind", "input"}, {"index", 0}},
              {{"dtype", "f32"}, {"shape", {2, 3}}, {"kind", "arena"}, {"offset", 0}}}},
            {"inputs", {0}},
            {"outputs", {1}},
            {"steps",
             {{{"kernel", kernel},
               {"inputs", {0}},
               {"outputs", {1}},
               {"attrs", attrs},
               {"loc", "/Node_7"}}}}};
  std::string bytes = writePlanContainer(h.dump(), ""), err;
  auto p = Program::load(bytes.data(), bytes.size(), err);
  return p ? "" : err;
}

} // namespace

TEST(Contract, PlanLoadChecksAttributes) {
  EXPECT_EQ(loadOneStep("leaky_relu", {{"alpha", 0.5}}), "");
  EXPECT_EQ(loadOneStep("leaky_relu", {{"alpha", "-inf"}}), "");
  EXPECT_EQ(loadOneStep("leaky_relu", {{"alpha", 0.5}, {"beta", 1}}),
            "step 0 ('leaky_relu' at /Node_7): attribute 'beta' is not "
            "declared for kernel 'leaky_relu' by the kernel manifest");
  EXPECT_EQ(loadOneStep("leaky_relu", {{"alpha", "big"}}),
            "step 0 ('leaky_relu' at /Node_7): attribute 'alpha' is of JSON "
            "type string, the kernel manifest declares a float");
  EXPECT_EQ(loadOneStep("softmax", {{"axis", {1}}}),
            "step 0 ('softmax' at /Node_7): attribute 'axis' is of JSON type "
            "array, the kernel manifest declares an integer");
  EXPECT_EQ(loadOneStep("no_such_kernel", json::object()),
            "step 0 ('no_such_kernel' at /Node_7): no CPU kernel 'no_such_kernel'");
}
