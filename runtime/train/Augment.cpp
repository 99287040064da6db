//===- Augment.cpp - per-sample data augmentation ---------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The transforms of Augment.h. Every random choice comes from the streams
// documented there, and every float operation is written out one rounding
// at a time (no fused multiply-add: CMakeLists.txt builds this file with
// -ffp-contract=off), so test/Training/augment_ref.py reproduces the output
// bit for bit with NumPy float32.
//===----------------------------------------------------------------------===//
#include "Augment.h"

#include "Data.h"
#include "Util.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <sstream>

namespace kiln::train {

using rt::DType;

//===----------------------------------------------------------------------===//
// Random numbers
//===----------------------------------------------------------------------===//

namespace augment {

namespace {
double normal(uint64_t key, uint64_t &cursor) {
  double u1 = uniform(key, cursor++);
  double u2 = uniform(key, cursor++);
  return std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(2.0 * M_PI * u2);
}
} // namespace

double sampleGamma(uint64_t key, uint64_t &cursor, double alpha) {
  if (alpha < 1.0) {
    // Gamma(a) = Gamma(a + 1) * U^(1/a) (Marsaglia and Tsang, section 6).
    double g = sampleGamma(key, cursor, alpha + 1.0);
    double u = uniform(key, cursor++);
    return g * std::pow(u, 1.0 / alpha);
  }
  const double d = alpha - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  // Acceptance is above 95% for every alpha >= 1; the bound only guards
  // against a broken libm.
  for (int tries = 0; tries < 1000000; ++tries) {
    double x, v;
    do {
      x = normal(key, cursor);
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    double u = uniform(key, cursor++);
    if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v)))
      return d * v;
  }
  return d;
}

double sampleBeta(uint64_t key, uint64_t &cursor, double alpha) {
  double x = sampleGamma(key, cursor, alpha);
  double y = sampleGamma(key, cursor, alpha);
  double s = x + y;
  return s > 0.0 ? x / s : 1.0;
}

} // namespace augment

using namespace augment;

//===----------------------------------------------------------------------===//
// The parsed spec
//===----------------------------------------------------------------------===//

namespace {

enum class Kind { Crop, Flip, Jitter, Normalize, Mix, Mask, Substitute };

/// A substitute table: row t's usable entries are
/// entries[offsets[t] .. offsets[t+1]).
struct SubTable {
  std::string path;
  int64_t rows = 0, cols = 0;
  std::vector<int64_t> offsets, entries;
};

struct Stage {
  Kind kind;
  size_t clause = 0;
  uint64_t slot = 0; // the transform's index t in SPEC
  int64_t pad = 0;
  double flipP = 0.5;
  double jitter[3] = {0, 0, 0};
  std::vector<double> mean, stdev; // per channel
  double mixupAlpha = 0, cutmixAlpha = 0;
  double p = 0;                    // mask / substitute probability
  int64_t maskId = 0, vocab = 0;
  std::optional<int64_t> ignore;
  std::shared_ptr<const SubTable> table;
};

struct Clause {
  size_t input = 0;
  std::string name;
  DType dtype = DType::F32;
  size_t elemSize = 4;
  int64_t numel = 0;   // values per sample
  bool image = false;  // c, h, w valid
  bool imageOption = false; // from image=
  int64_t c = 1, h = 1, w = 1;
  bool clamp = true;
  double maxValue = 1.0;
  std::vector<size_t> stages; // indices into Impl::stages, in order
};

} // namespace

struct Augmenter::Impl {
  std::vector<DataSpec> inputs;
  std::vector<size_t> sampleBytes; // per input
  std::vector<Clause> clauses;
  std::vector<Stage> stages; // stage i has slot i
  std::optional<size_t> labels;
  uint64_t numSamples = 0;
  int64_t mixStage = -1;
};

