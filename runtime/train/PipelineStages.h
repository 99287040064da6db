//===- PipelineStages.h - a pipeline run's parameters on rank 0 -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// With --mesh pp=S each stage's ranks hold only that stage's parameters
// (and optimizer state). Rank 0 evaluates and exports the whole model, so
// before it does, the first rank of every other stage sends it its
// parameters.
//===----------------------------------------------------------------------===//
#ifndef KILN_TRAIN_PIPELINESTAGES_H
#define KILN_TRAIN_PIPELINESTAGES_H

#include "Config.h"

#include "kiln/comm/Communicator.h"
#include "kiln/runtime/Runtime.h"

#include <map>
#include <string>

namespace kiln::train {

/// Collective over `world` (every rank calls it): on rank 0, `whole` gains
/// every parameter of the other stages' plans, by name; on the other ranks
/// it is unchanged. Fails (kiln::train::fail) on a damaged transfer.
void gatherStages(comm::Communicator &world, const rt::Program &program,
                  const Config &config, std::map<std::string, rt::HostTensor> &whole);

/// The record of named tensors gatherStages sends, and its inverse (which
/// bounds-checks everything it reads: false with `err` on a damaged one).
std::string packTensors(const rt::Program &program);
bool unpackTensors(const std::string &bytes,
                   std::map<std::string, rt::HostTensor> &out, std::string &err);

} // namespace kiln::train

#endif // KILN_TRAIN_PIPELINESTAGES_H
