//===- kiln-exec.cpp - run a plan file ---------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
//   kiln-exec PLAN [--input FILE]... [--output-dir DIR] [--repeat N]
//             [--param-sets LIST]
//
// Loads a plan (docs/PlanFormat.md), reads one tensor file (.npy or ONNX
// TensorProto .pb) per plan input, in order, runs the plan and writes
// DIR/output_<k>.npy. --repeat N runs it N more times and prints the mean
// time. --param-sets LIST runs it once per line of LIST, each line setting
// some parameters (tab-separated NAME=FILE) for that run only, and stacks
// each output over the runs: one process for many forward passes with moved
// parameters (kiln-gradcheck's finite differences). Any error: one line
// "kiln-exec: <message>" on stderr, exit 1.
//===----------------------------------------------------------------------===//
#include "kiln/runtime/InputFile.h"
#include "kiln/runtime/Runtime.h"
#include "kiln/runtime/ToolFlags.h"

#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <sys/stat.h>
#include <vector>

namespace rt = kiln::rt;

namespace {

[[noreturn]] void die(const std::string &msg) {
  std::fprintf(stderr, "kiln-exec: %s\n", msg.c_str());
  std::exit(1);
}

void usage(std::FILE *to) {
  std::fprintf(to, "usage: kiln-exec PLAN [--input FILE]... [--output-dir DIR] "
                   "[--repeat N] [--param-sets LIST]\n");
}

/// One line of --param-sets: the parameters it sets and their files.
using ParamSet = std::vector<std::pair<std::string, std::string>>;

/// Reads --param-sets LIST: one run per line, its entries NAME=FILE separated
/// by tabs (a file name may hold spaces); an empty line runs the plan's own
/// parameters.
std::vector<ParamSet> readParamSets(const std::string &path) {
  std::string text, err;
  if (!rt::readRegularFile(path, text, err))
    die(err);
  std::vector<ParamSet> sets;
  size_t pos = 0;
  for (int line = 1; pos < text.size(); ++line) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos)
      end = text.size();
    std::string row = text.substr(pos, end - pos);
    pos = end + 1;
    if (!row.empty() && row.back() == '\r')
      row.pop_back();
    ParamSet set;
    for (size_t at = 0; !row.empty() && at <= row.size();) {
      size_t tab = row.find('\t', at);
      if (tab == std::string::npos)
        tab = row.size();
      std::string entry = row.substr(at, tab - at);
      size_t eq = entry.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == entry.size())
        die(path + ":" + std::to_string(line) +
            ": expected NAME=FILE entries separated by tabs, got '" + entry +
            "'");
      set.emplace_back(entry.substr(0, eq), entry.substr(eq + 1));
      at = tab + 1;
    }
    sets.push_back(std::move(set));
  }
  if (sets.empty())
    die(path + ": no runs (one line per run)");
  return sets;
}

/// Runs `prog` once per parameter set, each from the plan's own values of
/// the parameters the sets name, and returns each output stacked over the
/// runs (a new first axis).
std::vector<rt::HostTensor>
runParamSets(rt::Program &prog, const std::string &path,
             const std::vector<const rt::HostTensor *> &in) {
  std::vector<ParamSet> sets = readParamSets(path);
  std::string err;
  std::map<std::string, rt::HostTensor> original;
  for (const ParamSet &set : sets)
    for (const auto &entry : set) {
      rt::TensorDesc desc;
      if (original.count(entry.first))
        continue;
      if (!prog.getParamDesc(entry.first, desc))
        die(path + ": the plan has no parameter '" + entry.first + "'");
      if (!prog.getParam(entry.first, original[entry.first], err))
        die(err);
    }
  std::vector<std::vector<rt::HostTensor>> runs(sets.size());
  for (size_t r = 0; r < sets.size(); ++r) {
    for (const auto &[name, file] : sets[r]) {
      rt::HostTensor t;
      if (!rt::readTensorFile(file, t, err))
        die(err);
      if (!prog.setParam(name, t, err))
        die(path + ":" + std::to_string(r + 1) + ": parameter '" + name +
            "': " + err);
    }
    if (!prog.run(in, runs[r], err))
      die(path + ":" + std::to_string(r + 1) + ": " + err);
    for (const auto &entry : sets[r])
      if (!prog.setParam(entry.first, original[entry.first], err))
        die(err);
  }
  std::vector<rt::HostTensor> stacked;
  for (size_t k = 0; k < runs[0].size(); ++k) {
    rt::TensorDesc desc = runs[0][k].desc();
    size_t each = desc.bytes();
    desc.shape.insert(desc.shape.begin(), (int64_t)runs.size());
    rt::HostTensor t(desc);
    for (size_t r = 0; r < runs.size(); ++r)
      if (each)
        std::memcpy(t.as<uint8_t>() + r * each, runs[r][k].data(), each);
    stacked.push_back(std::move(t));
  }
  return stacked;
}