namespace {

//===----------------------------------------------------------------------===//
// Parsing
//===----------------------------------------------------------------------===//

[[noreturn]] void bad(const std::string &what, const std::string &why) {
  fail("--augment " + what + ": " + why);
}

const char *const kKeys[] = {"image", "max",    "pad",       "ignore",
                             "crop",  "flip",   "jitter",    "normalize",
                             "mixup", "cutmix", "mask",      "substitute"};

bool isKey(const std::string &k) {
  for (const char *key : kKeys)
    if (k == key)
      return true;
  return false;
}

std::string keyList() {
  std::string s;
  for (const char *key : kKeys)
    s += (s.empty() ? "" : ", ") + std::string(key);
  return s;
}

std::string trim(const std::string &s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<std::string> split(const std::string &s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t k = s.find(sep, start);
    out.push_back(s.substr(start, k == std::string::npos ? k : k - start));
    if (k == std::string::npos)
      return out;
    start = k + 1;
  }
}

/// One KEY[=VALUE] of a clause.
struct Item {
  std::string key, value, text; // text: "key=value" as written
  bool hasValue = false;
};

double parseNumber(const Item &it, const std::string &s) {
  std::string t = trim(s);
  char *end = nullptr;
  errno = 0;
  double v = t.empty() ? 0 : std::strtod(t.c_str(), &end);
  if (t.empty() || *end || errno == ERANGE || !std::isfinite(v)) {
    std::string why = "'" + t + "' is not a finite number";
    if (!t.empty() && std::isalpha((unsigned char)t[0]))
      why += " (nor a transform: " + keyList() + ")";
    bad(it.text, why);
  }
  return v;
}

int64_t parseInt(const Item &it, const std::string &s) {
  std::string t = trim(s);
  char *end = nullptr;
  errno = 0;
  long long v = t.empty() ? 0 : std::strtoll(t.c_str(), &end, 10);
  if (t.empty() || *end || errno == ERANGE) {
    std::string why = "'" + t + "' is not an integer";
    if (!t.empty() && std::isalpha((unsigned char)t[0]))
      why += " (nor a transform: " + keyList() + ")";
    bad(it.text, why);
  }
  return v;
}

double parseProbability(const Item &it, const std::string &s) {
  double p = parseNumber(it, s);
  if (p < 0 || p > 1)
    bad(it.text, "the probability " + trim(s) + " is outside [0, 1]");
  return p;
}

/// "8", "8x8" or "1x8x8" as sizes (each in [1, 2^20]).
std::vector<int64_t> parseSizes(const Item &it, size_t maxParts) {
  std::vector<std::string> parts = split(it.value, 'x');
  if (parts.size() > maxParts)
    bad(it.text, "expected at most " + std::to_string(maxParts) +
                     " sizes separated by 'x'");
  std::vector<int64_t> out;
  for (const std::string &p : parts) {
    int64_t v = parseInt(it, p);
    if (v < 1 || v > (int64_t(1) << 20))
      bad(it.text, "size " + trim(p) + " is outside [1, 2^20]");
    out.push_back(v);
  }
  return out;
}

std::vector<double> parseList(const Item &it, const std::string &s) {
  std::vector<double> out;
  for (const std::string &p : split(s, ','))
    out.push_back(parseNumber(it, p));
  return out;
}

std::string fmt(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

/// The range an integer dtype holds, as int64 (u64 capped).
void intRange(DType t, int64_t &lo, int64_t &hi) {
  switch (t) {
  case DType::I8: lo = INT8_MIN; hi = INT8_MAX; return;
  case DType::U8: lo = 0; hi = UINT8_MAX; return;
  case DType::I16: lo = INT16_MIN; hi = INT16_MAX; return;
  case DType::U16: lo = 0; hi = UINT16_MAX; return;
  case DType::I32: lo = INT32_MIN; hi = INT32_MAX; return;
  case DType::U32: lo = 0; hi = UINT32_MAX; return;
  case DType::U64: lo = 0; hi = INT64_MAX; return;
  default: lo = INT64_MIN; hi = INT64_MAX; return;
  }
}

bool isInt(DType t) { return rt::isSignedInt(t) || rt::isUnsignedInt(t); }

/// Element `i` of integer data as int64 (u64 beyond INT64_MAX wraps
/// negative, which no table row or vocabulary holds).
int64_t loadInt(DType t, const uint8_t *base, int64_t i) {
  switch (t) {
  case DType::I8: { int8_t x; std::memcpy(&x, base + i, 1); return x; }
  case DType::U8: return base[i];
  case DType::I16: { int16_t x; std::memcpy(&x, base + 2 * i, 2); return x; }
  case DType::U16: { uint16_t x; std::memcpy(&x, base + 2 * i, 2); return x; }
  case DType::I32: { int32_t x; std::memcpy(&x, base + 4 * i, 4); return x; }
  case DType::U32: { uint32_t x; std::memcpy(&x, base + 4 * i, 4); return x; }
  default: { int64_t x; std::memcpy(&x, base + 8 * i, 8); return x; }
  }
}

/// Stores a value the dtype holds (parse() checked the range).
void storeInt(DType t, uint8_t *base, int64_t i, int64_t v) {
  switch (t) {
  case DType::I8: case DType::U8: { uint8_t x = (uint8_t)v; base[i] = x; return; }
  case DType::I16: case DType::U16: { uint16_t x = (uint16_t)v; std::memcpy(base + 2 * i, &x, 2); return; }
  case DType::I32: case DType::U32: { uint32_t x = (uint32_t)v; std::memcpy(base + 4 * i, &x, 4); return; }
  default: std::memcpy(base + 8 * i, &v, 8); return;
  }
}

std::shared_ptr<const SubTable> readTable(const Item &it,
                                          const std::string &path) {
  NpyFile npy;
  try {
    openNpy(path, npy);
  } catch (const UserError &e) {
    bad(it.text, e.what());
  }
  if (!isInt(npy.dtype) || npy.shape.size() != 2 || npy.shape[0] < 1 ||
      npy.shape[1] < 1)
    bad(it.text, path + " is " + typeStr(npy.dtype, npy.shape) +
                     "; the table must be an integer array [VOCAB, K]");
  auto t = std::make_shared<SubTable>();
  t->path = path;
  t->rows = npy.shape[0];
  t->cols = npy.shape[1];
  uint64_t n = (uint64_t)t->rows * (uint64_t)t->cols;
  if (n * rt::dtypeSize(npy.dtype) != npy.dataBytes || n > (uint64_t(1) << 32))
    bad(it.text, path + ": the table's data does not match its shape, or it "
                        "has more than 2^32 entries");
  t->offsets.reserve(t->rows + 1);
  t->offsets.push_back(0);
  for (int64_t r = 0; r < t->rows; ++r) {
    for (int64_t k = 0; k < t->cols; ++k) {
      int64_t v = loadInt(npy.dtype, npy.data, r * t->cols + k);
      if (npy.dtype == DType::U64 && v < 0)
        v = INT64_MAX; // beyond int64: out of range below
      if (v < 0)
        continue;
      if (v >= t->rows)
        bad(it.text, path + ": entry " + std::to_string(v) + " at row " +
                         std::to_string(r) + " is outside [0, " +
                         std::to_string(t->rows) +
                         ") (negative entries mean none)");
      t->entries.push_back(v);
    }
    t->offsets.push_back((int64_t)t->entries.size());
  }
  return t;
}

/// Which transforms a key adds: image-kind, token-kind, or an option.
enum class KeyKind { Option, Image, Token };
KeyKind keyKind(const std::string &k) {
  if (k == "mask" || k == "substitute")
    return KeyKind::Token;
  if (k == "image" || k == "max" || k == "ignore")
    return KeyKind::Option;
  return KeyKind::Image; // pad alone crops
}

} // namespace

std::unique_ptr<Augmenter>
Augmenter::parse(const std::string &spec, const std::vector<DataSpec> &inputs,
                 const std::string &labels, std::optional<int64_t> numClasses,
                 uint64_t numSamples) {
  auto impl = std::make_unique<Impl>();
  impl->inputs = inputs;
  impl->numSamples = numSamples;
  for (size_t i = 0; i < inputs.size(); ++i) {
    uint64_t n = 1;
    for (int64_t d : inputs[i].sampleShape)
      n *= (uint64_t)d;
    impl->sampleBytes.push_back(n * rt::dtypeSize(inputs[i].dtype));
    if (inputs[i].name == labels)
      impl->labels = i;
  }
  auto inputNames = [&] {
    std::string s;
    for (const DataSpec &d : inputs)
      s += (s.empty() ? "" : ", ") + d.name;
    return s.empty() ? std::string("none") : s;
  };
  if (trim(spec).empty())
    fail("--augment: the spec is empty");

  std::vector<bool> taken(inputs.size(), false);
  for (std::string clauseText : split(spec, ';')) {
    clauseText = trim(clauseText);
    if (clauseText.empty())
      fail("--augment " + spec + ": an empty clause (between ';')");
    // INPUT: prefix, matched against the inputs' names (which may hold ':').
    std::optional<size_t> named;
    size_t bestLen = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const std::string &n = inputs[i].name;
      if (clauseText.size() > n.size() && clauseText.compare(0, n.size(), n) == 0 &&
          clauseText[n.size()] == ':' && n.size() >= bestLen) {
        named = i;
        bestLen = n.size();
      }
    }
    std::string body = named ? trim(clauseText.substr(bestLen + 1)) : clauseText;
    if (!named) {
      size_t colon = clauseText.find(':');
      if (colon != std::string::npos &&
          colon < clauseText.find_first_of("=,"))
        fail("--augment " + clauseText + ": no data input '" +
             trim(clauseText.substr(0, colon)) + "' (inputs: " + inputNames() +
             ")");
    }

    // Items; a piece that does not start with a key continues a value.
    std::vector<Item> items;
    for (const std::string &piece : split(body, ',')) {
      std::string p = trim(piece);
      size_t eq = p.find('=');
      std::string key = trim(p.substr(0, eq));
      if (isKey(key)) {
        Item it;
        it.key = key;
        it.hasValue = eq != std::string::npos;
        it.value = it.hasValue ? trim(p.substr(eq + 1)) : "";
        it.text = p;
        for (const Item &o : items)
          if (o.key == key)
            bad(p, "'" + key + "' is given twice in one clause");
        items.push_back(std::move(it));
        continue;
      }
      if (items.empty() || !items.back().hasValue)
        fail("--augment " + clauseText + ": unknown transform '" + key +
             "' (" + keyList() + ")");
      items.back().value += "," + piece;
      items.back().text += "," + piece;
    }
    auto find = [&](const char *k) -> const Item * {
      for (const Item &it : items)
        if (it.key == k)
          return &it;
      return nullptr;
    };
    bool wantsImage = false, wantsToken = false;
    for (const Item &it : items) {
      KeyKind k = keyKind(it.key);
      wantsImage |= k == KeyKind::Image;
      wantsToken |= k == KeyKind::Token;
    }
    if (!wantsImage && !wantsToken)
      fail("--augment " + clauseText + ": the clause has no transform");
    if (wantsImage && wantsToken)
      fail("--augment " + clauseText + ": image and token transforms in one "
           "clause; give each input its own clause (INPUT:..., separated by ';')");

    // The input.
    size_t in;
    if (named) {
      in = *named;
    } else {
      std::vector<size_t> cands;
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (impl->labels && i == *impl->labels)
          continue;
        DType t = inputs[i].dtype;
        if (wantsImage ? rt::isFloat(t) : isInt(t))
          cands.push_back(i);
      }
      const char *kind = wantsImage ? "float" : "integer";
      if (cands.size() != 1) {
        std::string names;
        for (size_t i : cands)
          names += (names.empty() ? "" : ", ") + inputs[i].name;
        fail("--augment " + clauseText + ": " +
             (cands.empty() ? std::string("no ") + kind + " input to transform"
                            : "inputs " + names + " could all take it") +
             "; name one with INPUT: (inputs: " + inputNames() + ")");
      }
      in = cands[0];
    }
    const DataSpec &ds = inputs[in];
    if (impl->labels && in == *impl->labels)
      fail("--augment " + clauseText + ": '" + ds.name +
           "' is the labels input; mixup and cutmix mix it with their image");
    if (taken[in])
      fail("--augment " + clauseText + ": input " + ds.name +
           " has two clauses; put its transforms in one");
    taken[in] = true;

