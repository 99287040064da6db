//===- TensorIO.cpp - .npy, TensorProto .pb and safetensors -----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Readers check every size and offset against the file before touching data;
// writers go through writeFileAtomic (FileIO.h) so that a crash never leaves
// a half-written file under the real name. Every message names the file.
// Tensors read and written here are HostTensors, whose storage comes from
// the device seam's host allocator (Device.h); device-resident data reaches
// a file only after a Device's copyToHost (Program::getParam does that).
//===----------------------------------------------------------------------===//
#include "kiln/runtime/FileIO.h"
#include "kiln/runtime/Kernel.h"
#include "kiln/runtime/Runtime.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string_view>

namespace kiln::rt {

using nlohmann::json;

namespace {

/// Tensors above this many bytes are refused (keeps every size sum exact).
constexpr uint64_t kMaxTensorBytes = uint64_t(1) << 60;

[[noreturn]] void fail(const std::string &file, const std::string &msg) {
  throw Error(file + ": " + msg);
}

std::string readFileOrThrow(const std::string &path) {
  std::string bytes, err;
  if (!readWholeFile(path, bytes, err))
    throw Error(err);
  return bytes;
}

void writeAtomicOrThrow(const std::string &path,
                        const std::vector<std::string_view> &parts) {
  std::string err;
  if (!writeFileAtomic(path, parts, err))
    throw Error(err);
}

/// numel * elemSize of `shape` without overflow; false when too large.
bool shapeBytes(const std::vector<int64_t> &shape, size_t elemSize,
                uint64_t &bytes) {
  uint64_t nonZero = 1;
  bool zero = false;
  for (int64_t d : shape) {
    if (d < 0 || (uint64_t)d > kMaxTensorBytes)
      return false;
    if (d == 0)
      zero = true;
    else if (__builtin_mul_overflow(nonZero, (uint64_t)d, &nonZero) ||
             nonZero > kMaxTensorBytes / elemSize)
      return false;
  }
  bytes = zero ? 0 : nonZero * elemSize;
  return true;
}

std::string shapeStr(const std::vector<int64_t> &shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1)
    s += ",";
  return s + ")";
}

HostTensor makeTensor(const std::string &file, DType dtype,
                      std::vector<int64_t> shape, const void *data,
                      uint64_t bytes) {
  TensorDesc d;
  d.dtype = dtype;
  d.shape = std::move(shape);
  HostTensor t;
  try {
    t = HostTensor(d);
  } catch (const std::bad_alloc &) {
    fail(file, "out of memory for a " + d.str() + " tensor");
  }
  if (bytes)
    std::memcpy(t.data(), data, bytes);
  return t;
}

//===----------------------------------------------------------------------===//
// .npy
//===----------------------------------------------------------------------===//

constexpr char kNpyMagic[] = "\x93NUMPY";

/// A parser for the header's Python literal:
///   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class NpyHeaderParser {
public:
  NpyHeaderParser(const std::string &file, std::string_view text)
      : file_(file), s_(text) {}

  void parse(std::string &descr, bool &fortran, std::vector<int64_t> &shape) {
    bool haveDescr = false, haveFortran = false, haveShape = false;
    expect('{');
    skipSpace();
    while (!peek('}')) {
      std::string key = parseString();
      expect(':');
      if (key == "descr") {
        descr = parseString();
        haveDescr = true;
      } else if (key == "fortran_order") {
        fortran = parseBool();
        haveFortran = true;
      } else if (key == "shape") {
        shape = parseTuple();
        haveShape = true;
      } else {
        bad("unexpected key '" + key + "'");
      }
      skipSpace();
      if (peek(','))
        ++pos_;
      else if (!peek('}'))
        bad("expected ',' or '}'");
      skipSpace();
    }
    ++pos_;
    if (!haveDescr || !haveFortran || !haveShape)
      bad("needs 'descr', 'fortran_order' and 'shape'");
  }

private:
  const std::string &file_;
  std::string_view s_;
  size_t pos_ = 0;

