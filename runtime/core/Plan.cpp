//===- Plan.cpp - parsing and checking a plan -------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The container, the JSON header and every check that needs no kernel
// (docs/PlanFormat.md). Any byte string either parses into a consistent
// ParsedPlan or throws an Error with a one-line message: indices are in
// range, sizes do not overflow, data lies inside the blob and the arena, and
// a step of a kernel the kernel manifest declares carries only attributes
// the manifest declares for it, each of its declared type.
//===----------------------------------------------------------------------===//
#include "PlanInternal.h"

#include "kiln/runtime/KernelManifest.h"
#include "kiln/runtime/PlanFile.h"
#include "kiln/runtime/Runtime.h"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace kiln::rt::detail {

using nlohmann::json;

namespace {

/// Sizes above this are refused (numel stays an int64_t, byte counts and
/// offsets cannot overflow when added).
constexpr uint64_t kMaxBytes = uint64_t(1) << 60;

[[noreturn]] void fail(const std::string &msg) { throw Error(msg); }

const json *field(const json &obj, const char *key) {
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

const json &need(const json &obj, const char *key, const std::string &where) {
  const json *v = field(obj, key);
  if (!v)
    fail(where + "has no '" + key + "'");
  return *v;
}

bool asU64(const json &v, uint64_t &out) {
  if (v.is_number_unsigned()) {
    out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer()) {
    int64_t s = v.get<int64_t>();
    if (s < 0)
      return false;
    out = (uint64_t)s;
    return true;
  }
  return false;
}

uint64_t needU64(const json &obj, const char *key, const std::string &where) {
  uint64_t v;
  if (!asU64(need(obj, key, where), v))
    fail(where + "'" + key + "' must be a non-negative integer");
  return v;
}

/// A value index, or -1 when `allowAbsent`.
int64_t valueRef(const json &v, size_t numValues, bool allowAbsent,
                 const std::string &what) {
  if (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() == -1) {
    if (allowAbsent)
      return -1;
    fail(what + " is -1 (only a step's inputs may be absent)");
  }
  uint64_t u;
  if (!asU64(v, u))
    fail(what + " must be a value index");
  if (u >= numValues)
    fail(what + " is value " + std::to_string(u) + ", out of range (the plan has " +
         std::to_string(numValues) + " values)");
  return (int64_t)u;
}

std::string needString(const json &obj, const char *key,
                       const std::string &where) {
  const json &v = need(obj, key, where);
  if (!v.is_string())
    fail(where + "'" + key + "' must be a string");
  return v.get<std::string>();
}

const char *kindName(ValueKind k) {
  switch (k) {
  case ValueKind::Input: return "input";
  case ValueKind::Param: return "param";
  case ValueKind::Constant: return "constant";
  case ValueKind::Arena: return "arena";
  case ValueKind::View: return "view";
  }
  return "?";
}

void parseValue(const json &v, size_t i, const ParsedPlan &plan,
                PlanValue &out) {
  std::string where = "value " + std::to_string(i) + ": ";
  if (!v.is_object())
    fail(where + "must be an object");
  std::string dt = needString(v, "dtype", where);
  if (!parseDType(dt, out.desc.dtype))
    fail(where + "unknown dtype '" + dt + "'");
  const json &shape = need(v, "shape", where);
  if (!shape.is_array())
    fail(where + "'shape' must be an array of non-negative integers");
  // The product of the non-zero dimensions must stay small, so that numel()
  // cannot overflow in any order of multiplication.
  uint64_t nonZero = 1;
  bool hasZero = false;
  for (const json &d : shape) {
    uint64_t n;
    if (!asU64(d, n))
      fail(where + "'shape' must be an array of non-negative integers");
    if (n > kMaxBytes || (n && __builtin_mul_overflow(nonZero, n, &nonZero)) ||
        nonZero > kMaxBytes / dtypeSize(out.desc.dtype))
      fail(where + "shape is too large");
    hasZero |= n == 0;
    out.desc.shape.push_back((int64_t)n);
  }
  uint64_t bytes = hasZero ? 0 : nonZero * dtypeSize(out.desc.dtype);
  out.bytes = (size_t)bytes;

  std::string kind = needString(v, "kind", where);
  if (const json *n = field(v, "name")) {
    if (!n->is_string())
      fail(where + "'name' must be a string");
    out.name = n->get<std::string>();
  }
  out.root = (int64_t)i;
  if (kind == "input") {
    out.kind = ValueKind::Input;
    out.index = (int64_t)std::min<uint64_t>(needU64(v, "index", where), kMaxBytes);
  } else if (kind == "param" || kind == "constant") {
    out.kind = kind == "param" ? ValueKind::Param : ValueKind::Constant;
    if (out.kind == ValueKind::Param && out.name.empty())
      fail(where + "a parameter needs a 'name'");
    if (out.kind == ValueKind::Param)
      if (const json *r = field(v, "role")) {
        if (!r->is_string())
          fail(where + "'role' must be a string");
        out.role = r->get<std::string>();
        if (!isParamRole(out.role))
          fail(where + "unknown role '" + out.role +
               "' (weight, state, frozen or optimizer)");
      }
    uint64_t off = needU64(v, "data_offset", where);
    uint64_t n = needU64(v, "data_bytes", where);
    uint64_t blocks = 1;
    if (out.kind == ValueKind::Param && field(v, "blocks")) {
      blocks = needU64(v, "blocks", where);
      if (blocks < 1 || blocks > 65536)
        fail(where + "'blocks' is " + std::to_string(blocks) +
             ", not in [1, 65536]");
    }
    if (n / blocks != bytes || n % blocks)
      fail(where + "'data_bytes' is " + std::to_string(n) + ", " +
           out.desc.str() + (blocks > 1 ? " in " + std::to_string(blocks) +
                                              " blocks"
                                        : std::string()) +
           " needs " + std::to_string(bytes * blocks));
    out.blocks = (int64_t)blocks;
    if (out.kind == ValueKind::Param)
      if (const json *ax = field(v, "block_axes")) {
        if (!ax->is_array() || ax->empty() || ax->size() > 8 || blocks < 2)
          fail(where + "'block_axes' must be 1 to 8 mesh axis names, for "
                       "blocks > 1");
        for (const json &a : *ax) {
          if (!a.is_string() || a.get<std::string>().empty() ||
              a.get<std::string>().size() > 64)
            fail(where + "'block_axes' must hold mesh axis names");
          out.blockAxes.push_back(a.get<std::string>());
        }
      }
    if (off > plan.blob.size() || n > plan.blob.size() - off)
      fail(where + "data [" + std::to_string(off) + ", +" + std::to_string(n) +
           ") runs past the end of the " + std::to_string(plan.blob.size()) +
           "-byte data blob");
    if (off % dtypeSize(out.desc.dtype))
      fail(where + "'data_offset' " + std::to_string(off) +
           " is not a multiple of the element size");
    out.dataOffset = off;
  } else if (kind == "arena") {
    out.kind = ValueKind::Arena;
    uint64_t off = needU64(v, "offset", where);
    if (off % plan.alignment)
      fail(where + "arena offset " + std::to_string(off) +
           " is not a multiple of the alignment " +
           std::to_string(plan.alignment));
    if (off > plan.arenaBytes || bytes > plan.arenaBytes - off)
      fail(where + "arena bytes [" + std::to_string(off) + ", +" +
           std::to_string(bytes) + ") run past arena_bytes " +
           std::to_string(plan.arenaBytes));
    out.offset = off;
  } else if (kind == "view") {
    out.kind = ValueKind::View;
    uint64_t src = needU64(v, "source", where);
    if (src >= i)
      fail(where + "view source " + std::to_string(src) +
           " is not an earlier value");
    const PlanValue &s = plan.values[src];
    if (s.bytes != bytes)
      fail(where + "view " + out.desc.str() + " has " + std::to_string(bytes) +
           " bytes, its source (value " + std::to_string(src) + ", " +
           s.desc.str() + ") has " + std::to_string(s.bytes));
    out.source = (int64_t)src;
    out.root = s.root;
  } else {
    fail(where + "unknown kind '" + kind + "'");
  }
}

/// Whether `v` is a JSON value of manifest type `t`, as Attrs reads it.
bool hasType(const json &v, manifest::AttrType t) {
  auto isFloat = [](const json &e) {
    if (e.is_number())
      return true;
    if (!e.is_string()) // non-finite floats are written as strings
      return false;
    const std::string &s = e.get_ref<const std::string &>();
    return s == "inf" || s == "-inf" || s == "nan";
  };
  switch (t) {
  case manifest::AttrType::Int:
  case manifest::AttrType::Bool:
    return v.is_number_integer() || v.is_boolean();
  case manifest::AttrType::Float:
    return isFloat(v);
  case manifest::AttrType::String:
    return v.is_string();
  case manifest::AttrType::IntArray:
    return v.is_array() && std::all_of(v.begin(), v.end(), [](const json &e) {
             return e.is_number_integer();
           });
  case manifest::AttrType::FloatArray:
    return v.is_array() && std::all_of(v.begin(), v.end(), isFloat);
  case manifest::AttrType::StringArray:
    return v.is_array() && std::all_of(v.begin(), v.end(), [](const json &e) {
             return e.is_string();
           });
  case manifest::AttrType::Elements:
    return false; // tensor data travels as a constant value, never an attribute
  }
  return false;
}

/// A step of a manifest kernel carries only declared attributes of their
/// declared types (docs/PlanFormat.md, "Kernel manifest"). Names the manifest
/// lacks are left to the registry: a test may register stand-in kernels.
void checkStepAttrs(size_t index, const PlanStep &step) {
  const manifest::Kernel *k = manifest::find(step.kernel);
  if (!k || !step.attrs)
    return;
  for (auto it = step.attrs->begin(); it != step.attrs->end(); ++it) {
    const manifest::Attr *decl = k->attr(it.key());
    if (!decl)
      fail(stepLabel(index, step) + ": attribute '" + it.key() +
           "' is not declared for kernel '" + step.kernel +
           "' by the kernel manifest");
    // The JSON type, not the value: a value may nest too deep to print.
    if (!hasType(it.value(), decl->type))
      fail(stepLabel(index, step) + ": attribute '" + it.key() +
           "' is of JSON type " + it.value().type_name() +
           ", the kernel manifest declares " + manifest::typeName(decl->type));
  }
}

void parseHeader(const json &h, ParsedPlan &plan) {
  if (!h.is_object())
    fail("plan header is not a JSON object");
  const std::string top = "plan header ";
  if (needString(h, "format", top) != "kiln-plan")
    fail("plan header 'format' is not \"kiln-plan\"");
  uint64_t version = needU64(h, "version", top);
  if (version != kPlanVersion)
    fail("plan header says version " + std::to_string(version) +
         ", this runtime reads version " + std::to_string(kPlanVersion));
  if (const json *t = field(h, "target"))
    if (!t->is_string() || t->get<std::string>() != "cpu")
      fail("plan target " + (t->is_string() ? "'" + t->get<std::string>() + "'"
                                            : std::string("(not a string)")) +
           " is not supported (this runtime runs 'cpu')");
  if (const json *f = field(h, "function"))
    if (f->is_string())
      plan.function = f->get<std::string>();
  if (field(h, "alignment")) {
    plan.alignment = needU64(h, "alignment", top);
    if (plan.alignment == 0 || (plan.alignment & (plan.alignment - 1)) ||
        plan.alignment > 4096)
      fail("plan alignment " + std::to_string(plan.alignment) +
           " is not a power of two up to 4096");
  }
  plan.arenaBytes = needU64(h, "arena_bytes", top);
  if (plan.arenaBytes > kMaxBytes)
    fail("plan arena_bytes " + std::to_string(plan.arenaBytes) + " is too large");

  const json &values = need(h, "values", top);
  const json &inputs = need(h, "inputs", top);
  const json &outputs = need(h, "outputs", top);
  const json &steps = need(h, "steps", top);
  if (!values.is_array() || !inputs.is_array() || !outputs.is_array() ||
      !steps.is_array())
    fail("plan 'values', 'inputs', 'outputs' and 'steps' must be arrays");

  // Values.
  plan.values.reserve(values.size());
  std::map<int64_t, size_t> inputIndex;
  std::unordered_map<std::string, size_t> paramNames;
  for (size_t i = 0; i < values.size(); ++i) {
    PlanValue v;
    parseValue(values[i], i, plan, v);
    std::string where = "value " + std::to_string(i) + ": ";
    if (v.kind == ValueKind::Input) {
      if (v.index >= (int64_t)inputs.size())
        fail(where + "input index " + std::to_string(v.index) +
             " is out of range (the plan has " + std::to_string(inputs.size()) +
             " inputs)");
      auto [it, fresh] = inputIndex.emplace(v.index, i);
      if (!fresh)
        fail(where + "input index " + std::to_string(v.index) +
             " is used by value " + std::to_string(it->second) + " too");
    } else if (v.kind == ValueKind::Param) {
      auto [it, fresh] = paramNames.emplace(v.name, i);
      if (!fresh)
        fail(where + "parameter name '" + v.name + "' is used by value " +
             std::to_string(it->second) + " too");
    }
    plan.values.push_back(std::move(v));
  }

  // Inputs.
  for (size_t k = 0; k < inputs.size(); ++k) {
    std::string what = "inputs[" + std::to_string(k) + "]";
    int64_t idx = valueRef(inputs[k], plan.values.size(), false, what);
    const PlanValue &v = plan.values[idx];
    if (v.kind != ValueKind::Input)
      fail(what + " is value " + std::to_string(idx) + ", a " +
           kindName(v.kind) + " value, not an input");
    if (v.index != (int64_t)k)
      fail(what + " is value " + std::to_string(idx) + ", whose input index is " +
           std::to_string(v.index));
    plan.inputs.push_back(idx);
  }
  if (inputIndex.size() != plan.inputs.size()) // unreachable given the above
    fail("plan 'inputs' does not list every input value");

  // Outputs.
  const json *names = field(h, "output_names");
  if (names && (!names->is_array() || names->size() != outputs.size()))
    fail("plan 'output_names' must be an array as long as 'outputs' (" +
         std::to_string(outputs.size()) + ")");
  for (size_t k = 0; k < outputs.size(); ++k) {
    plan.outputs.push_back(valueRef(outputs[k], plan.values.size(), false,
                                    "outputs[" + std::to_string(k) + "]"));
    std::string name = "output_" + std::to_string(k);
    if (names) {
      const json &n = (*names)[k];
      if (!n.is_string())
        fail("output_names[" + std::to_string(k) + "] must be a string");
      name = n.get<std::string>();
    }
    plan.outputNames.push_back(std::move(name));
  }

  // Steps.
  plan.steps.reserve(steps.size());
  for (size_t s = 0; s < steps.size(); ++s) {
    const json &j = steps[s];
    std::string where = "step " + std::to_string(s) + ": ";
    if (!j.is_object())
      fail(where + "must be an object");
    PlanStep step;
    step.kernel = needString(j, "kernel", where);
    if (const json *loc = field(j, "loc")) {
      if (!loc->is_string())
        fail(where + "'loc' must be a string");
      step.loc = loc->get<std::string>();
    }
    if (const json *flops = field(j, "flops")) {
      if (!flops->is_number_integer() || flops->get<int64_t>() < 0)
        fail(where + "'flops' must be an integer >= 0");
      step.flops = flops->get<uint64_t>();
    }
    const json &ins = need(j, "inputs", where);
    const json &outs = need(j, "outputs", where);
    if (!ins.is_array() || !outs.is_array())
      fail(where + "'inputs' and 'outputs' must be arrays of value indices");
    for (size_t k = 0; k < ins.size(); ++k)
      step.inputs.push_back(valueRef(ins[k], plan.values.size(), true,
                                     where + "input " + std::to_string(k)));
    for (size_t k = 0; k < outs.size(); ++k) {
      int64_t idx = valueRef(outs[k], plan.values.size(), false,
                             where + "output " + std::to_string(k));
      const PlanValue &root = plan.values[plan.values[idx].root];
      if (root.kind == ValueKind::Input || root.kind == ValueKind::Constant)
        fail(where + "output " + std::to_string(k) + " is value " +
             std::to_string(idx) + ", which is read-only (" +
             (root.kind == ValueKind::Input ? "an input" : "a constant") +
             (idx != plan.values[idx].root ? ", through a view" : "") + ")");
      step.outputs.push_back(idx);
    }
    if (const json *attrs = field(j, "attrs")) {
      if (!attrs->is_object())
        fail(where + "'attrs' must be an object");
      step.attrs = attrs;
    }
    checkStepAttrs(s, step);
    plan.steps.push_back(std::move(step));
  }
}

} // namespace

std::string stepLabel(size_t index, const PlanStep &step) {
  std::string s = "step " + std::to_string(index) + " ('" + step.kernel + "'";
  if (!step.loc.empty())
    s += " at " + step.loc;
  return s + ")";
}

void parsePlan(const void *data, size_t size, ParsedPlan &out) {
  PlanContainer c;
  std::string err;
  if (!parsePlanContainer(data, size, c, err, kPlanVersion))
    fail(err);
  json &header = out.header;
  try {
    header = json::parse(c.json.begin(), c.json.end());
  } catch (const json::exception &e) {
    std::string what = e.what();
    for (char &ch : what)
      if (ch == '\n' || ch == '\r')
        ch = ' ';
    fail("plan header is not valid JSON: " + what);
  }
  out.blob.assign(c.blob.data(), c.blob.size());
  try {
    parseHeader(header, out);
  } catch (const json::exception &e) { // a JSON access the checks missed
    fail(std::string("malformed plan header: ") + e.what());
  }
}

} // namespace kiln::rt::detail