    Clause cl;
    cl.input = in;
    cl.name = ds.name;
    cl.dtype = ds.dtype;
    cl.elemSize = rt::dtypeSize(ds.dtype);
    cl.numel = 1;
    for (int64_t d : ds.sampleShape)
      cl.numel *= d;
    std::string imgDesc = shapeStr(ds.sampleShape);
    if (const Item *it = find("image")) {
      std::vector<int64_t> s = parseSizes(*it, 3);
      if (s.size() < 2)
        bad(it->text, "expected CxHxW or HxW");
      if (s.size() == 2)
        s.insert(s.begin(), 1);
      if (s[0] * s[1] * s[2] != cl.numel)
        bad(it->text, "images of " + std::to_string(s[0] * s[1] * s[2]) +
                          " values, but input " + ds.name + "'s samples are " +
                          imgDesc + " (" + std::to_string(cl.numel) + " values)");
      cl.image = cl.imageOption = true;
      cl.c = s[0], cl.h = s[1], cl.w = s[2];
    } else if ((ds.sampleShape.size() == 3 || ds.sampleShape.size() == 2) &&
               cl.numel > 0) {
      cl.image = true;
      size_t r = ds.sampleShape.size();
      cl.c = r == 3 ? ds.sampleShape[0] : 1;
      cl.h = ds.sampleShape[r - 2];
      cl.w = ds.sampleShape[r - 1];
    }
    const std::string imgName = std::to_string(cl.h) + "x" + std::to_string(cl.w);
    auto needImage = [&](const Item &it) {
      if (!cl.image)
        bad(it.text, "input " + ds.name + "'s samples are " + imgDesc +
                         ", not images: give image=CxHxW (e.g. image=1x8x8 "
                         "for a flat 64)");
    };
    auto needFloat = [&](const Item &it) {
      if (ds.dtype != DType::F32 && ds.dtype != DType::F64)
        bad(it.text, "input " + ds.name + " is " + rt::dtypeName(ds.dtype) +
                         "; it needs f32 or f64 values");
    };
    auto needTokens = [&](const Item &it) {
      if (!isInt(ds.dtype))
        bad(it.text, "input " + ds.name + " is " + rt::dtypeName(ds.dtype) +
                         "; token transforms need integer tokens");
    };
    if (const Item *it = find("max")) {
      if (it->value == "none") {
        cl.clamp = false;
      } else {
        cl.maxValue = parseNumber(*it, it->value);
        if (!(cl.maxValue > 0))
          bad(it->text, "the pixel bound must be positive (or none)");
      }
    }

