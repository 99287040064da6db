//===- kiln-run.cpp - run an ONNX model forward through Kiln ----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
//   kiln-run MODEL.onnx [--input FILE | --input NAME=FILE]... [--output-dir DIR]
//            [--target cpu|cuda] [--dim NAME=N] [--batch-size N]
//            [--emit-plan FILE] [--repeat N] [--bind NAME=FILE.pb]
//   kiln-run --onnx-test DIR [DIR...]
//
// --bind fixes graph input NAME to the TensorProto in FILE.pb at compile time
// (an integer or boolean tensor, or a floating scalar: a shape, axes, a
// Trilu's k). The input is then not given with --input.
//
// Compiles the model (import, convert, lower, assign buffers, plan) in memory
// and executes the plan with the CPU runtime. --onnx-test runs ONNX backend
// test folders, each in a child process so a crash fails one test, not all.
//===----------------------------------------------------------------------===//
#include "kiln/Pipeline/Pipelines.h"
#include "kiln/runtime/Runtime.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>

using namespace kiln;
namespace rt = kiln::rt;

namespace {

/// Reads a whole file; false if it cannot.
bool slurp(const std::string &path, std::string &out) {
  auto buf = llvm::MemoryBuffer::getFile(path);
  if (!buf)
    return false;
  out = (*buf)->getBuffer().str();
  return true;
}

[[noreturn]] void die(const std::string &msg) {
  llvm::errs() << "kiln-run: " << msg << "\n";
  llvm::errs().flush();
  std::exit(1);
}

struct Options {
  std::string model;
  std::vector<std::string> inputs; // FILE or NAME=FILE
  std::string outputDir = ".";
  std::string target = "cpu";
  std::string emitPlan;
  int repeat = 0;
  ImportOptions import;
  std::vector<std::string> testDirs;
  bool onnxTest = false;
};

int64_t parseInt(const std::string &flag, const std::string &s) {
  long long v;
  if (llvm::StringRef(s).getAsInteger(10, v) || v < 0)
    die("flag " + flag + " needs a non-negative integer, got '" + s + "'");
  return v;
}

Options parseArgs(int argc, char **argv) {
  Options o;
  auto value = [&](int &i, const std::string &flag) -> std::string {
    if (i + 1 >= argc)
      die("flag " + flag + " needs a value");
    return argv[++i];
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    // --flag=value is --flag value.
    std::string flag = a, inlineValue;
    bool hasInline = false;
    if (a.rfind("--", 0) == 0 && a.find('=') != std::string::npos) {
      flag = a.substr(0, a.find('='));
      inlineValue = a.substr(a.find('=') + 1);
      hasInline = true;
    }
    auto get = [&]() { return hasInline ? inlineValue : value(i, flag); };
    if (flag == "--input") {
      o.inputs.push_back(get());
    } else if (flag == "--output-dir") {
      o.outputDir = get();
    } else if (flag == "--target") {
      o.target = get();
    } else if (flag == "--emit-plan") {
      o.emitPlan = get();
    } else if (flag == "--repeat") {
      o.repeat = (int)parseInt(flag, get());
    } else if (flag == "--batch-size") {
      o.import.batchSize = parseInt(flag, get());
    } else if (flag == "--dim") {
      std::string d = get();
      size_t eq = d.find('=');
      if (eq == std::string::npos || eq == 0)
        die("--dim needs NAME=N, got '" + d + "'");
      o.import.dimValues[d.substr(0, eq)] = parseInt("--dim", d.substr(eq + 1));
    } else if (flag == "--bind") {
      std::string d = get();
      size_t eq = d.find('=');
      if (eq == std::string::npos || eq == 0)
        die("--bind needs NAME=FILE.pb, got '" + d + "'");
      std::string bytes, file = d.substr(eq + 1);
      if (!slurp(file, bytes))
        die(file + ": cannot read it");
      o.import.boundInputs[d.substr(0, eq)] = bytes;
    } else if (a == "--onnx-test") {
      o.onnxTest = true;
    } else if (a == "-h" || a == "--help") {
      llvm::outs()
          << "usage: kiln-run MODEL.onnx [--input FILE | --input NAME=FILE]... "
             "[--output-dir DIR] [--target cpu|cuda]\n"
             "                [--dim NAME=N] [--batch-size N] [--emit-plan "
             "FILE] [--repeat N] [--bind NAME=FILE.pb]\n"
             "       kiln-run --onnx-test DIR [DIR...]\n";
      std::exit(0);
    } else if (a.rfind("--", 0) == 0) {
      die("unknown flag '" + a + "' (see --help)");
    } else if (o.onnxTest) {
      o.testDirs.push_back(a);
    } else if (o.model.empty()) {
      o.model = a;
    } else {
      die("unexpected argument '" + a + "' (one model per run)");
    }
  }
  if (o.target != "cpu" && o.target != "cuda")
    die("--target must be cpu or cuda, got '" + o.target + "'");
  if (o.target == "cuda")
    die("--target cuda: this build has no CUDA runtime (see docs/Architecture.md)");
  if (o.onnxTest) {
    if (!o.model.empty())
      o.testDirs.insert(o.testDirs.begin(), o.model);
    if (o.testDirs.empty())
      die("--onnx-test needs at least one test folder");
  } else if (o.model.empty()) {
    die("no model given (usage: kiln-run MODEL.onnx [--input FILE]...)");
  }
  return o;
}

std::unique_ptr<rt::Program> compile(const std::string &model,
                                     const ImportOptions &opts,
                                     std::string &err, std::string *stage,
                                     std::string *planOut = nullptr) {
  CompileResult res;
  if (!compileONNXToPlan(model, opts, res)) {
    err = res.error;
    if (stage)
      *stage = res.stage;
    return nullptr;
  }
  if (planOut)
    *planOut = res.plan;
  auto prog = rt::Program::load(res.plan.data(), res.plan.size(), err);
  if (!prog && stage)
    *stage = "load";
  return prog;
}

//===----------------------------------------------------------------------===//
// Running a model
//===----------------------------------------------------------------------===//

int runModel(const Options &o) {
  if (!llvm::sys::fs::exists(o.model))
    die(o.model + ": no such file");
  std::string err, plan;
  auto prog = compile(o.model, o.import, err, nullptr, &plan);
  if (!prog)
    die(err);
  if (!o.emitPlan.empty()) {
    std::error_code ec;
    llvm::raw_fd_ostream os(o.emitPlan, ec);
    if (ec)
      die(o.emitPlan + ": " + ec.message());
    os.write(plan.data(), plan.size());
  }

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
        die("--input " + name + "=...: the model has no input '" + name +
            "' (inputs: " + llvm::join(names, ", ") + ")");
      slot = it - names.begin();
    } else {
      while (positional < n && given[positional])
        ++positional;
      if (positional >= n)
        die("--input " + spec + ": the model takes " + std::to_string(n) +
            " input" + (n == 1 ? "" : "s") + ", this is one too many");
      slot = positional;
    }
    if (given[slot])
      die("input '" + names[slot] + "' is given twice");
    if (!rt::readTensorFile(file, tensors[slot], err))
      die(err);
    given[slot] = true;
  }
  for (size_t k = 0; k < n; ++k)
    if (!given[k])
      die("missing --input for '" + names[k] + "' (" +
          prog->inputDescs()[k].str() + ")");
  std::vector<const rt::HostTensor *> in;
  for (auto &t : tensors)
    in.push_back(&t);
  std::string bad = prog->checkInputs(in);
  if (!bad.empty())
    die(bad);

  std::vector<rt::HostTensor> out;
  if (!prog->run(in, out, err))
    die(err);
  if (o.repeat > 0) {
    auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < o.repeat; ++r)
      if (!prog->run(in, out, err))
        die(err);
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - t0)
                    .count() /
                o.repeat;
    llvm::outs() << llvm::format("forward: %.3f ms (mean of %d runs)\n", ms,
                                 o.repeat);
  }
  if (std::error_code ec = llvm::sys::fs::create_directories(o.outputDir))
    die(o.outputDir + ": " + ec.message());
  for (size_t k = 0; k < out.size(); ++k) {
    llvm::SmallString<256> path(o.outputDir);
    llvm::sys::path::append(path, "output_" + std::to_string(k) + ".npy");
    if (!rt::writeNpy(std::string(path), out[k], err))
      die(err);
    llvm::outs() << "output " << k << " '" << prog->outputNames()[k]
                 << "': " << out[k].desc().str() << " -> " << path << "\n";
  }
  return 0;
}

