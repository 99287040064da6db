//===- Config.cpp - the training config in the payload ----------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "Config.h"

#include "Util.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

namespace kiln::train {

using nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string &why) {
  fail("payload config: " + why);
}

using Key = rt::TrainConfigKey;

const char *key(Key k) { return rt::trainConfigKey(k); }

const json *field(const json &obj, Key k) {
  auto it = obj.find(key(k));
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

/// A string field; the table's default (or "") when absent or null.
std::string getString(const json &obj, Key k, const std::string &where = "") {
  const json *v = field(obj, k);
  if (!v) {
    const char *d = rt::trainConfigField(k).dflt.string;
    return d ? d : "";
  }
  if (!v->is_string())
    bad(where + "'" + key(k) + "' must be a string");
  return v->get<std::string>();
}

/// A number field; the table's default when absent or null.
double getNumber(const json &obj, Key k, const std::string &where = "") {
  const json *v = field(obj, k);
  if (!v)
    return rt::trainConfigField(k).dflt.number;
  if (!v->is_number())
    bad(where + "'" + key(k) + "' must be a number");
  double d = v->get<double>();
  if (!std::isfinite(d))
    bad(where + "'" + key(k) + "' must be finite");
  return d;
}

/// A boolean field; the table's default when absent or null.
bool getBool(const json &obj, Key k, const std::string &where = "") {
  const json *v = field(obj, k);
  if (!v)
    return rt::trainConfigField(k).dflt.boolean;
  if (!v->is_boolean())
    bad(where + "'" + key(k) + "' must be true or false");
  return v->get<bool>();
}

/// An integer field; the table's default, or none, when absent or null.
std::optional<int64_t> getInt(const json &obj, Key k,
                              const std::string &where = "") {
  const json *v = field(obj, k);
  if (!v) {
    const rt::TrainConfigDefault &d = rt::trainConfigField(k).dflt;
    if (d.present)
      return (int64_t)d.number;
    return std::nullopt;
  }
  if (!v->is_number_integer())
    bad(where + "'" + key(k) + "' must be an integer");
  if (v->is_number_unsigned() && v->get<uint64_t>() > (uint64_t)INT64_MAX)
    bad(where + "'" + key(k) + "' is too large");
  return v->get<int64_t>();
}

} // namespace

const DataSpec *Config::findData(const std::string &name) const {
  for (const DataSpec &d : data)
    if (d.name == name)
      return &d;
  return nullptr;
}

double Config::learningRate(int64_t step, int64_t runSteps) const {
  const Schedule &s = schedule;
  if (s.kind == "constant")
    return lr;
  if (step < s.warmupSteps)
    return lr * double(step + 1) / double(s.warmupSteps);
  if (s.kind == "linear-warmup")
    return lr;
  // cosine
  int64_t total = s.totalSteps > 0 ? s.totalSteps : runSteps;
  double p = total > s.warmupSteps
                 ? double(step - s.warmupSteps) / double(total - s.warmupSteps)
                 : 1.0;
  p = std::min(1.0, std::max(0.0, p));
  return s.minLr + (lr - s.minLr) * (1 + std::cos(M_PI * p)) / 2;
}