    const size_t clauseIndex = impl->clauses.size();
    bool cropDone = false, mixDone = false;
    for (const Item &it : items) {
      Stage st;
      st.clause = clauseIndex;
      const std::string &k = it.key;
      if (k == "image" || k == "max" || k == "ignore")
        continue;
      auto needValue = [&] {
        if (!it.hasValue || it.value.empty())
          bad(it.text, "'" + k + "' needs a value");
      };
      if (k == "crop" || k == "pad") {
        if (cropDone)
          continue;
        cropDone = true;
        st.kind = Kind::Crop;
        needImage(it);
        if (const Item *c = find("crop")) {
          std::vector<int64_t> s = parseSizes(*c, 2);
          int64_t ch = s[0], cw = s.size() > 1 ? s[1] : s[0];
          std::string cs = s.size() > 1 ? std::to_string(ch) + "x" + std::to_string(cw)
                                        : std::to_string(ch);
          if (ch > cl.h || cw > cl.w)
            bad(c->text, "crop " + cs + " is larger than input " + ds.name +
                             "'s " + imgName + " images");
          if (ch < cl.h || cw < cl.w)
            bad(c->text, "crop " + cs + " is smaller than input " + ds.name +
                             "'s " + imgName + " images; the crop fills the "
                             "model's fixed input (pad the image instead)");
        }
        if (const Item *p = find("pad")) {
          st.pad = parseInt(*p, p->value);
          if (st.pad < 0 || st.pad > (int64_t(1) << 20))
            bad(p->text, "the padding must be in [0, 2^20]");
        }
      } else if (k == "flip") {
        st.kind = Kind::Flip;
        needImage(it);
        if (it.hasValue)
          st.flipP = parseProbability(it, it.value);
      } else if (k == "jitter") {
        st.kind = Kind::Jitter;
        needValue();
        needImage(it);
        needFloat(it);
        std::vector<double> v = parseList(it, it.value);
        if (v.size() > 3)
          bad(it.text, "jitter takes brightness[,contrast[,saturation]] (hue "
                       "is not supported)");
        for (size_t j = 0; j < v.size(); ++j) {
          if (v[j] < 0)
            bad(it.text, "jitter factors must be non-negative");
          st.jitter[j] = v[j];
        }
        if (st.jitter[1] > 0 && cl.c != 1 && cl.c != 3)
          bad(it.text, "contrast needs 1- or 3-channel images, input " +
                           ds.name + " has " + std::to_string(cl.c));
        if (st.jitter[2] > 0 && cl.c != 3)
          bad(it.text, "saturation needs 3-channel images, input " + ds.name +
                           " has " + std::to_string(cl.c) +
                           " (give jitter=B,C for grayscale)");
      } else if (k == "normalize") {
        st.kind = Kind::Normalize;
        needValue();
        needFloat(it);
        std::vector<std::string> ms = split(it.value, '/');
        if (ms.size() != 2)
          bad(it.text, "expected normalize=MEAN/STD (comma lists per channel)");
        int64_t channels = cl.image ? cl.c : 1;
        st.mean = parseList(it, ms[0]);
        st.stdev = parseList(it, ms[1]);
        for (std::vector<double> *v : {&st.mean, &st.stdev}) {
          if (v->size() == 1)
            v->assign(channels, (*v)[0]);
          if ((int64_t)v->size() != channels)
            bad(it.text, "expected " +
                             (channels == 1 ? std::string("1 value")
                                            : "1 or " + std::to_string(channels) +
                                                  " values") +
                             " per list (input " + ds.name + " has " +
                             std::to_string(channels) + " channel" +
                             (channels == 1 ? "" : "s") + ")");
        }
        for (double s : st.stdev)
          if (s == 0 || !std::isfinite(float(1.0f / float(s))))
            bad(it.text, "a standard deviation of " + fmt(s));
      } else if (k == "mixup" || k == "cutmix") {
        needValue();
        double alpha = parseNumber(it, it.value);
        if (!(alpha > 0) || alpha > 1e6)
          bad(it.text, "alpha must be in (0, 1e6]");
        if (k == "cutmix")
          needImage(it);
        else
          needFloat(it);
        if (find("mixup") && find("cutmix"))
          needFloat(it);
        if (impl->mixStage >= 0 && !mixDone)
          bad(it.text, "only one input may mix (the labels mix with it)");
        const DataSpec *lab = impl->labels ? &inputs[*impl->labels] : nullptr;
        if (!lab || (lab->dtype != DType::F32 && lab->dtype != DType::F64) ||
            lab->sampleShape.empty() ||
            (numClasses && lab->sampleShape.back() != *numClasses))
          bad(it.text, k + " needs soft labels (labels input '" +
                           labels + "' " +
                           (lab ? "is " + typeStr(lab->dtype, lab->sampleShape)
                                : std::string("is not a data input")) +
                           "): compile with kiln-compile --soft-labels");
        if (numSamples == 0)
          bad(it.text, "the dataset has no samples to mix with");
        if (mixDone) {
          // The second of mixup/cutmix joins the first's stage.
          Stage &m = impl->stages[impl->mixStage];
          (k == "mixup" ? m.mixupAlpha : m.cutmixAlpha) = alpha;
          continue;
        }
        mixDone = true;
        st.kind = Kind::Mix;
        (k == "mixup" ? st.mixupAlpha : st.cutmixAlpha) = alpha;
        impl->mixStage = (int64_t)impl->stages.size();
      } else if (k == "mask") {
        st.kind = Kind::Mask;
        needValue();
        needTokens(it);
        std::vector<std::string> v = split(it.value, ',');
        if (v.size() != 3)
          bad(it.text, "expected mask=P,MASK_ID,VOCAB");
        st.p = parseProbability(it, v[0]);
        st.maskId = parseInt(it, v[1]);
        st.vocab = parseInt(it, v[2]);
        int64_t lo, hi;
        intRange(ds.dtype, lo, hi);
        if (st.vocab < 1 || st.vocab - 1 > hi)
          bad(it.text, "VOCAB " + std::to_string(st.vocab) + " must be in [1, " +
                           std::to_string(hi) + "] (input " + ds.name + " is " +
                           rt::dtypeName(ds.dtype) + ")");
        if (st.maskId < 0 || st.maskId >= st.vocab)
          bad(it.text, "MASK_ID " + std::to_string(st.maskId) +
                           " is outside the vocabulary [0, " +
                           std::to_string(st.vocab) + ")");
        if (const Item *ig = find("ignore")) {
          st.ignore = parseInt(*ig, ig->value);
          const DataSpec *lab = impl->labels ? &inputs[*impl->labels] : nullptr;
          int64_t ln = 1;
          if (lab)
            for (int64_t d : lab->sampleShape)
              ln *= d;
          if (!lab || !isInt(lab->dtype) || ln != cl.numel)
            bad(ig->text, "needs integer labels '" + labels + "' with one "
                          "value per token of " + ds.name + " (" +
                          std::to_string(cl.numel) + "), " +
                          (lab ? "got " + typeStr(lab->dtype, lab->sampleShape)
                               : std::string("there is no such input")));
          int64_t llo, lhi;
          intRange(lab->dtype, llo, lhi);
          if (*st.ignore < llo || *st.ignore > lhi)
            bad(ig->text, std::to_string(*st.ignore) + " does not fit labels' " +
                              rt::dtypeName(lab->dtype));
        }
      } else if (k == "substitute") {
        st.kind = Kind::Substitute;
        needValue();
        needTokens(it);
        size_t comma = it.value.find(',');
        if (comma == std::string::npos)
          bad(it.text, "expected substitute=P,TABLE.npy");
        st.p = parseProbability(it, it.value.substr(0, comma));
        st.table = readTable(it, trim(it.value.substr(comma + 1)));
        int64_t lo, hi;
        intRange(ds.dtype, lo, hi);
        if (st.table->rows - 1 > hi)
          bad(it.text, "the table's " + std::to_string(st.table->rows) +
                           " rows exceed input " + ds.name + "'s " +
                           rt::dtypeName(ds.dtype));
      }
      st.slot = impl->stages.size();
      cl.stages.push_back(impl->stages.size());
      impl->stages.push_back(std::move(st));
    }
    if (find("ignore") && !find("mask"))
      bad(find("ignore")->text, "'ignore' goes with mask");
    if (find("pad") && !cl.image)
      needImage(*find("pad"));
    impl->clauses.push_back(std::move(cl));
  }
  return std::unique_ptr<Augmenter>(new Augmenter(std::move(impl)));
}