//===----------------------------------------------------------------------===//
// ONNX backend tests
//===----------------------------------------------------------------------===//

double elemAsDouble(const rt::HostTensor &t, int64_t i) {
  const void *p = t.data();
  switch (t.dtype()) {
  case rt::DType::F32: return static_cast<const float *>(p)[i];
  case rt::DType::F64: return static_cast<const double *>(p)[i];
  case rt::DType::F16: return rt::halfToFloat(static_cast<const uint16_t *>(p)[i]);
  case rt::DType::BF16: return rt::bf16ToFloat(static_cast<const uint16_t *>(p)[i]);
  case rt::DType::I64: return (double)static_cast<const int64_t *>(p)[i];
  case rt::DType::I32: return static_cast<const int32_t *>(p)[i];
  case rt::DType::I16: return static_cast<const int16_t *>(p)[i];
  case rt::DType::I8: return static_cast<const int8_t *>(p)[i];
  case rt::DType::U64: return (double)static_cast<const uint64_t *>(p)[i];
  case rt::DType::U32: return static_cast<const uint32_t *>(p)[i];
  case rt::DType::U16: return static_cast<const uint16_t *>(p)[i];
  case rt::DType::U8: return static_cast<const uint8_t *>(p)[i];
  case rt::DType::Bool: return static_cast<const uint8_t *>(p)[i] != 0;
  }
  return 0;
}

