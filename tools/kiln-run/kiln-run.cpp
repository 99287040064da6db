//===- kiln-run.cpp - run an ONNX model forward through Kiln ----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
//   kiln-run MODEL.onnx [--input FILE | --input NAME=FILE]... [--output-dir DIR]
//            [--target cpu] [--dim NAME=N] [--batch-size N]
//            [--emit-plan FILE] [--repeat N] [--bind NAME=FILE.pb]
//   kiln-run --onnx-test DIR [DIR...]
//
// --bind fixes graph input NAME to the TensorProto in FILE.pb at compile time
// (an integer or boolean tensor, or a floating scalar: a shape, axes, a
// Trilu's k). The input is then not given with --input.
//
// Compiles the model (import, convert, lower, assign buffers, plan) in memory
// and executes the plan with the CPU runtime. --onnx-test runs ONNX backend
// test folders through lib/Tools/ONNXTest/ONNXTestRunner.cpp.
//===----------------------------------------------------------------------===//
#include "kiln/Support/InputFile.h"
#include "kiln/Tools/CommandLine.h"
#include "kiln/Tools/ONNXTestRunner.h"
#include "kiln/runtime/FileIO.h"
#include "kiln/runtime/Runtime.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <limits>

using namespace kiln;
namespace cl = llvm::cl;
namespace rt = kiln::rt;
using tool::fail;