Config parseConfig(std::string_view text) {
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::exception &e) {
    std::string what = e.what();
    for (char &c : what)
      if (c == '\n' || c == '\r')
        c = ' ';
    bad("not valid JSON: " + what);
  }
  if (!j.is_object())
    bad("not a JSON object");
  Config c;
  try {
    if (getString(j, Key::Format) != rt::kTrainConfigFormat)
      bad(std::string("'format' is not \"") + rt::kTrainConfigFormat + "\"");
    std::optional<int64_t> version = getInt(j, Key::Version);
    if (!version || *version != rt::kTrainConfigVersion)
      bad("version " + (version ? std::to_string(*version) : std::string("(none)")) +
          ", this executable reads version " +
          std::to_string(rt::kTrainConfigVersion));
    c.model = getString(j, Key::Model);
    c.modelSha256 = getString(j, Key::ModelSha256);
    std::optional<int64_t> batch = getInt(j, Key::BatchSize);
    if (!batch || *batch <= 0)
      bad("'batch_size' must be a positive integer");
    c.batchSize = *batch;
    c.loss = getString(j, Key::Loss);
    c.logits = getString(j, Key::Logits);
    c.labels = getString(j, Key::Labels);
    c.numClasses = getInt(j, Key::NumClasses);
    if (c.numClasses && *c.numClasses <= 0)
      bad("'num_classes' must be positive");
    c.ignoreIndex = getInt(j, Key::IgnoreIndex);
    c.softLabels = getBool(j, Key::SoftLabels);
    const json *data = field(j, Key::Data);
    if (!data || !data->is_array())
      bad("'data' must be an array");
    for (size_t i = 0; i < data->size(); ++i) {
      const json &d = (*data)[i];
      std::string where = "data[" + std::to_string(i) + "] ";
      if (!d.is_object())
        bad(where + "must be an object");
      DataSpec s;
      s.name = getString(d, Key::DataName, where);
      if (s.name.empty())
        bad(where + "needs a 'name'");
      std::string dt = getString(d, Key::DataDType, where);
      if (!rt::parseDType(dt, s.dtype))
        bad(where + "has unknown dtype '" + dt + "'");
      const json *shape = field(d, Key::DataSampleShape);
      if (!shape || !shape->is_array())
        bad(where + "'sample_shape' must be an array");
      for (const json &n : *shape) {
        if (!n.is_number_integer() || n.get<int64_t>() < 0)
          bad(where + "'sample_shape' must hold non-negative integers");
        s.sampleShape.push_back(n.get<int64_t>());
      }
      if (c.findData(s.name))
        bad("data input '" + s.name + "' is listed twice");
      c.data.push_back(std::move(s));
    }
    if (const json *o = field(j, Key::Optimizer)) {
      if (!o->is_object())
        bad("'optimizer' must be an object");
      c.optimizer = getString(*o, Key::OptimizerName, "optimizer ");
      c.lr = getNumber(*o, Key::OptimizerLr, "optimizer ");
    }
    if (const json *s = field(j, Key::Schedule)) {
      if (!s->is_object())
        bad("'schedule' must be an object");
      c.schedule.kind = getString(*s, Key::ScheduleKind, "schedule ");
      if (c.schedule.kind != "constant" && c.schedule.kind != "linear-warmup" &&
          c.schedule.kind != "cosine")
        bad("unknown schedule kind '" + c.schedule.kind + "'");
      c.schedule.warmupSteps = *getInt(*s, Key::ScheduleWarmupSteps, "schedule ");
      c.schedule.totalSteps = *getInt(*s, Key::ScheduleTotalSteps, "schedule ");
      if (c.schedule.warmupSteps < 0 || c.schedule.totalSteps < 0)
        bad("schedule steps must be non-negative");
      if (c.schedule.kind == "cosine" && c.schedule.totalSteps > 0 &&
          c.schedule.totalSteps < c.schedule.warmupSteps)
        bad("the cosine schedule's total_steps " +
            std::to_string(c.schedule.totalSteps) + " is below its warmup_steps " +
            std::to_string(c.schedule.warmupSteps));
      c.schedule.minLr = getNumber(*s, Key::ScheduleMinLr, "schedule ");
    }
    if (const json *m = field(j, Key::Mesh)) {
      if (!m->is_object())
        bad("'mesh' must be an object");
      c.dp = *getInt(*m, Key::MeshDp, "mesh ");
      if (c.dp < 1 || c.dp > (int64_t(1) << 20))
        bad("mesh dp must be in [1, 2^20], got " + std::to_string(c.dp));
      c.zero = *getInt(*m, Key::MeshZero, "mesh ");
      if (c.zero < 0 || c.zero > 3)
        bad("mesh zero must be 0, 1, 2 or 3, got " + std::to_string(c.zero));
      if (const json *s = field(*m, Key::MeshSharded)) {
        if (!s->is_object())
          bad("mesh 'sharded' must be an object of name: shape");
        for (const auto &[name, shape] : s->items()) {
          if (!shape.is_array() || shape.size() > 16)
            bad("mesh sharded '" + name + "': the shape must be an array of at "
                "most 16 sizes");
          std::vector<int64_t> dims;
          int64_t numel = 1;
          for (const json &d : shape) {
            if (!d.is_number_integer() || d.get<int64_t>() < 0 ||
                d.get<int64_t>() > (int64_t(1) << 40) ||
                (d.get<int64_t>() && numel > (int64_t(1) << 40) / d.get<int64_t>()))
              bad("mesh sharded '" + name + "': sizes must be integers in "
                  "[0, 2^40] whose product is at most 2^40");
            dims.push_back(d.get<int64_t>());
            numel *= dims.back();
          }
          c.sharded[name] = dims;
        }
      }
      c.tp = *getInt(*m, Key::MeshTp, "mesh ");
      if (c.tp < 1 || c.tp > (int64_t(1) << 20) || c.dp * c.tp > (int64_t(1) << 20))
        bad("mesh tp must be in [1, 2^20] and dp x tp at most 2^20, got tp " +
            std::to_string(c.tp));
      c.ep = *getInt(*m, Key::MeshEp, "mesh ");
      if (c.ep < 1 || c.ep > (int64_t(1) << 20) || c.dp * c.tp * c.ep > (int64_t(1) << 20))
        bad("mesh ep must be in [1, 2^20] and dp x ep x tp at most 2^20, got ep " +
            std::to_string(c.ep));
      if (c.ep > 1 && c.tp > 1)
        bad("mesh ep and tp cannot both be above 1");
      c.pp = *getInt(*m, Key::MeshPp, "mesh ");
      if (c.pp < 1 || c.pp > (int64_t(1) << 20) ||
          c.pp * c.dp * c.tp * c.ep > (int64_t(1) << 20))
        bad("mesh pp must be in [1, 2^20] and pp x dp x ep x tp at most 2^20, "
            "got pp " + std::to_string(c.pp));
      c.microbatches = *getInt(*m, Key::MeshMicrobatches, "mesh ");
      if (c.microbatches < 1 || c.microbatches > 4096)
        bad("mesh microbatches must be in [1, 4096], got " +
            std::to_string(c.microbatches));
      if (const json *s = field(*m, Key::MeshSplit)) {
        if (!s->is_object())
          bad("mesh 'split' must be an object of name: {shape, dims}");
        for (const auto &[name, e] : s->items()) {
          const json *shape = e.is_object() ? field(e, Key::MeshSplitShape) : nullptr;
          const json *dims = e.is_object() ? field(e, Key::MeshSplitDims) : nullptr;
          const json *view = e.is_object() ? field(e, Key::MeshSplitView) : nullptr;
          const json *planShape = view ? view : shape;
          if (!shape || !dims || !shape->is_array() || !dims->is_array() ||
              (view && !view->is_array()) || shape->size() > 16 ||
              planShape->size() > 16 || planShape->size() != dims->size())
            bad("mesh split '" + name + "' needs 'shape' and 'dims', one entry "
                "per dimension (of 'view' when given; at most 16)");
          SplitSpec sp;
          auto sizes = [&](const json &arr, std::vector<int64_t> &out) {
            int64_t numel = 1;
            for (const json &n : arr) {
              if (!n.is_number_integer() || n.get<int64_t>() < 0 ||
                  n.get<int64_t>() > (int64_t(1) << 40) ||
                  (n.get<int64_t>() && numel > (int64_t(1) << 40) / n.get<int64_t>()))
                bad("mesh split '" + name + "': sizes must be integers in "
                    "[0, 2^40] whose product is at most 2^40");
              out.push_back(n.get<int64_t>());
              numel *= out.back();
            }
            return numel;
          };
          int64_t numel = sizes(*shape, sp.shape);
          if (view && sizes(*view, sp.view) != numel)
            bad("mesh split '" + name + "': 'view' holds another number of "
                "elements than 'shape'");
          for (size_t d = 0; d < dims->size(); ++d) {
            const json &axes = (*dims)[d];
            if (!axes.is_array() || axes.size() > 4)
              bad("mesh split '" + name + "': each dims entry is a list of at "
                  "most 4 mesh axis names");
            std::vector<std::string> names;
            for (const json &a : axes) {
              if (!a.is_string() || (a.get<std::string>() != "dp" &&
                                     a.get<std::string>() != "tp" &&
                                     a.get<std::string>() != "ep"))
                bad("mesh split '" + name + "': mesh axes are dp, ep and tp");
              names.push_back(a.get<std::string>());
            }
            sp.dims.push_back(std::move(names));
          }
          c.split[name] = std::move(sp);
        }
      }
    }
    c.precision = getString(j, Key::Precision);
    if (c.precision != "fp32" && c.precision != "bf16" && c.precision != "fp16")
      bad("unknown precision '" + c.precision + "'");
    if (const json *ls = field(j, Key::LossScale)) {
      if (!ls->is_object())
        bad("'loss_scale' must be an object");
      LossScaleConfig l;
      std::string mode = getString(*ls, Key::LossScaleMode, "loss_scale ");
      if (mode != "dynamic" && mode != "static")
        bad("loss_scale mode must be dynamic or static, got '" + mode + "'");
      l.dynamic = mode == "dynamic";
      l.init = getNumber(*ls, Key::LossScaleInit, "loss_scale ");
      l.growthFactor = getNumber(*ls, Key::LossScaleGrowthFactor, "loss_scale ");
      l.backoffFactor = getNumber(*ls, Key::LossScaleBackoffFactor, "loss_scale ");
      l.min = getNumber(*ls, Key::LossScaleMin, "loss_scale ");
      l.growthInterval = *getInt(*ls, Key::LossScaleGrowthInterval, "loss_scale ");
      l.input = getString(*ls, Key::LossScaleInput, "loss_scale ");
      if (!(l.init > 0) || !std::isfinite(l.init) || l.init > 3.0e38)
        bad("loss_scale init must be a positive finite float32, got " +
            std::to_string(l.init));
      if (!(l.growthFactor > 1) || !(l.growthFactor < 1e6))
        bad("loss_scale growth_factor must be in (1, 1e6)");
      if (!(l.backoffFactor > 0) || !(l.backoffFactor < 1))
        bad("loss_scale backoff_factor must be in (0, 1)");
      if (!(l.min > 0) || !std::isfinite(l.min))
        bad("loss_scale min must be positive and finite");
      if (l.growthInterval < 1)
        bad("loss_scale growth_interval must be at least 1");
      c.lossScale = l;
    }
    if (const json *pr = field(j, Key::Prune)) {
      if (!pr->is_object())
        bad("'prune' must be an object");
      PruneConfig q;
      std::string kind = getString(*pr, Key::PruneKind, "prune ");
      if (kind != "magnitude" && kind != "l1-channel")
        bad("prune kind must be magnitude or l1-channel, got '" + kind + "'");
      q.kind = kind;
      if (const json *chs = field(*pr, Key::PruneChannels)) {
        if (!chs->is_array())
          bad("prune 'channels' must be an array");
        for (size_t i = 0; i < chs->size(); ++i) {
          const json &e = (*chs)[i];
          std::string where = "prune channels[" + std::to_string(i) + "] ";
          if (!e.is_object())
            bad(where + "must be an object");
          PruneChannelClass cl;
          cl.mask = getString(e, Key::PruneChannelMask, where);
          std::optional<int64_t> n = getInt(e, Key::PruneChannelCount, where);
          const json *ps = field(e, Key::PruneChannelParams);
          const json *as = field(e, Key::PruneChannelAxes);
          const json *bs = field(e, Key::PruneChannelBlocks);
          if (!n || *n < 1 || !ps || !as || !bs || !ps->is_array() ||
              !as->is_array() || !bs->is_array() || ps->size() != as->size() ||
              ps->size() != bs->size())
            bad(where + "needs a count >= 1 and params, axes and blocks of one length");
          cl.count = *n;
          const json *pa = field(e, Key::PruneChannelParts);
          const json *pc = field(e, Key::PruneChannelPartChannels);
          if (cl.mask.empty() == !pa || !pa != !pc)
            bad(where + "needs a mask, or parts and part_channels (a concat's result)");
          if (pa) {
            if (!pa->is_array() || !pc->is_array() || pa->size() != pc->size() ||
                pa->empty())
              bad(where + "needs parts and part_channels of one length");
            int64_t sum = 0;
            for (size_t k = 0; k < pa->size(); ++k) {
              if (!(*pa)[k].is_number_integer() || !(*pc)[k].is_number_integer())
                bad(where + "has a malformed part");
              int64_t part = (*pa)[k].get<int64_t>(), ch = (*pc)[k].get<int64_t>();
              if (part < -1 || part >= (int64_t)i || ch < 1 || ch > *n ||
                  (part >= 0 && (!q.channels[part].parts.empty() ||
                                 q.channels[part].count != ch)))
                bad(where + "part " + std::to_string(k) +
                    " is not an earlier class of its channels");
              sum += ch;
              cl.parts.push_back(part);
              cl.partChannels.push_back(ch);
            }
            if (sum != *n)
              bad(where + "has parts of " + std::to_string(sum) + " channels, not " +
                  std::to_string(*n));
          }
          for (size_t k = 0; k < ps->size(); ++k) {
            if (!(*ps)[k].is_string() || !(*as)[k].is_number_integer() ||
                !(*bs)[k].is_number_integer() || (*as)[k].get<int64_t>() < 0 ||
                (*bs)[k].get<int64_t>() < 1)
              bad(where + "has a malformed parameter entry");
            cl.params.push_back((*ps)[k].get<std::string>());
            cl.axes.push_back((*as)[k].get<int64_t>());
            cl.blocks.push_back((*bs)[k].get<int64_t>());
          }
          q.channels.push_back(std::move(cl));
        }
      }
      q.sparsity = getNumber(*pr, Key::PruneSparsity, "prune ");
      q.start = *getInt(*pr, Key::PruneStart, "prune ");
      q.end = *getInt(*pr, Key::PruneEnd, "prune ");
      q.every = *getInt(*pr, Key::PruneEvery, "prune ");
      if (!(q.sparsity >= 0 && q.sparsity < 1))
        bad("prune sparsity must be in [0, 1)");
      if (q.start < 0 || q.end < q.start || q.every < 1)
        bad("prune needs 0 <= start <= end and every >= 1");
      c.prune = q;
    }
    if (const json *qa = field(j, Key::Qat)) {
      if (!qa->is_object())
        bad("'qat' must be an object");
      QatConfig q;
      std::string kind = getString(*qa, Key::QatKind, "qat ");
      if (kind != "int8")
        bad("qat kind must be int8, got '" + kind + "'");
      q.freeze = getInt(*qa, Key::QatFreeze, "qat ");
      if (q.freeze && *q.freeze < 1)
        bad("qat freeze must be at least 1");
      q.averaging = getNumber(*qa, Key::QatAveraging, "qat ");
      if (!(q.averaging > 0 && q.averaging <= 1))
        bad("qat averaging must be in (0, 1]");
      const json *sites = field(*qa, Key::QatSites);
      if (!sites || !sites->is_array() || sites->empty())
        bad("qat 'sites' must be a non-empty array");
      for (size_t i = 0; i < sites->size(); ++i) {
        const json &e = (*sites)[i];
        std::string where = "qat sites[" + std::to_string(i) + "] ";
        if (!e.is_object())
          bad(where + "must be an object");
        QatSite t;
        std::optional<int64_t> node = getInt(e, Key::QatSiteNode, where);
        std::optional<int64_t> axis = getInt(e, Key::QatSiteAxis, where);
        if (!node || *node < 0 || !axis || *axis < 0)
          bad(where + "needs a node and an axis >= 0");
        t.node = *node;
        t.axis = *axis;
        t.name = getString(e, Key::QatSiteName, where);
        t.weight = getString(e, Key::QatSiteWeight, where);
        t.observer = getString(e, Key::QatSiteObserver, where);
        if (t.weight.empty() || t.observer.empty())
          bad(where + "needs a weight and an observer");
        q.sites.push_back(std::move(t));
      }
      c.qat = std::move(q);
    }
    c.lrInput = getString(j, Key::LrInput);
    c.stepInput = getString(j, Key::StepInput);
  } catch (const json::exception &e) {
    bad(std::string("malformed: ") + e.what());
  }
  return c;
}

} // namespace kiln::train