/// "" when `got` matches `want` as ONNX's backend runner checks (rtol 1e-3,
/// atol 1e-7 for floats, NaN equal to NaN; exact for integers).
std::string compareOutput(const rt::HostTensor &got, const rt::HostTensor &want) {
  if (got.desc() != want.desc())
    return "type " + got.desc().str() + ", expected " + want.desc().str();
  bool exact = !rt::isFloat(want.dtype());
  int64_t bad = -1, nbad = 0;
  double worst = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double g = elemAsDouble(got, i), w = elemAsDouble(want, i);
    bool ok;
    if (exact) {
      // Compare 64-bit integers exactly (double cannot hold all of them).
      ok = std::memcmp(static_cast<const char *>(got.data()) + i * rt::dtypeSize(got.dtype()),
                       static_cast<const char *>(want.data()) + i * rt::dtypeSize(want.dtype()),
                       rt::dtypeSize(want.dtype())) == 0;
    } else if (std::isnan(w) || std::isnan(g)) {
      ok = std::isnan(w) && std::isnan(g);
    } else if (std::isinf(w) || std::isinf(g)) {
      ok = g == w;
    } else {
      ok = std::fabs(g - w) <= 1e-7 + 1e-3 * std::fabs(w);
    }
    if (!ok) {
      ++nbad;
      double e = std::isfinite(g - w) ? std::fabs(g - w) : INFINITY;
      if (bad < 0 || e > worst) {
        bad = i;
        worst = e;
      }
    }
  }
  if (nbad == 0)
    return "";
  std::string s;
  llvm::raw_string_ostream os(s);
  os << nbad << " of " << want.numel() << " elements differ, worst at flat index "
     << bad << ": got " << llvm::format("%.9g", elemAsDouble(got, bad))
     << ", expected " << llvm::format("%.9g", elemAsDouble(want, bad));
  return s;
}

std::vector<std::string> sortedMatches(const std::string &dir,
                                       llvm::StringRef prefix,
                                       llvm::StringRef suffix, bool dirs) {
  std::vector<std::pair<int, std::string>> found;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    if (!name.starts_with(prefix) || !name.ends_with(suffix))
      continue;
    llvm::StringRef num = name.drop_front(prefix.size()).drop_back(suffix.size());
    int k;
    if (num.getAsInteger(10, k))
      continue;
    bool isDir = llvm::sys::fs::is_directory(it->path());
    if (isDir == dirs)
      found.push_back({k, it->path()});
  }
  llvm::sort(found);
  std::vector<std::string> out;
  for (auto &f : found)
    out.push_back(f.second);
  return out;
}

/// What conversion says when an operand must be known at compile time.
constexpr llvm::StringLiteral kNeedsConstant =
    "must be a constant or computable from constants";

