//===- kiln-exec.cpp - run a plan file ---------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
//   kiln-exec PLAN [--input FILE]... [--output-dir DIR] [--repeat N]
//
// Loads a plan (docs/PlanFormat.md), reads one tensor file (.npy or ONNX
// TensorProto .pb) per plan input, in order, runs the plan and writes
// DIR/output_<k>.npy. --repeat N runs it N more times and prints the mean
// time. Any error: one line "kiln-exec: <message>" on stderr, exit 1.
//===----------------------------------------------------------------------===//
#include "kiln/runtime/Runtime.h"
#include "kiln/runtime/ToolFlags.h"

#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
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
                   "[--repeat N]\n");
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
  std::string plan, outDir = ".";
  std::vector<std::string> inputs, positional;
  int64_t repeat = 0;
  rt::FlagParser flags;
  flags.list("--input", inputs)
      .text("--output-dir", outDir)
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

  std::vector<rt::HostTensor> out;
  if (!prog->run(in, out, err))
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