/// mkdir -p.
void makeDirs(const std::string &dir) {
  std::string path;
  size_t pos = 0;
  while (pos <= dir.size()) {
    size_t next = dir.find('/', pos);
    if (next == std::string::npos)
      next = dir.size();
    path = dir.substr(0, next);
    pos = next + 1;
    if (path.empty())
      continue;
    if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)
      die(path + ": " + std::strerror(errno));
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    die(dir + ": not a directory");
}

} // namespace

int main(int argc, char **argv) {
  std::string plan, outDir = ".", paramSets;
  std::vector<std::string> inputs, positional;
  int64_t repeat = 0;
  rt::FlagParser flags;
  flags.list("--input", inputs)
      .text("--output-dir", outDir)
      .text("--param-sets", paramSets)
      .integer("--repeat", repeat, 0, std::numeric_limits<int64_t>::max());
  try {
    if (!flags.parse(argc, argv, positional)) {
      usage(stdout);
      return 0;
    }
  } catch (const rt::FlagError &e) {
    die(e.what());
  }
  if (positional.size() > 1)
    die("unexpected argument '" + positional[1] + "' (one plan per run)");
  if (positional.empty())
    die("no plan given (usage: kiln-exec PLAN [--input FILE]...)");
  plan = positional[0];

  std::string err;
  auto prog = rt::Program::loadFile(plan, err);
  if (!prog)
    die(err);
  const auto &names = prog->inputNames();
  if (inputs.size() < names.size())
    die("missing --input for '" + names[inputs.size()] + "' (" +
        prog->inputDescs()[inputs.size()].str() + ")");
  if (inputs.size() > names.size())
    die("the plan takes " + std::to_string(names.size()) + " input" +
        (names.size() == 1 ? "" : "s") + ", got " +
        std::to_string(inputs.size()));
  std::vector<rt::HostTensor> tensors(inputs.size());
  std::vector<const rt::HostTensor *> in;
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!rt::readTensorFile(inputs[k], tensors[k], err))
      die(err);
    in.push_back(&tensors[k]);
  }
  std::string bad = prog->checkInputs(in);
  if (!bad.empty())
    die(bad);

  if (!paramSets.empty() && repeat > 0)
    die("--repeat times one run; with --param-sets each line is a run");
  std::vector<rt::HostTensor> out;
  if (!paramSets.empty())
    out = runParamSets(*prog, paramSets, in);
  else if (!prog->run(in, out, err))
    die(err);
  if (repeat > 0) {
    auto t0 = std::chrono::steady_clock::now();
    for (int64_t r = 0; r < repeat; ++r)
      if (!prog->run(in, out, err))
        die(err);
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - t0)
                    .count() /
                (double)repeat;
    std::printf("run: %.3f ms (mean of %lld runs)\n", ms, (long long)repeat);
  }
  makeDirs(outDir);
  for (size_t k = 0; k < out.size(); ++k) {
    std::string path = outDir + "/output_" + std::to_string(k) + ".npy";
    if (!rt::writeNpy(path, out[k], err))
      die(err);
    std::printf("output %zu '%s': %s -> %s\n", k, prog->outputNames()[k].c_str(),
                out[k].desc().str().c_str(), path.c_str());
  }
  return 0;
}
