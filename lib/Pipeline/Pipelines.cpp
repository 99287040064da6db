//===- Pipelines.cpp - Kiln's compilation pipelines -------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "kiln/Pipeline/Pipelines.h"

#include "kiln/Conversion/Passes.h"
#include "kiln/Dialect/KRT/Transforms/Passes.h"
#include "kiln/InitAllDialects.h"
#include "kiln/Target/Plan/ExportPlan.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void kiln::buildONNXToKilnPipeline(OpPassManager &pm) {
  pm.addPass(createConvertONNXToKilnPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void kiln::buildKilnToRuntimePipeline(OpPassManager &pm) {
  pm.addPass(createKilnLowerToRuntimePass());
  pm.addPass(krt::createKilnAssignBuffersPass());
}

namespace {
/// Keeps the first error as one line ("loc: message").
struct FirstError {
  std::string text;
  void note(Diagnostic &d) {
    if (d.getSeverity() != DiagnosticSeverity::Error || !text.empty())
      return;
    llvm::raw_string_ostream os(text);
    if (auto file = dyn_cast<FileLineColLoc>(d.getLocation()))
      os << file.getFilename().getValue() << ":" << file.getLine() << ": ";
    else if (auto name = dyn_cast<NameLoc>(d.getLocation()))
      os << "node '" << name.getName().getValue() << "': ";
    os << d.str();
    for (char &c : text)
      if (c == '\n')
        c = ' ';
  }
};
} // namespace

bool kiln::compileONNXToPlan(const std::string &path,
                             const ImportOptions &opts, CompileResult &result) {
  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext ctx(registry, MLIRContext::Threading::DISABLED);
  ctx.loadAllAvailableDialects();
  FirstError first;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
    first.note(d);
    return success();
  });
  auto fail = [&](const char *stage) {
    result.stage = stage;
    result.error = first.text.empty() ? std::string(stage) + " failed"
                                      : first.text;
    return false;
  };

  ParamData params;
  ImportOptions importOpts = opts;
  importOpts.paramData = &params;
  OwningOpRef<ModuleOp> module = importONNX(path, ctx, importOpts);
  if (!module)
    return fail("import");
  {
    PassManager pm(&ctx);
    buildONNXToKilnPipeline(pm);
    if (failed(pm.run(*module)))
      return fail("convert");
  }
  {
    PassManager pm(&ctx);
    buildKilnToRuntimePipeline(pm);
    if (failed(pm.run(*module)))
      return fail("lower");
  }
  if (failed(exportPlan(*module, "forward", params, result.plan)))
    return fail("plan");
  if (auto f = module->lookupSymbol<func::FuncOp>("forward"))
    if (auto a = f->getAttrOfType<IntegerAttr>("krt.arena_bytes"))
      result.arenaBytes = a.getInt();
  return true;
}
