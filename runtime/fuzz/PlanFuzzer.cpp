//===- PlanFuzzer.cpp - libFuzzer target: Program::load ---------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Any byte string either loads or is refused with a one-line message (the
// contract of Runtime.h); a crash, a sanitizer report or a multi-line
// message is a bug. A program that loads and is small (inputs, arena,
// parameters under 256 KiB each) is also run once on patterned inputs, so that
// the kernels' factories and the executor see what a hostile plan asks of
// them. Plans that declare huge values or arenas are skipped (see
// declaresLittle). Seeds: corpus/plan/ (scripts/fuzz.sh plan).
//===----------------------------------------------------------------------===//
#include "kiln/runtime/PlanFile.h"
#include "kiln/runtime/Runtime.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace kiln::rt;

namespace {

// Smaller than the 1 MiB a test would allow: a kernel's work grows with the
// product of its operands' sizes (a convolution's output times its window),
// and a plan that is merely expensive is not a bug.
constexpr size_t kMaxRunBytes = size_t(256) << 10;

void checkMessage(const std::string &err, const char *what) {
  if (err.empty() || err.find('\n') != std::string::npos) {
    std::fprintf(stderr, "%s: bad error message: '%s'\n", what, err.c_str());
    std::abort();
  }
}

/// A plan may rightly allocate what it declares (a 3 GiB arena is a big
/// model, not a bug), so inputs that declare more than this are skipped; any
/// allocation over libFuzzer's -malloc_limit_mb (= -rss_limit_mb) by a plan
/// that declares less is a bug: memory sized by an attribute, not a shape.
constexpr double kMaxDeclaredBytes = double(256 << 20);

bool declaresLittle(const uint8_t *data, size_t size) {
  using nlohmann::json;
  PlanContainer c;
  std::string err;
  if (!parsePlanContainer(data, size, c, err))
    return true;
  json h = json::parse(c.json.begin(), c.json.end(), nullptr, false);
  if (!h.is_object())
    return true;
  auto a = h.find("arena_bytes");
  if (a != h.end() && a->is_number() && a->get<double>() > kMaxDeclaredBytes)
    return false;
  auto values = h.find("values");
  if (values == h.end() || !values->is_array())
    return true;
  for (const json &v : *values) {
    auto s = v.is_object() ? v.find("shape") : v.end();
    if (!v.is_object() || s == v.end() || !s->is_array())
      continue;
    double bytes = 8;
    for (const json &d : *s)
      if (d.is_number())
        bytes *= std::max(0.0, d.get<double>());
    if (bytes > kMaxDeclaredBytes)
      return false;
  }
  return true;
}

/// Small values that are valid indices for most index operands (labels of
/// three or more classes), and >= 1 in a scalar (an optimizer's step count).
void fill(HostTensor &t) {
  uint8_t *p = static_cast<uint8_t *>(t.data());
  size_t n = t.numel();
  for (size_t i = 0; i < n; ++i) {
    switch (t.dtype()) {
    case DType::F32: reinterpret_cast<float *>(p)[i] = 0.25f * float(i % 7) - 0.5f; break;
    case DType::F64: reinterpret_cast<double *>(p)[i] = 0.25 * double(i % 7) - 0.5; break;
    case DType::I64: reinterpret_cast<int64_t *>(p)[i] = int64_t((i + 1) % 3); break;
    case DType::I32: reinterpret_cast<int32_t *>(p)[i] = int32_t((i + 1) % 3); break;
    case DType::Bool: p[i] = uint8_t(i & 1); break;
    default: break; // zeros
    }
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string err;
  static const bool verbose = std::getenv("KILN_FUZZ_VERBOSE") != nullptr;
  if (!declaresLittle(data, size))
    return 0;
  auto p = Program::load(data, size, err);
  if (!p) {
    checkMessage(err, "load");
    if (verbose)
      std::fprintf(stderr, "load: %s\n", err.c_str());
    return 0;
  }
  if (p->arenaBytes() > kMaxRunBytes)
    return 0;
  for (const std::string &name : p->paramNames()) {
    TensorDesc d;
    if (!p->getParamDesc(name, d) || d.bytes() > kMaxRunBytes)
      return 0;
  }
  std::vector<HostTensor> ins;
  for (const TensorDesc &d : p->inputDescs()) {
    if (d.bytes() > kMaxRunBytes)
      return 0;
    ins.emplace_back(d);
    fill(ins.back());
  }
  std::vector<const HostTensor *> in;
  for (const HostTensor &t : ins)
    in.push_back(&t);
  if (!p->checkInputs(in).empty()) {
    std::fprintf(stderr, "checkInputs refuses inputs of the declared types: %s\n",
                 p->checkInputs(in).c_str());
    std::abort();
  }
  std::vector<HostTensor> out;
  if (!p->run(in, out, err)) {
    checkMessage(err, "run");
    if (verbose)
      std::fprintf(stderr, "run: %s\n", err.c_str());
  } else if (verbose) {
    std::fprintf(stderr, "ran: %zu steps\n", p->numSteps());
  }
  if (out.size() != p->outputDescs().size() && err.empty())
    std::abort();
  return 0;
}
