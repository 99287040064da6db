//===- kiln-tblgen.cpp - Kiln's TableGen backends ---------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// mlir-tblgen plus Kiln's own backends (the model is upstream mlir-tblgen's
// OpDefinitionsGen: it reads ops through mlir::tblgen::Operator):
//
//   kiln-tblgen -gen-kernel-manifest -I include -I <mlir include>
//       include/kiln/Dialect/KRT/IR/KRTKernels.td
//
// writes the kernel manifest (runtime/core/include/kiln/runtime/
// KernelManifest.inc): every kernel a plan step may name, with its operand
// and result arity and its attributes' names, types and presence, as a
// constexpr table that KernelManifest.h wraps. The output is deterministic
// (sorted by kernel name, no paths or dates) because it is committed and a
// test diffs a fresh one against it.
//===----------------------------------------------------------------------===//
#include "mlir/TableGen/Argument.h"
#include "mlir/TableGen/Attribute.h"
#include "mlir/TableGen/GenInfo.h"
#include "mlir/TableGen/Operator.h"
#include "mlir/Tools/mlir-tblgen/MlirTblgenMain.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/TableGen/Error.h"
#include "llvm/TableGen/Record.h"

#include <map>
#include <set>
#include <string>
#include <vector>

using namespace llvm;

namespace {

struct ValueDecl {
  std::string name;
  const char *arity; // "Single", "Optional", "Variadic"
};

struct AttrDecl {
  std::string name;
  const char *type;     // a manifest::AttrType enumerator
  const char *presence; // a manifest::Presence enumerator
};

struct KernelDecl {
  std::string op; // "kiln.matmul", or "" for a KRT_Kernel
  std::vector<ValueDecl> operands, results;
  std::vector<AttrDecl> attrs;
  bool launched = true;
};

/// The manifest type of an attribute constraint, by the storage class of the
/// attribute under its Optional/DefaultValued/Confined wrappers. A kind of
/// attribute the plan cannot carry stops the build, so that a new kind is
/// added here, to KernelManifest.h and to the plan's JSON on purpose.
const char *attrType(const mlir::tblgen::Attribute &attr, SMLoc loc,
                     StringRef what) {
  mlir::tblgen::Attribute base = attr.getBaseAttr();
  StringRef storage = base.getStorageType();
  if (storage == "::mlir::BoolAttr")
    return "Bool";
  if (storage == "::mlir::IntegerAttr")
    return "Int";
  if (storage == "::mlir::FloatAttr")
    return "Float";
  if (storage == "::mlir::StringAttr")
    return "String";
  if (storage == "::mlir::DenseI64ArrayAttr" ||
      storage == "::mlir::DenseI32ArrayAttr")
    return "IntArray";
  if (base.getAttrDefName() == "StrArrayAttr")
    return "StringArray";
  if (storage == "::mlir::DenseF32ArrayAttr" ||
      storage == "::mlir::DenseF64ArrayAttr")
    return "FloatArray";
  if (storage == "::mlir::ElementsAttr" ||
      storage == "::mlir::DenseElementsAttr")
    return "Elements";
  PrintFatalError(loc, what + ": attribute kind '" + base.getAttrDefName() +
                           "' (storage " + storage +
                           ") has no kernel manifest type; add one to "
                           "kiln-tblgen and KernelManifest.h");
}

const char *arityOf(const Record &constraint) {
  if (constraint.isSubClassOf("Variadic"))
    return "Variadic";
  if (constraint.isSubClassOf("Optional"))
    return "Optional";
  return "Single";
}

const char *presenceOf(const mlir::tblgen::Attribute &attr) {
  if (attr.isOptional())
    return "Optional";
  if (attr.hasDefaultValue())
    return "Default";
  return "Required";
}

KernelDecl fromOp(const mlir::tblgen::Operator &op) {
  KernelDecl k;
  k.op = op.getOperationName();
  for (int i = 0, e = op.getNumOperands(); i < e; ++i) {
    const auto &v = op.getOperand(i);
    k.operands.push_back({v.name.str(), v.isVariadic()   ? "Variadic"
                                        : v.isOptional() ? "Optional"
                                                         : "Single"});
  }
  for (int i = 0, e = op.getNumResults(); i < e; ++i) {
    const auto &v = op.getResult(i);
    k.results.push_back({v.name.str(), v.isVariadic()   ? "Variadic"
                                       : v.isOptional() ? "Optional"
                                                        : "Single"});
  }
  for (const mlir::tblgen::NamedAttribute &na : op.getAttributes()) {
    if (na.attr.isDerivedAttr())
      continue; // computed from the op, never stored or passed on
    k.attrs.push_back({na.name.str(),
                       attrType(na.attr, op.getLoc().front(),
                                (op.getOperationName() + "." + na.name).str()),
                       presenceOf(na.attr)});
  }
  if (op.getNumRegions())
    PrintFatalError(op.getLoc(), op.getOperationName() +
                                     ": an op with regions has no kernel");
  return k;
}

/// A KRT_Kernel: its dags use the same constraint classes as an op's.
KernelDecl fromKernel(const Record &def) {
  KernelDecl k;
  std::string kernel = def.getValueAsString("name").str();
  auto values = [&](const DagInit *dag, std::vector<ValueDecl> &out,
                    std::vector<AttrDecl> *attrs) {
    for (unsigned i = 0, e = dag->getNumArgs(); i < e; ++i) {
      auto *arg = dyn_cast<DefInit>(dag->getArg(i));
      std::string name = dag->getArgNameStr(i).str();
      if (!arg || name.empty())
        PrintFatalError(def.getLoc(), kernel + ": argument " + Twine(i) +
                                          " needs a constraint and a name");
      const Record &c = *arg->getDef();
      if (c.isSubClassOf("Attr")) {
        if (!attrs)
          PrintFatalError(def.getLoc(), kernel + ": a result cannot be an "
                                                 "attribute");
        mlir::tblgen::Attribute attr(&c);
        attrs->push_back({name, attrType(attr, def.getLoc().front(),
                                         kernel + "." + name),
                          presenceOf(attr)});
        continue;
      }
      out.push_back({name, arityOf(c)});
    }
  };
  values(def.getValueAsDag("arguments"), k.operands, &k.attrs);
  values(def.getValueAsDag("results"), k.results, nullptr);
  return k;
}

std::string quoted(StringRef s) { return "\"" + s.str() + "\""; }

bool emitKernelManifest(const RecordKeeper &records, raw_ostream &os) {
  std::map<std::string, KernelDecl> kernels; // sorted by name
  std::map<std::string, std::string> definedBy;
  auto add = [&](std::string name, KernelDecl k, const Record &def) {
    auto [it, fresh] = definedBy.emplace(name, def.getName().str());
    if (!fresh)
      PrintFatalError(def.getLoc(), "kernel '" + name + "' is defined by " +
                                        it->second + " too");
    kernels.emplace(std::move(name), std::move(k));
  };

  std::set<const Record *> notLaunched;
  if (const Record *nl = records.getDef("KRT_NotLaunched"))
    for (const Record *op : nl->getValueAsListOfDefs("ops"))
      notLaunched.insert(op);

  for (const Record *def : records.getAllDerivedDefinitions("Op")) {
    mlir::tblgen::Operator op(def);
    if (op.getDialectName() != "kiln")
      continue;
    KernelDecl k = fromOp(op);
    k.launched = !notLaunched.count(def);
    std::string name = op.getOperationName();
    add(name.substr(name.find('.') + 1), std::move(k), *def);
  }
  for (const Record *def : records.getAllDerivedDefinitions("KRT_Kernel"))
    add(def->getValueAsString("name").str(), fromKernel(*def), *def);
  if (kernels.empty())
    PrintFatalError("no kernels: the input includes no kiln op");

  os << "//===- KernelManifest.inc - the kernel manifest -----------------*- "
        "C++ -*-===//\n"
        "// SPDX-License-Identifier: Apache-2.0\n"
        "//\n"
        "// GENERATED, DO NOT EDIT. Written by\n"
        "//   kiln-tblgen -gen-kernel-manifest "
        "include/kiln/Dialect/KRT/IR/KRTKernels.td\n"
        "// from the ODS definitions; regenerate it after changing an op with\n"
        "//   cmake --build build --target kiln-update-kernel-manifest\n"
        "// Included by KernelManifest.h, which defines the types.\n"
        "//===-------------------------------------------------------------"
        "---------===//\n"
        "// clang-format off\n\n";

  std::string operands, results, attrs, table;
  unsigned nOperands = 0, nResults = 0, nAttrs = 0;
  for (const auto &[name, k] : kernels) {
    unsigned firstOperand = nOperands, firstResult = nResults,
             firstAttr = nAttrs;
    for (const ValueDecl &v : k.operands) {
      operands += formatv("  {{{0}, Arity::{1}}, // {2}\n", quoted(v.name),
                          v.arity, name);
      ++nOperands;
    }
    for (const ValueDecl &v : k.results) {
      results += formatv("  {{{0}, Arity::{1}}, // {2}\n", quoted(v.name),
                         v.arity, name);
      ++nResults;
    }
    for (const AttrDecl &a : k.attrs) {
      attrs += formatv("  {{{0}, AttrType::{1}, Presence::{2}}, // {3}\n",
                       quoted(a.name), a.type, a.presence, name);
      ++nAttrs;
    }
    table += formatv("  {{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}},\n",
                     quoted(name), quoted(k.op), firstOperand,
                     k.operands.size(), firstResult, k.results.size(),
                     firstAttr, k.attrs.size(),
                     k.launched ? "true" : "false");
  }
  if (!nOperands || !nResults || !nAttrs)
    PrintFatalError("the manifest needs at least one operand, result and "
                    "attribute (C++ has no empty arrays)");
  if (std::max({nOperands, nResults, nAttrs}) > 0xffff)
    PrintFatalError("the manifest outgrew its 16-bit indices");

  os << "inline constexpr Value kOperands[] = {\n" << operands << "};\n\n";
  os << "inline constexpr Value kResults[] = {\n" << results << "};\n\n";
  os << "inline constexpr Attr kAttrs[] = {\n" << attrs << "};\n\n";
  os << "/// Sorted by name. {name, op, firstOperand, numOperands, "
        "firstResult, numResults,\n/// firstAttr, numAttrs, launched}\n";
  os << "inline constexpr Kernel kKernels[] = {\n" << table << "};\n";
  return false;
}

mlir::GenRegistration genKernelManifest(
    "gen-kernel-manifest",
    "Generate the kernel manifest (runtime/core/include/kiln/runtime/"
    "KernelManifest.inc)",
    emitKernelManifest);

} // namespace

int main(int argc, char **argv) { return mlir::MlirTblgenMain(argc, argv); }