  [[noreturn]] void bad(const std::string &why) {
    fail(file_, "malformed .npy header: " + why);
  }
  void skipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' ||
                                s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }
  bool peek(char c) {
    skipSpace();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  void expect(char c) {
    if (!peek(c))
      bad(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string parseString() {
    skipSpace();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"'))
      bad("expected a string");
    char q = s_[pos_++];
    size_t end = s_.find(q, pos_);
    if (end == std::string_view::npos)
      bad("unterminated string");
    std::string out(s_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return out;
  }
  bool parseBool() {
    skipSpace();
    if (s_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (s_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    bad("expected True or False");
  }
  std::vector<int64_t> parseTuple() {
    std::vector<int64_t> out;
    expect('(');
    while (!peek(')')) {
      skipSpace();
      if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9')
        bad("shape must be a tuple of non-negative integers");
      uint64_t v = 0;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
        v = v * 10 + (uint64_t)(s_[pos_++] - '0');
        if (v > kMaxTensorBytes)
          bad("dimension too large");
      }
      if (pos_ < s_.size() && s_[pos_] == 'L') // Python 2 longs
        ++pos_;
      out.push_back((int64_t)v);
      if (peek(','))
        ++pos_;
      else if (!peek(')'))
        bad("expected ',' or ')' in the shape");
    }
    ++pos_;
    return out;
  }
};

bool npyDType(const std::string &file, const std::string &descr, DType &out) {
  if (descr.size() < 2)
    return false;
  char order = descr[0];
  std::string code = descr.substr(1);
  static const std::pair<const char *, DType> kCodes[] = {
      {"f4", DType::F32}, {"f8", DType::F64}, {"f2", DType::F16},
      {"i8", DType::I64}, {"i4", DType::I32}, {"i2", DType::I16},
      {"i1", DType::I8},  {"u1", DType::U8},  {"u2", DType::U16},
      {"u4", DType::U32}, {"u8", DType::U64}, {"b1", DType::Bool}};
  for (const auto &[c, t] : kCodes) {
    if (code != c)
      continue;
    bool oneByte = dtypeSize(t) == 1;
    if (order == '>' && !oneByte)
      fail(file, "big-endian data ('" + descr + "') is not supported");
    if (order == '<' || order == '=' || (order == '|' && oneByte) ||
        (order == '>' && oneByte)) {
      out = t;
      return true;
    }
    return false;
  }
  return false;
}

NpyLayout parseNpyImpl(const std::string &file, const uint8_t *p, size_t size) {
  if (size < 6 || std::memcmp(p, kNpyMagic, 6) != 0)
    fail(file, "not a .npy file (bad magic)");
  if (size < 10)
    fail(file, "truncated header");
  unsigned major = p[6], minor = p[7];
  size_t headerLen, start;
  if (major == 1) {
    headerLen = p[8] | (size_t)p[9] << 8;
    start = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12)
      fail(file, "truncated header");
    headerLen = p[8] | (size_t)p[9] << 8 | (size_t)p[10] << 16 |
                (size_t)p[11] << 24;
    start = 12;
  } else {
    fail(file, "unsupported .npy format version " + std::to_string(major) +
                   "." + std::to_string(minor));
  }
  if (headerLen > size - start)
    fail(file, "truncated header");
  NpyLayout out;
  std::string descr;
  bool fortran = false;
  NpyHeaderParser(file, std::string_view(reinterpret_cast<const char *>(p) + start,
                                         headerLen))
      .parse(descr, fortran, out.shape);
  if (!npyDType(file, descr, out.dtype))
    fail(file, "unsupported dtype '" + descr + "'");
  if (fortran)
    fail(file, "fortran_order True is not supported (save a C-order array)");
  if (!shapeBytes(out.shape, dtypeSize(out.dtype), out.dataBytes))
    fail(file, "shape " + shapeStr(out.shape) + " is too large");
  out.dataOffset = start + headerLen;
  uint64_t have = size - out.dataOffset;
  if (have != out.dataBytes)
    fail(file, (have < out.dataBytes ? "truncated data: " : "size mismatch: ") +
                   std::to_string(have) + " data bytes, shape " +
                   shapeStr(out.shape) + " of '" + descr + "' needs " +
                   std::to_string(out.dataBytes));
  return out;
}

HostTensor readNpy(const std::string &file, const uint8_t *p, size_t size) {
  NpyLayout l = parseNpyImpl(file, p, size);
  const uint8_t *data = p + l.dataOffset;
  if (l.dtype == DType::Bool)
    for (uint64_t i = 0; i < l.dataBytes; ++i)
      if (data[i] > 1)
        fail(file, "boolean data holds a value other than 0 and 1");
  return makeTensor(file, l.dtype, std::move(l.shape), data, l.dataBytes);
}

//===----------------------------------------------------------------------===//
// ONNX TensorProto
//===----------------------------------------------------------------------===//

template <typename Dst, typename Field>
void copyTyped(const Field &src, HostTensor &t) {
  Dst *d = t.as<Dst>();
  for (int i = 0; i < src.size(); ++i)
    d[i] = (Dst)src.Get(i);
}

HostTensor readTensorProto(const std::string &file, const uint8_t *p,
                           size_t size) {
  onnx::TensorProto tp;
  if (size > (size_t)INT32_MAX || !tp.ParseFromArray(p, (int)size))
    fail(file, "not a .npy file or an ONNX TensorProto");
  if (tp.data_location() == onnx::TensorProto::EXTERNAL)
    fail(file, "tensors with external data are not supported");
  if (tp.has_segment())
    fail(file, "segmented tensors are not supported");
  using TP = onnx::TensorProto;
  DType dtype;
  switch (tp.data_type()) {
  case TP::FLOAT: dtype = DType::F32; break;
  case TP::DOUBLE: dtype = DType::F64; break;
  case TP::FLOAT16: dtype = DType::F16; break;
  case TP::BFLOAT16: dtype = DType::BF16; break;
  case TP::INT64: dtype = DType::I64; break;
  case TP::INT32: dtype = DType::I32; break;
  case TP::INT16: dtype = DType::I16; break;
  case TP::INT8: dtype = DType::I8; break;
  case TP::UINT64: dtype = DType::U64; break;
  case TP::UINT32: dtype = DType::U32; break;
  case TP::UINT16: dtype = DType::U16; break;
  case TP::UINT8: dtype = DType::U8; break;
  case TP::BOOL: dtype = DType::Bool; break;
  case TP::STRING: fail(file, "string tensors are not supported");
  case TP::UNDEFINED:
    fail(file, "not a .npy file or an ONNX TensorProto (no data type)");
  default:
    fail(file, "unsupported TensorProto data type " +
                   std::to_string(tp.data_type()));
  }
  std::vector<int64_t> shape(tp.dims().begin(), tp.dims().end());
  for (int64_t d : shape)
    if (d < 0)
      fail(file, "negative dimension in shape " + shapeStr(shape));
  uint64_t bytes;
  if (!shapeBytes(shape, dtypeSize(dtype), bytes))
    fail(file, "shape " + shapeStr(shape) + " is too large");
  uint64_t numel = bytes / dtypeSize(dtype);
  if (std::find(shape.begin(), shape.end(), 0) != shape.end())
    numel = 0;

  if (tp.has_raw_data()) {
    const std::string &raw = tp.raw_data();
    if (raw.size() != bytes)
      fail(file, "raw_data has " + std::to_string(raw.size()) + " bytes, " +
                     "shape " + shapeStr(shape) + " of " + dtypeName(dtype) +
                     " needs " + std::to_string(bytes));
    HostTensor t = makeTensor(file, dtype, std::move(shape), raw.data(), bytes);
    if (dtype == DType::Bool)
      for (uint64_t i = 0; i < bytes; ++i)
        if (t.as<uint8_t>()[i] > 1)
          fail(file, "boolean data holds a value other than 0 and 1");
    return t;
  }

  // The typed fields (onnx.proto): which one holds each data type.
  int64_t count;
  switch (dtype) {
  case DType::F32: count = tp.float_data_size(); break;
  case DType::F64: count = tp.double_data_size(); break;
  case DType::I64: count = tp.int64_data_size(); break;
  case DType::U64: case DType::U32: count = tp.uint64_data_size(); break;
  default: count = tp.int32_data_size(); break;
  }
  if ((uint64_t)count != numel)
    fail(file, "TensorProto has " + std::to_string(count) + " elements, shape " +
                   shapeStr(shape) + " needs " + std::to_string(numel));
  HostTensor t = makeTensor(file, dtype, std::move(shape), nullptr, 0);
  switch (dtype) {
  case DType::F32: copyTyped<float>(tp.float_data(), t); break;
  case DType::F64: copyTyped<double>(tp.double_data(), t); break;
  case DType::I64: copyTyped<int64_t>(tp.int64_data(), t); break;
  case DType::U64: copyTyped<uint64_t>(tp.uint64_data(), t); break;
  case DType::U32: copyTyped<uint32_t>(tp.uint64_data(), t); break;
  case DType::I32: copyTyped<int32_t>(tp.int32_data(), t); break;
  case DType::I16: copyTyped<int16_t>(tp.int32_data(), t); break;
  case DType::I8: copyTyped<int8_t>(tp.int32_data(), t); break;
  case DType::U16: case DType::F16: case DType::BF16: // 16-bit patterns
    copyTyped<uint16_t>(tp.int32_data(), t);
    break;
  case DType::U8: copyTyped<uint8_t>(tp.int32_data(), t); break;
  case DType::Bool: {
    uint8_t *d = t.as<uint8_t>();
    for (int i = 0; i < tp.int32_data_size(); ++i)
      d[i] = tp.int32_data(i) != 0;
    break;
  }
  }
  return t;
}

//===----------------------------------------------------------------------===//
// safetensors
//===----------------------------------------------------------------------===//

const std::pair<const char *, DType> kSafetensorsTypes[] = {
    {"F32", DType::F32}, {"F64", DType::F64}, {"F16", DType::F16},
    {"BF16", DType::BF16}, {"I64", DType::I64}, {"I32", DType::I32},
    {"I16", DType::I16}, {"I8", DType::I8}, {"U64", DType::U64},
    {"U32", DType::U32}, {"U16", DType::U16}, {"U8", DType::U8},
    {"BOOL", DType::Bool}};

const char *safetensorsName(DType t) {
  for (const auto &[n, d] : kSafetensorsTypes)
    if (d == t)
      return n;
  return "?";
}

/// The reference implementation's limit on the header.
constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;

bool asIndex(const json &v, uint64_t &out) {
  if (v.is_number_unsigned()) {
    out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer() && v.get<int64_t>() >= 0) {
    out = (uint64_t)v.get<int64_t>();
    return true;
  }
  return false;
}

void readSafetensorsImpl(const std::string &file, const uint8_t *p,
                         size_t size,
                         std::vector<std::pair<std::string, HostTensor>> &out) {
  if (size < 8)
    fail(file, "truncated header");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= (uint64_t)p[i] << (8 * i);
  if (n > kMaxSafetensorsHeader)
    fail(file, "header length " + std::to_string(n) + " is too large");
  if (n > size - 8)
    fail(file, "truncated header");
  json header;
  try {
    const char *text = reinterpret_cast<const char *>(p) + 8;
    header = json::parse(text, text + n);
  } catch (const json::exception &e) {
    fail(file, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object())
    fail(file, "header is not a JSON object");
  uint64_t dataSize = size - 8 - n;
  const uint8_t *data = p + 8 + n;

  struct Entry {
    uint64_t begin, end;
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
  };
  std::vector<Entry> entries;
  for (const auto &[name, v] : header.items()) {
    if (name == "__metadata__") {
      if (!v.is_object())
        fail(file, "__metadata__ must be an object");
      for (const auto &[k, m] : v.items())
        if (!m.is_string())
          fail(file, "__metadata__ value '" + k + "' is not a string");
      continue;
    }
    std::string where = "tensor '" + name + "': ";
    if (!v.is_object())
      fail(file, where + "entry is not an object");
    Entry e;
    e.name = name;
    auto dt = v.find("dtype");
    if (dt == v.end() || !dt->is_string())
      fail(file, where + "no dtype");
    bool known = false;
    for (const auto &[tn, t] : kSafetensorsTypes)
      if (*dt == tn) {
        e.dtype = t;
        known = true;
      }
    if (!known)
      fail(file, where + "unsupported dtype '" + dt->get<std::string>() + "'");
    auto sh = v.find("shape");
    if (sh == v.end() || !sh->is_array())
      fail(file, where + "no shape");
    for (const json &d : *sh) {
      uint64_t u;
      if (!asIndex(d, u) || u > kMaxTensorBytes)
        fail(file, where + "shape must hold non-negative integers");
      e.shape.push_back((int64_t)u);
    }
    auto off = v.find("data_offsets");
    if (off == v.end() || !off->is_array() || off->size() != 2 ||
        !asIndex((*off)[0], e.begin) || !asIndex((*off)[1], e.end) ||
        e.begin > e.end)
      fail(file, where + "data_offsets must be [begin, end] with begin <= end");
    if (e.end > dataSize)
      fail(file, where + "data [" + std::to_string(e.begin) + ", " +
                     std::to_string(e.end) + ") runs past the " +
                     std::to_string(dataSize) + "-byte data section");
    uint64_t need;
    if (!shapeBytes(e.shape, dtypeSize(e.dtype), need))
      fail(file, where + "shape is too large");
    if (e.end - e.begin != need)
      fail(file, where + "has " + std::to_string(e.end - e.begin) +
                     " data bytes, shape " + shapeStr(e.shape) + " of " +
                     dt->get<std::string>() + " needs " + std::to_string(need));
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(), [](const Entry &a, const Entry &b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (size_t i = 1; i < entries.size(); ++i)
    if (entries[i].begin < entries[i - 1].end)
      fail(file, "tensors '" + entries[i - 1].name + "' and '" +
                     entries[i].name + "' overlap");
  std::vector<std::pair<std::string, HostTensor>> result;
  result.reserve(entries.size());
  for (Entry &e : entries) {
    HostTensor t = makeTensor(file, e.dtype, std::move(e.shape),
                              data + e.begin, e.end - e.begin);
    result.emplace_back(std::move(e.name), std::move(t));
  }
  out = std::move(result);
}

void writeSafetensorsImpl(
    const std::string &file,
    const std::vector<std::pair<std::string, const HostTensor *>> &tensors) {
  json header = json::object();
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const auto &[name, t] : tensors) {
    if (!t)
      fail(file, "tensor '" + name + "' is null");
    if (name == "__metadata__")
      fail(file, "'__metadata__' cannot name a tensor");
    if (!seen.insert(name).second)
      fail(file, "tensor name '" + name + "' is given twice");
    if (t->bytes() && !t->data())
      fail(file, "tensor '" + name + "' has no data");
    json e;
    e["dtype"] = safetensorsName(t->dtype());
    e["shape"] = t->shape();
    e["data_offsets"] = {offset, offset + t->bytes()};
    offset += t->bytes();
    header[name] = std::move(e);
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception &e) {
    fail(file, std::string("cannot write the header: ") + e.what());
  }
  while (text.size() % 8) // the reference writer pads with spaces
    text.push_back(' ');
  std::string len(8, '\0');
  for (int i = 0; i < 8; ++i)
    len[i] = char((uint64_t)text.size() >> (8 * i) & 0xff);
  std::vector<std::string_view> parts = {len, text};
  for (const auto &kv : tensors)
    if (kv.second->bytes())
      parts.emplace_back(static_cast<const char *>(kv.second->data()),
                         kv.second->bytes());
  writeAtomicOrThrow(file, parts);
}

void writeNpyImpl(const std::string &file, const HostTensor &t) {
  const char *descr;
  switch (t.dtype()) {
  case DType::F32: descr = "<f4"; break;
  case DType::F64: descr = "<f8"; break;
  case DType::F16: descr = "<f2"; break;
  case DType::I64: descr = "<i8"; break;
  case DType::I32: descr = "<i4"; break;
  case DType::I16: descr = "<i2"; break;
  case DType::I8: descr = "|i1"; break;
  case DType::U64: descr = "<u8"; break;
  case DType::U32: descr = "<u4"; break;
  case DType::U16: descr = "<u2"; break;
  case DType::U8: descr = "|u1"; break;
  case DType::Bool: descr = "|b1"; break;
  default:
    fail(file, std::string(dtypeName(t.dtype())) +
                   " has no .npy dtype (write safetensors instead)");
  }
  if (t.bytes() && !t.data())
    fail(file, "the tensor has no data");
  std::string dict = std::string("{'descr': '") + descr +
                     "', 'fortran_order': False, 'shape': " + shapeStr(t.shape()) +
                     ", }";
  // Pad with spaces and a newline so that the data starts at a multiple of 64.
  bool v2 = dict.size() + 1 + 10 > 65535;
  size_t pre = v2 ? 12 : 10;
  size_t total = (pre + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - pre - dict.size() - 1, ' ');
  dict.push_back('\n');
  std::string head(kNpyMagic, 6);
  head.push_back(v2 ? 2 : 1);
  head.push_back(0);
  size_t n = dict.size();
  for (size_t i = 0; i < (v2 ? 4u : 2u); ++i)
    head.push_back(char((n >> (8 * i)) & 0xff));
  head += dict;
  writeAtomicOrThrow(
      file, {head, std::string_view(static_cast<const char *>(t.data()),
                                    t.bytes())});
}

template <typename F> bool guarded(const std::string &file, std::string &err, F f) {
  try {
    f();
    err.clear();
    return true;
  } catch (const Error &e) {
    err = e.what();
  } catch (const std::bad_alloc &) {
    err = file + ": out of memory";
  } catch (const std::exception &e) {
    err = file + ": " + e.what();
  } catch (...) {
    err = file + ": unknown error";
  }
  for (char &c : err)
    if (c == '\n' || c == '\r')
      c = ' ';
  return false;
}

} // namespace

bool readTensorBytes(const void *data, size_t size, const std::string &name,
                     HostTensor &out, std::string &err) noexcept {
  return guarded(name, err, [&] {
    const uint8_t *p = static_cast<const uint8_t *>(data);
    if (size >= 6 && std::memcmp(p, kNpyMagic, 6) == 0)
      out = readNpy(name, p, size);
    else if (size == 0)
      fail(name, "empty file");
    else
      out = readTensorProto(name, p, size);
  });
}

bool parseNpy(const void *data, size_t size, const std::string &name,
              NpyLayout &out, std::string &err) noexcept {
  return guarded(name, err, [&] {
    out = parseNpyImpl(name, static_cast<const uint8_t *>(data), size);
  });
}

bool readTensorFile(const std::string &path, HostTensor &out,
                    std::string &err) noexcept {
  std::string bytes;
  if (!guarded(path, err, [&] { bytes = readFileOrThrow(path); }))
    return false;
  return readTensorBytes(bytes.data(), bytes.size(), path, out, err);
}

bool writeNpy(const std::string &path, const HostTensor &t,
              std::string &err) noexcept {
  return guarded(path, err, [&] { writeNpyImpl(path, t); });
}

bool readSafetensors(const std::string &path,
                     std::vector<std::pair<std::string, HostTensor>> &out,
                     std::string &err) noexcept {
  std::string bytes;
  if (!guarded(path, err, [&] { bytes = readFileOrThrow(path); }))
    return false;
  return readSafetensorsBytes(bytes.data(), bytes.size(), path, out, err);
}

bool readSafetensorsBytes(const void *data, size_t size, const std::string &name,
                          std::vector<std::pair<std::string, HostTensor>> &out,
                          std::string &err) noexcept {
  return guarded(name, err, [&] {
    readSafetensorsImpl(name, static_cast<const uint8_t *>(data), size, out);
  });
}

bool writeSafetensors(
    const std::string &path,
    const std::vector<std::pair<std::string, const HostTensor *>> &tensors,
    std::string &err) noexcept {
  return guarded(path, err, [&] { writeSafetensorsImpl(path, tensors); });
}

} // namespace kiln::rt