/// Compiles `model` binding, smallest first, as few of a backend test's
/// integer, boolean and scalar inputs as it takes to convert (each with one
/// value across the data sets `sets`; `names` are the graph inputs the
/// input_K.pb files feed). Null, with the last attempt's error, when no
/// such binding converts; `opts.boundInputs` is then empty again.
std::unique_ptr<rt::Program> compileBindingInputs(const std::string &model,
                                                  const std::vector<std::string> &sets,
                                                  const std::vector<std::string> &names,
                                                  ImportOptions &opts, std::string &err,
                                                  std::string &stage) {
  struct Candidate {
    int64_t numel;
    std::string name, bytes;
  };
  std::vector<Candidate> cands;
  auto files = sortedMatches(sets[0], "input_", ".pb", false);
  for (size_t k = 0; k < files.size() && k < names.size(); ++k) {
    rt::HostTensor t;
    std::string bytes, e;
    if (!rt::readTensorFile(files[k], t, e) ||
        (rt::isFloat(t.dtype()) && t.numel() > 1) || !slurp(files[k], bytes))
      continue;
    bool same = true;
    for (size_t s = 1; s < sets.size() && same; ++s) {
      std::string other;
      llvm::SmallString<256> f(sets[s]);
      llvm::sys::path::append(f, llvm::sys::path::filename(files[k]));
      same = slurp(std::string(f), other) && other == bytes;
    }
    if (same)
      cands.push_back({t.numel(), names[k], std::move(bytes)});
  }
  std::stable_sort(cands.begin(), cands.end(),
                   [](const Candidate &a, const Candidate &b) { return a.numel < b.numel; });
  for (const Candidate &c : cands) {
    opts.boundInputs[c.name] = c.bytes;
    if (auto prog = compile(model, opts, err, &stage))
      return prog;
    if (stage != "convert" || err.find(kNeedsConstant) == std::string::npos)
      break;
  }
  opts.boundInputs.clear();
  return nullptr;
}

/// Runs one backend test folder; "" on success, "=NOTE" on a success to
/// report with a note, else the reason.
///
/// Kiln compiles static shapes, so an op whose shape, axes or count is a
/// graph input (Reshape's shape, Trilu's k, ...) needs it at compile time.
/// When conversion says so, compileBindingInputs binds the fewest of the
/// test's integer, boolean and scalar inputs it needs (ahead-of-time
/// specialisation) and the test runs with the rest; the PASS line names them.
std::string runOnnxTest(const std::string &dir) {
  llvm::SmallString<256> model(dir);
  llvm::sys::path::append(model, "model.onnx");
  if (!llvm::sys::fs::exists(model))
    return "error: no model.onnx in " + dir;
  std::string err, stage;
  auto sets = sortedMatches(dir, "test_data_set_", "", /*dirs=*/true);
  ImportOptions opts;
  std::vector<std::string> names; // graph inputs, when inputs are bound
  std::string namesErr;
  auto prog = compile(std::string(model), opts, err, &stage);
  if (!prog && stage == "convert" && err.find(kNeedsConstant) != std::string::npos &&
      !sets.empty() && onnxGraphInputNames(std::string(model), names, namesErr))
    prog = compileBindingInputs(std::string(model), sets, names, opts, err, stage);
  auto isBound = [&](size_t k) {
    return k < names.size() && opts.boundInputs.count(names[k]);
  };
  if (!prog) {
    if (stage == "convert" && err.find("no pattern") != std::string::npos)
      return "unsupported op: " + err;
    return "error (" + stage + "): " + err;
  }
  if (sets.empty())
    return "error: no test_data_set_* folder";
  for (const std::string &set : sets) {
    std::string setName = std::string(llvm::sys::path::filename(set));
    auto inFiles = sortedMatches(set, "input_", ".pb", false);
    auto outFiles = sortedMatches(set, "output_", ".pb", false);
    std::vector<rt::HostTensor> ins(inFiles.size()), want(outFiles.size());
    for (size_t k = 0; k < inFiles.size(); ++k)
      if (!rt::readTensorFile(inFiles[k], ins[k], err))
        return "error: " + err;
    for (size_t k = 0; k < outFiles.size(); ++k)
      if (!rt::readTensorFile(outFiles[k], want[k], err))
        return "error: " + err;
    // ONNX 1.12's backend data stores bfloat16 tensors as their uint16 bit
    // patterns: where the model has bf16, a u16 tensor of that shape is
    // read as those bits.
    auto asBf16 = [](rt::HostTensor &t, const rt::TensorDesc &want) {
      if (t.dtype() == rt::DType::U16 && want.dtype == rt::DType::BF16 &&
          t.shape() == want.shape) {
        rt::HostTensor b(want);
        std::memcpy(b.data(), t.data(), t.bytes());
        t = std::move(b);
      }
    };
    std::vector<size_t> live; // the inputs not bound at compile time
    for (size_t k = 0; k < ins.size(); ++k)
      if (!isBound(k))
        live.push_back(k);
    for (size_t j = 0; j < live.size() && j < prog->inputDescs().size(); ++j)
      asBf16(ins[live[j]], prog->inputDescs()[j]);
    for (size_t k = 0; k < want.size() && k < prog->outputDescs().size(); ++k)
      asBf16(want[k], prog->outputDescs()[k]);
    std::vector<const rt::HostTensor *> in;
    for (size_t k : live)
      in.push_back(&ins[k]);
    std::string bad = prog->checkInputs(in);
    if (!bad.empty())
      return "error: " + setName + ": " + bad;
    std::vector<rt::HostTensor> got;
    if (!prog->run(in, got, err))
      return "error: " + setName + ": " + err;
    if (got.size() != want.size())
      return "wrong result: " + setName + ": " + std::to_string(got.size()) +
             " outputs, expected " + std::to_string(want.size());
    for (size_t k = 0; k < want.size(); ++k) {
      std::string why = compareOutput(got[k], want[k]);
      if (!why.empty())
        return "wrong result: " + setName + ": output " + std::to_string(k) +
               " '" + prog->outputNames()[k] + "': " + why;
    }
  }
  if (opts.boundInputs.empty())
    return "";
  std::string note;
  for (size_t k = 0; k < names.size(); ++k)
    if (isBound(k))
      note += (note.empty() ? "'" : ", '") + names[k] + "'";
  return "=with input" + std::string(opts.boundInputs.size() > 1 ? "s " : " ") + note +
         " bound to the test's value at compile time";
}

