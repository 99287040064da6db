//===- ONNXTestRunner.cpp - ONNX backend-test folders through Kiln -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Compiles each folder's model.onnx with compileONNXToPlan, runs every
// test_data_set_* through the CPU runtime and compares the outputs with
// ONNX's backend tolerances. Kiln compiles static shapes, so an input that an
// op needs as a constant (a Reshape's shape, a Trilu's k) is bound to the
// test's value at compile time when conversion asks for it, and the PASS line
// says so. Each folder runs in a child process so that a crash or a hang fails
// that folder, not the whole run.
//===----------------------------------------------------------------------===//
#include "kiln/Tools/ONNXTestRunner.h"

#include "kiln/Pipeline/Pipelines.h"
#include "kiln/Support/InputFile.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>

using namespace kiln;

namespace {

/// Reads a whole regular file; false if it cannot (a FIFO is not waited on).
bool slurp(const std::string &path, std::string &out) {
  std::string err;
  return readRegularFile(path, out, err);
}

/// rt::readTensorFile of a regular file (the runtime's reader would wait on
/// a FIFO).
bool readTensor(const std::string &path, rt::HostTensor &t, std::string &err) {
  return checkRegularFile(path, err) && rt::readTensorFile(path, t, err);
}

} // namespace

std::unique_ptr<rt::Program> kiln::compileToProgram(const std::string &model,
                                                    const ImportOptions &opts,
                                                    std::string &err,
                                                    std::string *stage,
                                                    std::string *planOut) {
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
// One backend test folder
//===----------------------------------------------------------------------===//

namespace {

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
    if (!readTensor(files[k], t, e) ||
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
    if (auto prog = compileToProgram(model, opts, err, &stage))
      return prog;
    if (stage != "convert" || err.find(kNeedsConstant) == std::string::npos)
      break;
  }
  opts.boundInputs.clear();
  return nullptr;
}

} // namespace

// Kiln compiles static shapes, so an op whose shape, axes or count is a
// graph input (Reshape's shape, Trilu's k, ...) needs it at compile time.
// When conversion says so, compileBindingInputs binds the fewest of the
// test's integer, boolean and scalar inputs it needs (ahead-of-time
// specialisation) and the test runs with the rest; the PASS line names them.
std::string kiln::runONNXTest(const std::string &dir) {
  llvm::SmallString<256> model(dir);
  llvm::sys::path::append(model, "model.onnx");
  if (!llvm::sys::fs::exists(model))
    return "error: no model.onnx in " + dir;
  std::string err, stage;
  auto sets = sortedMatches(dir, "test_data_set_", "", /*dirs=*/true);
  ImportOptions opts;
  std::vector<std::string> names; // graph inputs, when inputs are bound
  std::string namesErr;
  auto prog = compileToProgram(std::string(model), opts, err, &stage);
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
      if (!readTensor(inFiles[k], ins[k], err))
        return "error: " + err;
    for (size_t k = 0; k < outFiles.size(); ++k)
      if (!readTensor(outFiles[k], want[k], err))
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

//===----------------------------------------------------------------------===//
// Isolation and the report
//===----------------------------------------------------------------------===//

std::string kiln::runONNXTestIsolated(const std::string &dir,
                                      int timeoutSeconds) {
  int fds[2];
  if (pipe(fds) != 0)
    return runONNXTest(dir);
  llvm::outs().flush();
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return runONNXTest(dir);
  }
  if (pid == 0) {
    close(fds[0]);
    alarm(timeoutSeconds);
    std::string r = runONNXTest(dir);
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

int kiln::runONNXTests(llvm::ArrayRef<std::string> dirs, llvm::raw_ostream &os) {
  int passed = 0, failed = 0;
  bool isolate = !getenv("KILN_RUN_IN_PROCESS");
  for (const std::string &dir : dirs) {
    std::string name = std::string(
        llvm::sys::path::filename(llvm::StringRef(dir).rtrim('/')));
    std::string why = isolate ? runONNXTestIsolated(dir, 300) : runONNXTest(dir);
    for (char &c : why)
      if (c == '\n')
        c = ' ';
    if (why.empty() || why[0] == '=') {
      ++passed;
      os << "PASS " << name << (why.empty() ? "" : ": " + why.substr(1)) << "\n";
    } else {
      ++failed;
      os << "FAIL " << name << ": " << why << "\n";
    }
    os.flush();
  }
  os << passed << " passed, " << failed << " failed\n";
  return failed == 0 ? 0 : 1;
}
