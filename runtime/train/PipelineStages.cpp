//===- PipelineStages.cpp - a pipeline run's parameters on rank 0 --------===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "PipelineStages.h"

#include "Util.h"

#include "kiln/runtime/DType.h"
#include "kiln/runtime/PlanFile.h"
#include "kiln/runtime/TrainPayload.h"

#include <nlohmann/json.hpp>

#include <cstring>

namespace kiln::train {

namespace {
constexpr int kSizeTag = 29001, kBytesTag = 29002;

void putU64(std::string &out, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out.push_back(char((v >> (8 * i)) & 0xff));
}
} // namespace

// Per tensor: u64 name length, the name, u64 role length, the role, u64
// dtype name length, the dtype name, u64 rank, rank x i64 dims, u64 byte count, the bytes.
std::string packTensors(const rt::Program &program,
                        const std::map<std::string, rt::HostTensor> *whole) {
  std::string out;
  std::string err;
  for (const std::string &name : program.paramNames()) {
    rt::HostTensor t;
    if (auto w = whole ? whole->find(name) : decltype(whole->end())();
        whole && w != whole->end())
      t = w->second; // a split parameter, joined
    else if (!program.getParam(name, t, err))
      fail("pipeline: " + err);
    const char *dt = rt::dtypeName(t.dtype());
    const std::string role = program.paramRole(name);
    putU64(out, name.size());
    out += name;
    putU64(out, role.size());
    out += role;
    putU64(out, std::strlen(dt));
    out += dt;
    putU64(out, t.shape().size());
    for (int64_t d : t.shape())
      putU64(out, (uint64_t)d);
    putU64(out, t.bytes());
    out.append(static_cast<const char *>(t.data()), t.bytes());
  }
  return out;
}

bool unpackTensors(const std::string &bytes,
                   std::map<std::string, rt::HostTensor> &out,
                   std::map<std::string, std::string> *roles, std::string &err) {
  size_t at = 0;
  auto u64 = [&](uint64_t &v) {
    if (bytes.size() - at < 8)
      return false;
    v = 0;
    for (int i = 0; i < 8; ++i)
      v |= uint64_t(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
    at += 8;
    return true;
  };
  auto str = [&](std::string &s) {
    uint64_t n;
    if (!u64(n) || n > bytes.size() - at)
      return false;
    s.assign(bytes, at, n);
    at += n;
    return true;
  };
  while (at < bytes.size()) {
    std::string name, role, dt;
    uint64_t rank, n;
    rt::DType dtype;
    if (!str(name) || !str(role) || !rt::isParamRole(role) || !str(dt) ||
        !rt::parseDType(dt, dtype) || !u64(rank) || rank > 16) {
      err = "a damaged tensor record at byte " + std::to_string(at);
      return false;
    }
    rt::TensorDesc desc{dtype, {}};
    for (uint64_t k = 0; k < rank; ++k) {
      uint64_t d;
      if (!u64(d) || d > (uint64_t(1) << 40)) {
        err = "tensor '" + name + "': a damaged shape";
        return false;
      }
      desc.shape.push_back((int64_t)d);
    }
    if (!u64(n) || n != desc.bytes() || n > bytes.size() - at) {
      err = "tensor '" + name + "' (" + desc.str() + "): " + std::to_string(n) +
            " bytes do not match its type or the record";
      return false;
    }
    rt::HostTensor t(desc);
    if (n)
      std::memcpy(t.data(), bytes.data() + at, n);
    at += n;
    out[name] = std::move(t);
    if (roles)
      (*roles)[name] = role;
  }
  return true;
}

void gatherStages(comm::Communicator &world, const rt::Program &program,
                  const Config &config, std::map<std::string, rt::HostTensor> &whole,
                  std::map<std::string, std::string> *roles) {
  const int64_t stageRanks = config.stageRanks();
  const int rank = world.rank();
  if (rank == 0) {
    for (int64_t s = 1; s < config.pp; ++s) {
      const int from = (int)(s * stageRanks);
      uint64_t size = 0;
      world.recv(&size, 1, rt::DType::U64, from, kSizeTag).wait();
      if (size > (uint64_t(1) << 40))
        fail("pipeline: stage " + std::to_string(s) + " announced " +
             std::to_string(size) + " bytes of parameters");
      std::string bytes(size, '\0');
      if (size)
        world.recv(bytes.data(), size, rt::DType::U8, from, kBytesTag).wait();
      std::string err;
      if (!unpackTensors(bytes, whole, roles, err))
        fail("pipeline: stage " + std::to_string(s) + "'s parameters: " + err);
    }
  } else if (rank % stageRanks == 0) {
    std::string bytes = packTensors(program, &whole);
    uint64_t size = bytes.size();
    world.send(&size, 1, rt::DType::U64, 0, kSizeTag).wait();
    if (size)
      world.send(bytes.data(), size, rt::DType::U8, 0, kBytesTag).wait();
  }
}

std::vector<std::string> stageParamNames(std::string_view plans) {
  std::vector<std::string> names;
  uint64_t count = 1;
  std::string err;
  for (uint64_t s = 0; s < count; ++s) {
    std::string_view plan;
    if (!rt::pipelinePlan(plans, s, plan, count, err))
      fail("payload plan: " + err);
    rt::PlanContainer c;
    if (!rt::parsePlanContainer(plan.data(), plan.size(), c, err))
      fail("payload plan of stage " + std::to_string(s) + ": " + err);
    nlohmann::json h = nlohmann::json::parse(c.json, nullptr, /*allow_exceptions=*/false);
    const auto values = h.is_object() ? h.find("values") : h.end();
    if (!h.is_object() || values == h.end() || !values->is_array())
      fail("payload plan of stage " + std::to_string(s) + ": its header has no 'values'");
    for (const nlohmann::json &v : *values) {
      if (!v.is_object())
        continue;
      auto kind = v.find("kind"), name = v.find("name");
      if (kind != v.end() && *kind == "param" && name != v.end() && name->is_string())
        names.push_back(name->get<std::string>());
    }
  }
  return names;
}

} // namespace kiln::train
