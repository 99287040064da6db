//===- kiln-compile.cpp - ONNX model to training executable -----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
//   kiln-compile MODEL.onnx -o OUT [--target cpu|cuda] [--emit exe|mlir|plan]
//     [--batch-size N] [--loss cross-entropy|mse|output] [--logits NAME]
//     [--labels NAME] [--loss-output NAME]
//     [--optimizer sgd|momentum|adam|adamw] [--lr F] [--momentum F]
//     [--nesterov] [--weight-decay F] [--beta1 F] [--beta2 F] [--eps F]
//     [--freeze REGEX] [--clip-grad-norm F]
//     [--lr-schedule constant|linear-warmup|cosine] [--warmup-steps N]
//     [--total-steps N] [--min-lr F] [--dim NAME=N]
//
// --emit exe (default) copies kiln-train (next to this tool, or
// $KILN_TRAIN_RUNTIME) to OUT and appends the train plan, the config, the
// ONNX model and the eval plan with a trailer; --emit plan writes the
// @train_step plan; --emit mlir the kiln-level module with @train_step.
//===----------------------------------------------------------------------===//
#include "kiln/Pipeline/Pipelines.h"
#include "kiln/runtime/TrainPayload.h"

#include "kiln/Dialect/Kiln/IR/KilnEnums.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstdio>
#include <sys/stat.h>

using namespace kiln;

namespace {

[[noreturn]] void die(const std::string &msg) {
  llvm::errs() << "kiln-compile: " << msg << "\n";
  llvm::errs().flush();
  std::exit(1);
}

const char *kUsage =
    "usage: kiln-compile MODEL.onnx -o OUT [--target cpu|cuda] [--emit exe|mlir|plan]\n"
    "  --batch-size N            global batch (static shapes are compiled for it)\n"
    "  --loss cross-entropy|mse|output\n"
    "  --logits NAME             model output the appended loss reads (default: the only output)\n"
    "  --labels NAME             name of the labels input an appended loss adds (default: labels)\n"
    "  --loss-output NAME        with --loss output: the scalar model output to minimise\n"
    "  --optimizer sgd|momentum|adam|adamw  --lr F  --momentum F  --nesterov\n"
    "  --weight-decay F  --beta1 F  --beta2 F  --eps F  --freeze REGEX\n"
    "  --clip-grad-norm F        global gradient-norm clipping\n"
    "  --optimizer none          (with --emit plan) the plan outputs the loss and every gradient\n"
    "  --lr-schedule constant|linear-warmup|cosine  --warmup-steps N  --total-steps N  --min-lr F\n"
    "  --dim NAME=N              value of a symbolic dimension\n";

double parseFloat(const std::string &flag, const std::string &s) {
  double v;
  if (llvm::StringRef(s).getAsDouble(v) || !std::isfinite(v))
    die("flag " + flag + " needs a number, got '" + s + "'");
  return v;
}

int64_t parseInt(const std::string &flag, const std::string &s) {
  long long v;
  if (llvm::StringRef(s).getAsInteger(10, v) || v < 0)
    die("flag " + flag + " needs a non-negative integer, got '" + s + "'");
  return v;
}

std::string findRuntime() {
  if (const char *env = std::getenv("KILN_TRAIN_RUNTIME"))
    return env;
  static int anchor;
  std::string self = llvm::sys::fs::getMainExecutable("kiln-compile", &anchor);
  llvm::SmallString<256> p(llvm::sys::path::parent_path(self));
  llvm::sys::path::append(p, "kiln-train");
  return std::string(p);
}

/// Writes `bytes` to `path` through PATH.tmp and a rename.
void writeAtomically(const std::string &path, const std::string &bytes,
                     bool executable) {
  std::string tmp = path + ".tmp";
  std::error_code ec;
  {
    llvm::raw_fd_ostream os(tmp, ec);
    if (ec)
      die(path + ": " + ec.message());
    os << bytes;
    os.close();
    if (os.has_error())
      die(path + ": " + os.error().message());
  }
  if (executable)
    ::chmod(tmp.c_str(), 0755);
  if ((ec = llvm::sys::fs::rename(tmp, path)))
    die(path + ": " + ec.message());
}

} // namespace

