//===- Kernel.cpp - attributes, registry and kernel helpers -----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "kiln/runtime/Kernel.h"

#include "kiln/runtime/KernelManifest.h"

#include <algorithm>

namespace kiln::rt {

using nlohmann::json;

static const json *lookup(const json *j, const std::string &name) {
  if (!j || !j->is_object())
    return nullptr;
  auto it = j->find(name);
  return it == j->end() ? nullptr : &*it;
}

static const json &require(const json *j, const std::string &name) {
  const json *v = lookup(j, name);
  if (!v)
    throw Error("missing attribute '" + name + "'");
  return *v;
}

[[noreturn]] static void mistyped(const std::string &name, const char *want) {
  throw Error("attribute '" + name + "' is not " + want);
}

void Attrs::checkRead(const std::string &name, Read read) const {
  if (!kernel_)
    return;
  const manifest::Attr *decl = kernel_->attr(name);
  if (!decl)
    throw Error(std::string("kernel '") + kernel_->name +
                "' reads attribute '" + name +
                "', which the kernel manifest does not declare for it");
  using T = manifest::AttrType;
  bool ok = true;
  switch (read) {
  case Read::Any: break;
  // getInt and getBool accept both (a plan may write a flag as 0/1).
  case Read::Int: ok = decl->type == T::Int || decl->type == T::Bool; break;
  case Read::Bool: ok = decl->type == T::Bool || decl->type == T::Int; break;
  case Read::Float: ok = decl->type == T::Float; break;
  case Read::String: ok = decl->type == T::String; break;
  case Read::Ints: ok = decl->type == T::IntArray; break;
  case Read::Strings: ok = decl->type == T::StringArray; break;
  }
  if (!ok)
    throw Error(std::string("kernel '") + kernel_->name +
                "' reads attribute '" + name + "' as another type than " +
                manifest::typeName(decl->type) +
                ", which the kernel manifest declares");
}

bool Attrs::has(const std::string &name) const {
  checkRead(name, Read::Any);
  return lookup(json_, name) != nullptr;
}

int64_t Attrs::getInt(const std::string &name) const {
  checkRead(name, Read::Int);
  const json &v = require(json_, name);
  if (v.is_number_integer())
    return v.get<int64_t>();
  if (v.is_boolean())
    return v.get<bool>() ? 1 : 0;
  mistyped(name, "an integer");
}

int64_t Attrs::getInt(const std::string &name, int64_t dflt) const {
  checkRead(name, Read::Int);
  return has(name) ? getInt(name) : dflt;
}

double Attrs::getFloat(const std::string &name) const {
  checkRead(name, Read::Float);
  const json &v = require(json_, name);
  if (v.is_number())
    return v.get<double>();
  if (v.is_string()) { // non-finite floats are written as strings
    std::string s = v.get<std::string>();
    if (s == "inf")
      return INFINITY;
    if (s == "-inf")
      return -INFINITY;
    if (s == "nan")
      return NAN;
  }
  mistyped(name, "a number");
}

double Attrs::getFloat(const std::string &name, double dflt) const {
  checkRead(name, Read::Float);
  return has(name) ? getFloat(name) : dflt;
}

bool Attrs::getBool(const std::string &name, bool dflt) const {
  checkRead(name, Read::Bool);
  const json *v = lookup(json_, name);
  if (!v)
    return dflt;
  if (v->is_boolean())
    return v->get<bool>();
  if (v->is_number_integer())
    return v->get<int64_t>() != 0;
  mistyped(name, "a boolean");
}

std::string Attrs::getString(const std::string &name,
                             const std::string &dflt) const {
  checkRead(name, Read::String);
  const json *v = lookup(json_, name);
  if (!v)
    return dflt;
  if (!v->is_string())
    mistyped(name, "a string");
  return v->get<std::string>();
}

std::vector<int64_t> Attrs::getInts(const std::string &name) const {
  checkRead(name, Read::Ints);
  const json &v = require(json_, name);
  if (!v.is_array())
    mistyped(name, "an integer array");
  std::vector<int64_t> out;
  out.reserve(v.size());
  for (const json &e : v) {
    if (!e.is_number_integer())
      mistyped(name, "an integer array");
    out.push_back(e.get<int64_t>());
  }
  return out;
}

std::vector<std::string> Attrs::getStrings(const std::string &name,
                                          const std::vector<std::string> &dflt) const {
  checkRead(name, Read::Strings);
  if (!has(name))
    return dflt;
  const json &v = require(json_, name);
  if (!v.is_array())
    mistyped(name, "a string array");
  std::vector<std::string> out;
  for (const json &e : v) {
    if (!e.is_string())
      mistyped(name, "a string array");
    out.push_back(e.get<std::string>());
  }
  return out;
}

std::vector<int64_t> Attrs::getInts(const std::string &name,
                                    const std::vector<int64_t> &dflt) const {
  checkRead(name, Read::Ints);
  return has(name) ? getInts(name) : dflt;
}

void KernelRegistry::add(const std::string &name, KernelFactory factory) {
  if (const manifest::Kernel *k = manifest::find(name))
    factory = [k, f = std::move(factory)](const KernelSpec &spec) {
      KernelSpec checked = spec;
      checked.attrs = spec.attrs.checkedAgainst(k);
      return f(checked);
    };
  factories_[name] = std::move(factory);
}

const KernelFactory *KernelRegistry::find(const std::string &name) const {
  auto it = factories_.find(name);
  return it == factories_.end() ? nullptr : &it->second;
}

std::vector<std::string> KernelRegistry::names() const {
  std::vector<std::string> out;
  for (const auto &kv : factories_)
    out.push_back(kv.first);
  std::sort(out.begin(), out.end());
  return out;
}

void checkRegistryAgainstManifest(const KernelRegistry &r) {
  const std::vector<std::string> &extra = runtimeOnlyKernels();
  for (const std::string &name : r.names())
    if (!manifest::find(name) &&
        std::find(extra.begin(), extra.end(), name) == extra.end())
      throw Error("kernel '" + name +
                  "' is registered but not in the kernel manifest (declare "
                  "it in ODS, or list it in runtimeOnlyKernels())");
}

void expectArity(const KernelSpec &spec, size_t nin, size_t nout) {
  if (spec.inputs.size() != nin || spec.outputs.size() != nout)
    throw Error("kernel '" + spec.kernel + "' takes " + std::to_string(nin) +
                " inputs and " + std::to_string(nout) + " outputs, the step has " +
                std::to_string(spec.inputs.size()) + " and " +
                std::to_string(spec.outputs.size()));
}

void unsupportedType(const KernelSpec &spec, DType t) {
  throw Error(std::string("unsupported element type ") + dtypeName(t) +
              " for kernel '" + spec.kernel + "'");
}

} // namespace kiln::rt