/// Runs `dir` in a child (a crash or a hang fails this test only).
std::string runIsolated(const std::string &dir, int timeoutSeconds) {
  int fds[2];
  if (pipe(fds) != 0)
    return runOnnxTest(dir);
  llvm::outs().flush();
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return runOnnxTest(dir);
  }
  if (pid == 0) {
    close(fds[0]);
    alarm(timeoutSeconds);
    std::string r = runOnnxTest(dir);
    std::string msg = "R" + r;
    ssize_t off = 0;
    while (off < (ssize_t)msg.size()) {
      ssize_t w = write(fds[1], msg.data() + off, msg.size() - off);
      if (w <= 0)
        break;
      off += w;
    }
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  char buf[4096];
  ssize_t r;
  while ((r = read(fds[0], buf, sizeof buf)) > 0)
    msg.append(buf, r);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!msg.empty() && msg[0] == 'R')
    return msg.substr(1);
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    if (sig == SIGALRM)
      return "error: timed out after " + std::to_string(timeoutSeconds) + " s";
    return std::string("error: crashed (") + strsignal(sig) + ")";
  }
  return "error: exited with status " + std::to_string(WEXITSTATUS(status));
}

int runOnnxTests(const Options &o) {
  int passed = 0, failed = 0;
  bool isolate = !getenv("KILN_RUN_IN_PROCESS");
  for (const std::string &dir : o.testDirs) {
    std::string name = std::string(
        llvm::sys::path::filename(llvm::StringRef(dir).rtrim('/')));
    std::string why = isolate ? runIsolated(dir, 300) : runOnnxTest(dir);
    for (char &c : why)
      if (c == '\n')
        c = ' ';
    if (why.empty() || why[0] == '=') {
      ++passed;
      llvm::outs() << "PASS " << name << (why.empty() ? "" : ": " + why.substr(1)) << "\n";
    } else {
      ++failed;
      llvm::outs() << "FAIL " << name << ": " << why << "\n";
    }
    llvm::outs().flush();
  }
  llvm::outs() << passed << " passed, " << failed << " failed\n";
  return failed == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
  Options o = parseArgs(argc, argv);
  return o.onnxTest ? runOnnxTests(o) : runModel(o);
}
