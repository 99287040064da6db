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
#include <string_view>
#include <vector>

namespace kiln::train {

/// Collective over `world` (every rank calls it): on rank 0, `whole` gains
/// every parameter of the other stages' plans, by name (the other ranks'
/// entries of `whole`, their split parameters joined, replace their
/// blocks), and `roles` (if
/// given) their plan roles ("weight", "optimizer", ...); on the other ranks
/// both are unchanged. Fails (kiln::train::fail) on a damaged transfer.
void gatherStages(comm::Communicator &world, const rt::Program &program,
                  const Config &config, std::map<std::string, rt::HostTensor> &whole,
                  std::map<std::string, std::string> *roles = nullptr);

/// The record of named tensors gatherStages sends, and its inverse (which
/// bounds-checks everything it reads: false with `err` on a damaged one).
/// `whole` (if given) replaces the parameters it names (split ones, joined).
std::string packTensors(const rt::Program &program,
                        const std::map<std::string, rt::HostTensor> *whole = nullptr);
bool unpackTensors(const std::string &bytes,
                   std::map<std::string, rt::HostTensor> &out,
                   std::map<std::string, std::string> *roles, std::string &err);

/// The parameter names of every stage's plan in a pipeline payload's plan
/// part (rt::pipelinePlans), read from the plans' headers: the whole
/// model's parameters, which a checkpoint of the run holds. Fails on a
/// damaged part.
std::vector<std::string> stageParamNames(std::string_view plans);

} // namespace kiln::train

#endif // KILN_TRAIN_PIPELINESTAGES_H
