//===- ExportOnnx.h - the trained model as ONNX -----------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// --export-onnx writes the model embedded in the payload with every
// initializer named like a param of the plan (trained weights, updated state
// such as BatchNorm running statistics) replaced by the param's current
// value: raw_data, the other data fields cleared, data type and dims kept.
// Models that keep tensors in external data files are refused. A model
// trained with --qat leaves as QDQ (QuantizeLinear/DequantizeLinear).
//===----------------------------------------------------------------------===//
#ifndef KILN_TRAIN_EXPORTONNX_H
#define KILN_TRAIN_EXPORTONNX_H

#include "Config.h"

#include "kiln/runtime/Runtime.h"

#include <map>
#include <string>
#include <string_view>

namespace kiln::train {

/// Checks up front that the model parses and has no external data; throws
/// UserError ("--export-onnx FILE: ...").
void checkExportable(std::string_view model, const std::string &outPath);

/// Writes the updated model atomically; returns the number of initializers
/// replaced. `whole` (may be null) holds parameters the program keeps split
/// over the ranks (ZeRO-3), gathered: they are written from it. Throws
/// UserError.
/// `qat` (may be null): a QAT model's sites; the export is then a QDQ
/// model: each site's weight an int8 initializer (per output channel,
/// zero point 0) behind a DequantizeLinear, its activation input through
/// QuantizeLinear/DequantizeLinear (uint8, per tensor) with the scale and
/// zero point of its observer (kiln/runtime/Quantize.h). Needs opset >= 13.
/// `prune` (may be null): with l1-channel classes whose masks have pruned
/// channels, the initializers are cut to the kept channels (the smaller
/// model), as kiln-compile cuts them when it prunes at step 0.
size_t exportOnnx(std::string_view model, const rt::Program &program,
                  const std::string &outPath,
                  const std::map<std::string, rt::HostTensor> *whole = nullptr,
                  const QatConfig *qat = nullptr,
                  const PruneConfig *prune = nullptr);

} // namespace kiln::train

#endif // KILN_TRAIN_EXPORTONNX_H