int main(int argc, char **argv) {
  TrainCompileOptions opts;
  std::string model, out, emit = "exe", target = "cpu";
  bool lrGiven = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string flag = a, inlineValue;
    bool hasInline = false;
    if (a.rfind("--", 0) == 0 && a.find('=') != std::string::npos) {
      flag = a.substr(0, a.find('='));
      inlineValue = a.substr(a.find('=') + 1);
      hasInline = true;
    }
    auto get = [&]() -> std::string {
      if (hasInline)
        return inlineValue;
      if (i + 1 >= argc)
        die("flag " + flag + " needs a value");
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      llvm::outs() << kUsage;
      return 0;
    } else if (flag == "-o" || flag == "--output") {
      out = get();
    } else if (flag == "--target") {
      target = get();
    } else if (flag == "--emit") {
      emit = get();
    } else if (flag == "--batch-size") {
      opts.import.batchSize = parseInt(flag, get());
      if (opts.import.batchSize == 0)
        die("--batch-size must be at least 1");
    } else if (flag == "--dim") {
      std::string d = get();
      size_t eq = d.find('=');
      if (eq == std::string::npos || eq == 0)
        die("--dim needs NAME=N, got '" + d + "'");
      opts.import.dimValues[d.substr(0, eq)] = parseInt("--dim", d.substr(eq + 1));
    } else if (flag == "--loss") {
      opts.loss = get();
    } else if (flag == "--logits") {
      opts.logits = get();
    } else if (flag == "--labels") {
      opts.labels = get();
    } else if (flag == "--loss-output") {
      opts.lossOutput = get();
    } else if (flag == "--optimizer") {
      opts.optimizer = get();
    } else if (flag == "--lr") {
      opts.lr = parseFloat(flag, get());
      lrGiven = true;
    } else if (flag == "--momentum") {
      opts.momentum = parseFloat(flag, get());
    } else if (flag == "--nesterov") {
      opts.nesterov = true;
    } else if (flag == "--weight-decay") {
      opts.weightDecay = parseFloat(flag, get());
    } else if (flag == "--beta1") {
      opts.beta1 = parseFloat(flag, get());
    } else if (flag == "--beta2") {
      opts.beta2 = parseFloat(flag, get());
    } else if (flag == "--eps") {
      opts.eps = parseFloat(flag, get());
    } else if (flag == "--freeze") {
      opts.freeze = get();
    } else if (flag == "--clip-grad-norm") {
      opts.clipNorm = parseFloat(flag, get());
    } else if (flag == "--lr-schedule") {
      opts.schedule = get();
    } else if (flag == "--warmup-steps") {
      opts.warmupSteps = parseInt(flag, get());
    } else if (flag == "--total-steps") {
      opts.totalSteps = parseInt(flag, get());
    } else if (flag == "--min-lr") {
      opts.minLr = parseFloat(flag, get());
    } else if (flag == "--bn-running-var") {
      opts.bnRunningVar = get();
    } else if (a.rfind("-", 0) == 0) {
      die("unknown flag '" + a + "' (see --help)");
    } else if (model.empty()) {
      model = a;
    } else {
      die("unexpected argument '" + a + "' (one model per run)");
    }
  }
  if (model.empty())
    die("no model given (usage: kiln-compile MODEL.onnx -o OUT)");
  if (out.empty())
    die("no output given: pass -o OUT");
  if (target != "cpu" && target != "cuda")
    die("--target must be cpu or cuda, got '" + target + "'");
  if (target == "cuda")
    die("--target cuda: this build has no CUDA runtime (see docs/Architecture.md)");
  if (emit != "exe" && emit != "mlir" && emit != "plan")
    die("--emit must be exe, mlir or plan, got '" + emit + "'");
  if (!symbolizeLossKind(opts.loss))
    die("--loss must be cross-entropy, mse or output, got '" + opts.loss + "'");
  if (opts.loss == "output" && opts.lossOutput.empty())
    die("--loss output needs --loss-output NAME (the scalar model output to minimise)");
  if (opts.optimizer == "none" && emit == "exe")
    die("--optimizer none (gradients as plan outputs) needs --emit plan or mlir");
  if (!symbolizeOptimizerKind(opts.optimizer) && opts.optimizer != "none")
    die("--optimizer must be sgd, momentum, adam or adamw, got '" + opts.optimizer + "'");
  if (!symbolizeLRSchedule(opts.schedule))
    die("--lr-schedule must be constant, linear-warmup or cosine, got '" +
        opts.schedule + "'");
  if (lrGiven && opts.lr <= 0)
    die("--lr must be positive");
  if (!symbolizeBNRunningVar(opts.bnRunningVar))
    die("--bn-running-var must be unbiased or biased");
  if (!llvm::sys::fs::exists(model))
    die(model + ": no such file");

  std::string runtime;
  if (emit == "exe") {
    runtime = findRuntime();
    if (!llvm::sys::fs::exists(runtime))
      die("the training runtime '" + runtime +
          "' is missing (build the kiln-train target, or set KILN_TRAIN_RUNTIME)");
  }

  auto t0 = std::chrono::steady_clock::now();
  TrainCompileResult r;
  if (!compileONNXToTraining(model, opts, r))
    die(model + ": " + r.error);

  if (emit == "mlir") {
    writeAtomically(out, r.mlir, false);
    return 0;
  }
  if (emit == "plan") {
    writeAtomically(out, r.trainPlan, false);
    return 0;
  }
  auto exe = llvm::MemoryBuffer::getFile(runtime, /*IsText=*/false,
                                         /*RequiresNullTerminator=*/false);
  if (!exe)
    die(runtime + ": " + exe.getError().message());
  auto onnx = llvm::MemoryBuffer::getFile(model, false, false);
  if (!onnx)
    die(model + ": " + onnx.getError().message());
  std::string bytes((*exe)->getBuffer());
  rt::TrainPayloadParts parts;
  parts[rt::TrainPart::Plan] = r.trainPlan;
  parts[rt::TrainPart::Config] = r.config;
  parts[rt::TrainPart::Model] = (*onnx)->getBuffer();
  parts[rt::TrainPart::Eval] = r.evalPlan;
  rt::appendTrainPayload(bytes, parts);
  writeAtomically(out, bytes, true);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  llvm::errs() << llvm::format("kiln-compile: wrote %s (train arena %.1f MiB, compiled in %.1f s)\n",
                               out.c_str(), r.trainArenaBytes / 1048576.0, secs);
  return 0;
}