Augmenter::Augmenter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Augmenter::~Augmenter() = default;

bool Augmenter::needsFetch() const { return impl_->mixStage >= 0; }

std::vector<size_t> Augmenter::changedInputs() const {
  std::vector<size_t> out;
  for (const Clause &c : impl_->clauses)
    out.push_back(c.input);
  bool labelsToo = impl_->mixStage >= 0;
  for (const Stage &s : impl_->stages)
    labelsToo |= s.ignore.has_value();
  if (labelsToo && impl_->labels)
    out.push_back(*impl_->labels);
  std::sort(out.begin(), out.end());
  return out;
}

std::string Augmenter::describe() const {
  std::string out;
  for (const Clause &c : impl_->clauses) {
    if (!out.empty())
      out += "; ";
    out += c.name + ":";
    if (c.imageOption)
      out += " image " + std::to_string(c.c) + "x" + std::to_string(c.h) + "x" +
             std::to_string(c.w) + ",";
    bool first = true;
    for (size_t i : c.stages) {
      const Stage &s = impl_->stages[i];
      out += first ? " " : ", ";
      first = false;
      switch (s.kind) {
      case Kind::Crop:
        out += "crop " + std::to_string(c.h) + "x" + std::to_string(c.w) +
               " pad " + std::to_string(s.pad);
        break;
      case Kind::Flip:
        out += "flip " + fmt(s.flipP);
        break;
      case Kind::Jitter:
        out += "jitter b" + fmt(s.jitter[0]) + " c" + fmt(s.jitter[1]) + " s" +
               fmt(s.jitter[2]) +
               (c.clamp ? " max " + fmt(c.maxValue) : std::string(" unclamped"));
        break;
      case Kind::Normalize: {
        out += "normalize";
        for (size_t j = 0; j < s.mean.size(); ++j)
          out += (j ? ", " : " ") + fmt(s.mean[j]) + "/" + fmt(s.stdev[j]);
        break;
      }
      case Kind::Mix:
        if (s.mixupAlpha > 0)
          out += "mixup " + fmt(s.mixupAlpha);
        if (s.mixupAlpha > 0 && s.cutmixAlpha > 0)
          out += " or ";
        if (s.cutmixAlpha > 0)
          out += "cutmix " + fmt(s.cutmixAlpha);
        break;
      case Kind::Mask:
        out += "mask " + fmt(s.p) + " id " + std::to_string(s.maskId) +
               " vocab " + std::to_string(s.vocab);
        if (s.ignore)
          out += " ignore " + std::to_string(*s.ignore);
        break;
      case Kind::Substitute:
        out += "substitute " + fmt(s.p) + " from " + s.table->path + " [" +
               std::to_string(s.table->rows) + "x" +
               std::to_string(s.table->cols) + "]";
        break;
      }
    }
  }
  return out;
}

