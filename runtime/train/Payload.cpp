//===- Payload.cpp - the parts kiln-compile appends -------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "Payload.h"

#include <cstdlib>

namespace kiln::train {

bool parsePayload(const uint8_t *data, size_t size, Payload &out,
                  std::string &err) {
  rt::TrainPayloadParts parts;
  if (!rt::parseTrainPayload(data, size, parts, err))
    return false;
  out.plan = parts[rt::TrainPart::Plan];
  out.config = parts[rt::TrainPart::Config];
  out.model = parts[rt::TrainPart::Model];
  out.eval = parts[rt::TrainPart::Eval];
  out.then = parts[rt::TrainPart::Then];
  return true;
}

bool loadPayload(Payload &out, std::string &err) {
  const char *env = std::getenv("KILN_TRAIN_PAYLOAD");
  std::string path = env && *env ? env : "/proc/self/exe";
  std::string prefix = env && *env ? "KILN_TRAIN_PAYLOAD=" + path + ": " : "";
  out.source = path;
  std::string why;
  if (!out.file.open(path, why)) {
    err = prefix + rt::kNoTrainPayload + " (" + why + ")";
    return false;
  }
  if (!parsePayload(out.file.data(), out.file.size(), out, err)) {
    err = prefix + err;
    return false;
  }
  return true;
}

} // namespace kiln::train