namespace {

//===----------------------------------------------------------------------===//
// Flags (CONTRACT.md's kiln-run)
//===----------------------------------------------------------------------===//

cl::OptionCategory kilnCategory("kiln-run options");

cl::list<std::string> positional(cl::Positional,
                                 cl::desc("<MODEL.onnx | --onnx-test DIR...>"),
                                 cl::cat(kilnCategory));
cl::list<std::string>
    inputs("input",
           cl::desc("a graph input: FILE (.npy or TensorProto .pb) in graph-"
                    "input order, or NAME=FILE"),
           cl::value_desc("[NAME=]FILE"), cl::cat(kilnCategory));
cl::opt<std::string> outputDir("output-dir",
                               cl::desc("where output_<k>.npy are written"),
                               cl::value_desc("DIR"), cl::init("."),
                               cl::cat(kilnCategory));
// Only what this build can run is advertised; --target cuda is refused with
// its own message below.
cl::opt<std::string> target("target",
                            cl::desc("where the model runs: cpu (cuda: not "
                                     "built)"),
                            cl::value_desc("cpu"), cl::init("cpu"),
                            cl::cat(kilnCategory));
cl::opt<std::string> emitPlan("emit-plan",
                              cl::desc("also write the compiled plan to FILE"),
                              cl::value_desc("FILE"), cl::cat(kilnCategory));
cl::opt<long long, false, tool::IntParser>
    repeat("repeat",
           cl::desc("run N more times and print the mean forward time"),
           cl::value_desc("N"), cl::init(0),
           tool::IntRange{0, std::numeric_limits<int>::max()},
           cl::cat(kilnCategory));
cl::opt<long long, false, tool::IntParser> batchSize(
    "batch-size",
    cl::desc("size of every graph input's symbolic or unknown dimension 0"),
    cl::value_desc("N"), cl::init(0),
    tool::IntRange{1, tool::kMaxDimFlag,
                   "a larger batch could overflow int64 tensor sizes"},
    cl::cat(kilnCategory));
cl::list<std::string> dims("dim", cl::desc("value of a symbolic dimension"),
                           cl::value_desc("NAME=N"), cl::cat(kilnCategory));
cl::list<std::string>
    binds("bind",
          cl::desc("fix graph input NAME to the TensorProto in FILE.pb at "
                   "compile time"),
          cl::value_desc("NAME=FILE.pb"), cl::cat(kilnCategory));
cl::opt<bool> onnxTest("onnx-test",
                       cl::desc("run ONNX backend test folders (model.onnx + "
                                "test_data_set_*): PASS/FAIL per folder"),
                       cl::cat(kilnCategory));

struct Options {
  std::string model;
  std::vector<std::string> inputs; // FILE or NAME=FILE
  std::string outputDir, emitPlan;
  int repeat = 0;
  ImportOptions import;
  std::vector<std::string> testDirs;
  bool onnxTest = false;
};

/// Parses the command line into Options; every error exits with one line.
Options parseArgs(int argc, char **argv) {
  tool::parseCommandLine(argc, argv, "kiln-run", kilnCategory,
                         "Kiln: compile an ONNX model and run it forward\n");
  if (target == "cuda")
    fail("--target cuda: this build has no CUDA runtime (cpu only)");
  if (target != "cpu")
    fail("--target must be cpu or cuda, got '" + target + "'");
  Options o;
  o.inputs.assign(inputs.begin(), inputs.end());
  o.outputDir = outputDir;
  o.emitPlan = emitPlan;
  o.repeat = static_cast<int>(repeat);
  if (batchSize.getNumOccurrences())
    o.import.batchSize = batchSize;
  for (const std::string &d : dims) {
    auto [name, value] = tool::splitNameValue("--dim", d, "NAME=N");
    o.import.dimValues[name] =
        tool::parseInt("--dim", value, 0, tool::kMaxDimFlag);
  }
  for (const std::string &d : binds) {
    auto [name, file] = tool::splitNameValue("--bind", d, "NAME=FILE.pb");
    std::string bytes, err;
    if (!readRegularFile(file, bytes, err))
      fail("--bind " + name + ": cannot read " + err);
    o.import.boundInputs[name] = std::move(bytes);
  }
  if (onnxTest) {
    o.onnxTest = true;
    o.testDirs.assign(positional.begin(), positional.end());
    if (o.testDirs.empty())
      fail("--onnx-test needs at least one test folder");
    return o;
  }
  if (positional.empty())
    fail("no model given (usage: kiln-run MODEL.onnx [--input FILE]...)");
  if (positional.size() > 1)
    fail("unexpected argument '" + positional[1] + "' (one model per run)");
  o.model = positional[0];
  return o;
}

//===----------------------------------------------------------------------===//
// Running a model
//===----------------------------------------------------------------------===//

/// Refuses a --bind for a name the model does not take as an input (the
/// importer would refuse it too, but not in terms of the flag).
void checkBinds(const Options &o) {
  if (o.import.boundInputs.empty())
    return;
  std::vector<std::string> names;
  std::string err;
  if (!onnxGraphInputNames(o.model, names, err))
    return; // compiling reports what is wrong with the model
  for (const auto &b : o.import.boundInputs)
    if (!llvm::is_contained(names, b.first))
      fail("--bind " + b.first + "=...: the model has no input '" + b.first +
           "' (inputs: " + (names.empty() ? "none" : llvm::join(names, ", ")) +
           ")");
}

int runModel(const Options &o) {
  if (!llvm::sys::fs::exists(o.model))
    fail(o.model + ": no such file");
  std::string err, plan;
  // Every file is checked before it is opened for good: a FIFO would block.
  if (!checkRegularFile(o.model, err))
    fail(err);
  checkBinds(o);
  if (!o.emitPlan.empty() &&
      !rt::checkOutputPath("--emit-plan", o.emitPlan,
                           {{o.model, "the model"}}, err))
    fail(err);
  auto prog = compileToProgram(o.model, o.import, err, nullptr, &plan);
  if (!prog)
    fail(err);
  if (!o.emitPlan.empty() && !rt::writeFileAtomic(o.emitPlan, {plan}, err))
    fail(err);

  const auto &names = prog->inputNames();
  size_t n = names.size();
  std::vector<rt::HostTensor> tensors(n);
  std::vector<bool> given(n, false);
  size_t positional = 0;
  for (const std::string &spec : o.inputs) {
    size_t eq = spec.find('=');
    std::string file = spec;
    size_t slot;
    if (eq != std::string::npos && !llvm::sys::fs::exists(spec)) {
      std::string name = spec.substr(0, eq);
      file = spec.substr(eq + 1);
      auto it = llvm::find(names, name);
      if (it == names.end())
        fail("--input " + name + "=...: the model has no input '" + name +
            "' (inputs: " + llvm::join(names, ", ") + ")");
      slot = it - names.begin();
    } else {
      while (positional < n && given[positional])
        ++positional;
      if (positional >= n)
        fail("--input " + spec + ": the model takes " + std::to_string(n) +
            " input" + (n == 1 ? "" : "s") + ", this is one too many");
      slot = positional;
    }
    if (given[slot])
      fail("input '" + names[slot] + "' is given twice");
    if (!checkRegularFile(file, err) ||
        !rt::readTensorFile(file, tensors[slot], err))
      fail(err);
    given[slot] = true;
  }
  for (size_t k = 0; k < n; ++k)
    if (!given[k])
      fail("missing --input for '" + names[k] + "' (" +
          prog->inputDescs()[k].str() + ")");
  std::vector<const rt::HostTensor *> in;
  for (auto &t : tensors)
    in.push_back(&t);
  std::string bad = prog->checkInputs(in);
  if (!bad.empty())
    fail(bad);

  std::vector<rt::HostTensor> out;
  if (!prog->run(in, out, err))
    fail(err);
  if (o.repeat > 0) {
    auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < o.repeat; ++r)
      if (!prog->run(in, out, err))
        fail(err);
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - t0)
                    .count() /
                o.repeat;
    llvm::outs() << llvm::format("forward: %.3f ms (mean of %d runs)\n", ms,
                                 o.repeat);
  }
  if (std::error_code ec = llvm::sys::fs::create_directories(o.outputDir))
    fail(o.outputDir + ": " + ec.message());
  for (size_t k = 0; k < out.size(); ++k) {
    llvm::SmallString<256> path(o.outputDir);
    llvm::sys::path::append(path, "output_" + std::to_string(k) + ".npy");
    if (!rt::writeNpy(std::string(path), out[k], err))
      fail(err);
    llvm::outs() << "output " << k << " '" << prog->outputNames()[k]
                 << "': " << out[k].desc().str() << " -> " << path << "\n";
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  Options o = parseArgs(argc, argv);
  return o.onnxTest ? runONNXTests(o.testDirs, llvm::outs()) : runModel(o);
}