//===----------------------------------------------------------------------===//
// The transforms
//===----------------------------------------------------------------------===//

namespace {

/// Per-thread scratch: the crop's copy of the image and the partner sample.
thread_local std::vector<uint8_t> tlCrop, tlPartner, tlPartnerLabels;

uint8_t *scratch(std::vector<uint8_t> &v, size_t bytes) {
  if (v.size() < bytes)
    v.resize(bytes);
  return v.data();
}

void crop(const Clause &cl, const Stage &st, uint8_t *img, uint64_t key) {
  const int64_t span = 2 * st.pad + 1;
  const int64_t dy = (int64_t)below(key, 0, (uint64_t)span) - st.pad;
  const int64_t dx = (int64_t)below(key, 1, (uint64_t)span) - st.pad;
  if (dy == 0 && dx == 0)
    return;
  const size_t es = cl.elemSize, rowBytes = (size_t)cl.w * es;
  const size_t bytes = (size_t)cl.numel * es;
  uint8_t *src = scratch(tlCrop, bytes);
  std::memcpy(src, img, bytes);
  // Output column x reads source column x + dx: columns [x0, x1) exist.
  const int64_t x0 = std::max<int64_t>(0, -dx), x1 = std::min(cl.w, cl.w - dx);
  for (int64_t c = 0; c < cl.c; ++c)
    for (int64_t y = 0; y < cl.h; ++y) {
      uint8_t *out = img + ((size_t)(c * cl.h + y)) * rowBytes;
      int64_t sy = y + dy;
      if (sy < 0 || sy >= cl.h || x0 >= x1) {
        std::memset(out, 0, rowBytes);
        continue;
      }
      const uint8_t *in = src + ((size_t)(c * cl.h + sy)) * rowBytes;
      std::memset(out, 0, (size_t)x0 * es);
      std::memcpy(out + x0 * es, in + (x0 + dx) * es, (size_t)(x1 - x0) * es);
      std::memset(out + x1 * es, 0, (size_t)(cl.w - x1) * es);
    }
}

template <typename T> void flipRows(T *p, int64_t rows, int64_t w) {
  for (int64_t r = 0; r < rows; ++r)
    std::reverse(p + r * w, p + (r + 1) * w);
}

void flip(const Clause &cl, const Stage &st, uint8_t *img, uint64_t key) {
  if (!(uniform(key, 0) < st.flipP))
    return;
  const int64_t rows = cl.c * cl.h;
  switch (cl.elemSize) {
  case 1: flipRows((uint8_t *)img, rows, cl.w); break;
  case 2: flipRows((uint16_t *)img, rows, cl.w); break;
  case 4: flipRows((uint32_t *)img, rows, cl.w); break;
  default: flipRows((uint64_t *)img, rows, cl.w); break;
  }
}

template <typename T> struct Clamp {
  bool on;
  T hi;
  T operator()(T v) const { return on ? std::min(std::max(v, T(0)), hi) : v; }
};

template <typename T>
void jitter(const Clause &cl, const Stage &st, T *x, uint64_t key) {
  const Clamp<T> clamp{cl.clamp, T(cl.maxValue)};
  const int64_t hw = cl.h * cl.w, n = cl.numel;
  T f[3];
  for (int j = 0; j < 3; ++j) {
    double lo = std::max(0.0, 1.0 - st.jitter[j]), hi = 1.0 + st.jitter[j];
    f[j] = T(lo + (hi - lo) * uniform(key, (uint64_t)j));
  }
  // gray(i): ITU-R 601 luma as torchvision's rgb_to_grayscale, or the
  // single channel.
  auto gray = [&](int64_t i) -> T {
    if (cl.c == 1)
      return x[i];
    T r = x[i], g = x[hw + i], b = x[2 * hw + i];
    T s = T(0.2989) * r;
    s = s + T(0.587) * g;
    return s + T(0.114) * b;
  };
  if (st.jitter[0] > 0)
    for (int64_t i = 0; i < n; ++i)
      x[i] = clamp(x[i] * f[0]);
  if (st.jitter[1] > 0) {
    double sum = 0;
    for (int64_t i = 0; i < hw; ++i)
      sum += (double)gray(i);
    const T m = T(sum / (double)hw), fc = f[1], rest = T(1) - fc;
    const T rm = rest * m;
    for (int64_t i = 0; i < n; ++i)
      x[i] = clamp(fc * x[i] + rm);
  }
  if (st.jitter[2] > 0) {
    const T fs = f[2], rest = T(1) - fs;
    for (int64_t i = 0; i < hw; ++i) {
      const T g = rest * gray(i);
      for (int64_t c = 0; c < cl.c; ++c)
        x[c * hw + i] = clamp(fs * x[c * hw + i] + g);
    }
  }
}

template <typename T>
void normalize(const Clause &cl, const Stage &st, T *x) {
  const int64_t channels = cl.image ? cl.c : 1;
  const int64_t per = cl.numel / channels;
  for (int64_t c = 0; c < channels; ++c) {
    const T m = T(st.mean[c]), s = T(st.stdev[c]);
    T *p = x + c * per;
    for (int64_t i = 0; i < per; ++i)
      p[i] = (p[i] - m) / s;
  }
}

template <typename T> void blend(T *x, const T *y, int64_t n, T l) {
  const T r = T(1) - l;
  for (int64_t i = 0; i < n; ++i) {
    T a = x[i] * l, b = y[i] * r;
    x[i] = a + b;
  }
}

void blendAny(DType t, uint8_t *x, const uint8_t *y, int64_t n, double lam) {
  if (t == DType::F64)
    blend((double *)x, (const double *)y, n, lam);
  else
    blend((float *)x, (const float *)y, n, (float)lam);
}

void mask(const Clause &cl, const Stage &st, uint8_t *tok, uint8_t *labels,
          DType labelsType, uint64_t key) {
  for (int64_t p = 0; p < cl.numel; ++p) {
    const uint64_t i = 3 * (uint64_t)p;
    if (!(uniform(key, i) < st.p)) {
      if (st.ignore)
        storeInt(labelsType, labels, p, *st.ignore);
      continue;
    }
    double u = uniform(key, i + 1);
    if (u < 0.8)
      storeInt(cl.dtype, tok, p, st.maskId);
    else if (u < 0.9)
      storeInt(cl.dtype, tok, p, (int64_t)below(key, i + 2, (uint64_t)st.vocab));
  }
}

void substitute(const Clause &cl, const Stage &st, uint8_t *tok, uint64_t key) {
  const SubTable &t = *st.table;
  for (int64_t p = 0; p < cl.numel; ++p) {
    const uint64_t i = 2 * (uint64_t)p;
    if (!(uniform(key, i) < st.p))
      continue;
    int64_t v = loadInt(cl.dtype, tok, p);
    if (cl.dtype == DType::U64 && v < 0)
      continue;
    if (v < 0 || v >= t.rows)
      continue;
    int64_t b = t.offsets[v], k = t.offsets[v + 1] - b;
    if (k > 0)
      storeInt(cl.dtype, tok, p, t.entries[b + (int64_t)below(key, i + 1, (uint64_t)k)]);
  }
}

/// Runs one image stage (not Mix) on `img`.
void runImageStage(const Clause &cl, const Stage &st, uint8_t *img,
                   uint64_t key) {
  switch (st.kind) {
  case Kind::Crop: crop(cl, st, img, key); break;
  case Kind::Flip: flip(cl, st, img, key); break;
  case Kind::Jitter:
    if (cl.dtype == DType::F64)
      jitter(cl, st, (double *)img, key);
    else
      jitter(cl, st, (float *)img, key);
    break;
  case Kind::Normalize:
    if (cl.dtype == DType::F64)
      normalize(cl, st, (double *)img);
    else
      normalize(cl, st, (float *)img);
    break;
  default: break;
  }
}

} // namespace

