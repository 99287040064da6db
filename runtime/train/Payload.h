//===- Payload.h - the parts kiln-compile appends ---------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// kiln-compile appends to a copy of this executable: the train plan, the
// config JSON, the ONNX model, the optional eval plan and a 72-byte trailer,
// whose layout, writer and parser are kiln/runtime/TrainPayload.h.
// The payload is read from /proc/self/exe, or from the file named by
// $KILN_TRAIN_PAYLOAD (testing: a bare payload with the same trailer).
//===----------------------------------------------------------------------===//
#ifndef KILN_TRAIN_PAYLOAD_H
#define KILN_TRAIN_PAYLOAD_H

#include "Util.h"

#include "kiln/runtime/TrainPayload.h"

#include <string>
#include <string_view>

namespace kiln::train {

struct Payload {
  /// Where it was read from ("/proc/self/exe" or $KILN_TRAIN_PAYLOAD).
  std::string source;
  std::string_view plan, config, model, eval; // eval empty when absent
  /// The payload the run continues on after --prune-at's step (a nested
  /// one; empty when absent).
  std::string_view then;
  MappedFile file;                            // owns the bytes above
};

/// Reads the trailer and checks that every part lies before it. On failure
/// `err` is "not a Kiln training executable (no payload)" (prefixed with
/// "KILN_TRAIN_PAYLOAD=FILE: " when the variable names the file, and with a
/// reason after a colon when the trailer is there but damaged).
bool loadPayload(Payload &out, std::string &err);

/// Splits a payload held in memory (rt::parseTrainPayload's checks).
bool parsePayload(const uint8_t *data, size_t size, Payload &out,
                  std::string &err);

} // namespace kiln::train

#endif // KILN_TRAIN_PAYLOAD_H