void Augmenter::apply(std::vector<rt::HostTensor> &batch, int64_t b,
                      uint64_t sampleId, uint64_t seed, uint64_t epoch,
                      const FetchSample &fetch) const {
  const Impl &m = *impl_;
  if (batch.size() != m.inputs.size())
    throw std::logic_error("Augmenter::apply: the batch has " +
                           std::to_string(batch.size()) + " inputs, parse saw " +
                           std::to_string(m.inputs.size()));
  auto row = [&](size_t input) -> uint8_t * {
    rt::HostTensor &t = batch[input];
    if (t.shape().empty() || b < 0 || b >= t.shape()[0] ||
        t.bytes() != (size_t)t.shape()[0] * m.sampleBytes[input])
      throw std::logic_error("Augmenter::apply: sample " + std::to_string(b) +
                             " of input " + m.inputs[input].name +
                             " does not match its spec");
    return static_cast<uint8_t *>(t.data()) + (size_t)b * m.sampleBytes[input];
  };
  for (const Stage &st : m.stages) {
    const Clause &cl = m.clauses[st.clause];
    uint8_t *x = row(cl.input);
    const uint64_t key = streamKey(seed, epoch, sampleId, st.slot);
    switch (st.kind) {
    case Kind::Mask: {
      uint8_t *lab = st.ignore ? row(*m.labels) : nullptr;
      mask(cl, st, x, lab, st.ignore ? m.inputs[*m.labels].dtype : DType::I64,
           key);
      break;
    }
    case Kind::Substitute:
      substitute(cl, st, x, key);
      break;
    case Kind::Mix: {
      bool cut = st.cutmixAlpha > 0 &&
                 (st.mixupAlpha == 0 || uniform(key, 0) < 0.5);
      uint64_t partner = below(key, 1, m.numSamples);
      uint64_t cursor = 4;
      double lam = sampleBeta(key, cursor, cut ? st.cutmixAlpha : st.mixupAlpha);
      // The partner, raw, through this clause's transforms before this one.
      uint8_t *px = scratch(tlPartner, m.sampleBytes[cl.input]);
      fetch(cl.input, partner, px);
      for (size_t i : cl.stages) {
        if (i == st.slot)
          break;
        runImageStage(cl, m.stages[i], px,
                      streamKey(seed, epoch, sampleId, kPartnerSlot + i));
      }
      if (cut) {
        const double r = std::sqrt(1.0 - lam);
        const int64_t ch = (int64_t)((double)cl.h * r),
                      cw = (int64_t)((double)cl.w * r);
        const int64_t cy = (int64_t)below(key, 3, (uint64_t)cl.h),
                      cx = (int64_t)below(key, 2, (uint64_t)cl.w);
        const int64_t y1 = std::clamp<int64_t>(cy - ch / 2, 0, cl.h),
                      y2 = std::clamp<int64_t>(cy + ch / 2, 0, cl.h),
                      x1 = std::clamp<int64_t>(cx - cw / 2, 0, cl.w),
                      x2 = std::clamp<int64_t>(cx + cw / 2, 0, cl.w);
        const size_t es = cl.elemSize;
        if (x2 > x1)
          for (int64_t c = 0; c < cl.c; ++c)
            for (int64_t y = y1; y < y2; ++y) {
              size_t off = ((size_t)((c * cl.h + y) * cl.w + x1)) * es;
              std::memcpy(x + off, px + off, (size_t)(x2 - x1) * es);
            }
        lam = 1.0 - (double)((y2 - y1) * (x2 - x1)) / (double)(cl.h * cl.w);
      } else {
        blendAny(cl.dtype, x, px, cl.numel, lam);
      }
      const DataSpec &ls = m.inputs[*m.labels];
      uint8_t *ly = scratch(tlPartnerLabels, m.sampleBytes[*m.labels]);
      fetch(*m.labels, partner, ly);
      blendAny(ls.dtype, row(*m.labels), ly,
               (int64_t)(m.sampleBytes[*m.labels] / rt::dtypeSize(ls.dtype)),
               lam);
      break;
    }
    default:
      runImageStage(cl, st, x, key);
      break;
    }
  }
}

} // namespace kiln::train
