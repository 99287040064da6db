//===- TensorIOTest.cpp - .npy, TensorProto and safetensors I/O ---*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Fixture files from test/data/make_fixtures.py (numpy and onnx wrote them),
// round trips through the writers, and malformed files built by hand.
//===----------------------------------------------------------------------===//
#include "kiln/runtime/Runtime.h"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <sys/stat.h>
#include <unistd.h>

using namespace kiln::rt;

namespace {

std::string data(const std::string &name) {
  return std::string(KILN_RT_TEST_DATA) + "/" + name;
}

std::string tmp(const std::string &name) {
  return ::testing::TempDir() + "/kiln_tio_" + std::to_string(::getpid()) + "_" +
         name;
}

double elem(const HostTensor &t, int64_t i) {
  const void *p = t.data();
  switch (t.dtype()) {
  case DType::F32: return static_cast<const float *>(p)[i];
  case DType::F64: return static_cast<const double *>(p)[i];
  case DType::F16: return halfToFloat(static_cast<const uint16_t *>(p)[i]);
  case DType::BF16: return bf16ToFloat(static_cast<const uint16_t *>(p)[i]);
  case DType::I64: return (double)static_cast<const int64_t *>(p)[i];
  case DType::I32: return static_cast<const int32_t *>(p)[i];
  case DType::I16: return static_cast<const int16_t *>(p)[i];
  case DType::I8: return static_cast<const int8_t *>(p)[i];
  case DType::U64: return (double)static_cast<const uint64_t *>(p)[i];
  case DType::U32: return static_cast<const uint32_t *>(p)[i];
  case DType::U16: return static_cast<const uint16_t *>(p)[i];
  case DType::U8: return static_cast<const uint8_t *>(p)[i];
  case DType::Bool: return static_cast<const uint8_t *>(p)[i];
  }
  return 0;
}

/// Reads `name` from test/data and checks it is arange(6) as (2, 3).
void expectArange(const std::string &name, const char *desc) {
  SCOPED_TRACE(name);
  HostTensor t;
  std::string err;
  ASSERT_TRUE(readTensorFile(data(name), t, err)) << err;
  EXPECT_EQ(t.desc().str(), desc);
  for (int i = 0; i < 6 && i < t.numel(); ++i)
    EXPECT_EQ(elem(t, i), i);
}

std::string readError(const std::string &path) {
  HostTensor t;
  std::string err;
  EXPECT_FALSE(readTensorFile(path, t, err)) << path;
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  return err;
}

std::string bytesError(const std::string &bytes) {
  HostTensor t;
  std::string err;
  EXPECT_FALSE(readTensorBytes(bytes.data(), bytes.size(), "mem.npy", t, err));
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  return err;
}

void writeFile(const std::string &path, const std::string &bytes) {
  std::FILE *f = std::fopen(path.c_str(), "wb");
  ASSERT_TRUE(f);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

std::string readFile(const std::string &path) {
  std::string s;
  std::FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    return s;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
    s.append(buf, n);
  std::fclose(f);
  return s;
}

/// A .npy 1.0 file with the given header dict and data.
std::string npy(const std::string &dict, const std::string &payload) {
  std::string h = dict + "\n";
  std::string s = "\x93NUMPY";
  s.push_back(1);
  s.push_back(0);
  s.push_back((char)(h.size() & 0xff));
  s.push_back((char)(h.size() >> 8));
  return s + h + payload;
}

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

HostTensor randomTensor(std::mt19937 &rng, DType dt, std::vector<int64_t> shape) {
  HostTensor t(TensorDesc{dt, shape});
  uint8_t *p = t.as<uint8_t>();
  for (size_t i = 0; i < t.bytes(); ++i)
    p[i] = (uint8_t)rng();
  if (dt == DType::Bool)
    for (size_t i = 0; i < t.bytes(); ++i)
      p[i] &= 1;
  return t;
}

} // namespace

TEST(TensorIO, NpyFixtures) {
  expectArange("npy_f4.npy", "f32[2,3]");
  expectArange("npy_f8.npy", "f64[2,3]");
  expectArange("npy_f2.npy", "f16[2,3]");
  expectArange("npy_i8.npy", "i64[2,3]");
  expectArange("npy_i4.npy", "i32[2,3]");
  expectArange("npy_i2.npy", "i16[2,3]");
  expectArange("npy_i1.npy", "i8[2,3]");
  expectArange("npy_u1.npy", "u8[2,3]");
  expectArange("npy_u2.npy", "u16[2,3]");
  expectArange("npy_u4.npy", "u32[2,3]");
  expectArange("npy_u8.npy", "u64[2,3]");
  expectArange("npy_v2.npy", "f32[2,3]");
  expectArange("npy_v3.npy", "f32[2,3]");
  HostTensor t;
  std::string err;
  ASSERT_TRUE(readTensorFile(data("npy_b1.npy"), t, err)) << err;
  EXPECT_EQ(t.desc().str(), "i1[2,3]");
  EXPECT_EQ(std::vector<uint8_t>(t.as<uint8_t>(), t.as<uint8_t>() + 6),
            (std::vector<uint8_t>{1, 0, 1, 0, 0, 1}));
  ASSERT_TRUE(readTensorFile(data("npy_scalar.npy"), t, err)) << err;
  EXPECT_EQ(t.desc().str(), "f64[]");
  EXPECT_EQ(elem(t, 0), 2.5);
  ASSERT_TRUE(readTensorFile(data("npy_empty.npy"), t, err)) << err;
  EXPECT_EQ(t.desc().str(), "f32[0,3]");
}

TEST(TensorIO, NpyRefused) {
  EXPECT_EQ(readError(data("npy_fortran.npy")),
            data("npy_fortran.npy") +
                ": fortran_order True is not supported (save a C-order array)");
  EXPECT_EQ(readError(data("npy_bigendian.npy")),
            data("npy_bigendian.npy") +
                ": big-endian data ('>f4') is not supported");
  EXPECT_EQ(readError(data("npy_complex.npy")),
            data("npy_complex.npy") + ": unsupported dtype '<c8'");
  EXPECT_EQ(readError(data("npy_truncated.npy")),
            data("npy_truncated.npy") +
                ": truncated data: 19 data bytes, shape (2, 3) of '<f4' needs 24");
  EXPECT_EQ(readError(data("no_such_file.npy")),
            data("no_such_file.npy") + ": No such file or directory");
  EXPECT_EQ(readError(std::string(KILN_RT_TEST_DATA)),
            std::string(KILN_RT_TEST_DATA) + ": not a regular file (a directory)");
  // A FIFO is refused at once: open() without O_NONBLOCK would wait for a
  // writer forever (issue 21, defect 9).
  char dir[] = "/tmp/kiln-fifo-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  std::string fifo = std::string(dir) + "/x.npy";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(readError(fifo), fifo + ": not a regular file (a FIFO)");
  ::unlink(fifo.c_str());
  ::rmdir(dir);
}

TEST(TensorIO, NpyMalformedHeaders) {
  const std::string f6(24, '\0');
  std::string ok = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", f6);
  HostTensor t;
  std::string err;
  ASSERT_TRUE(readTensorBytes(ok.data(), ok.size(), "mem.npy", t, err)) << err;
  EXPECT_EQ(t.desc().str(), "f32[2,3]");
  // Whitespace, double quotes, key order, no trailing comma, 1-tuples.
  std::string odd = npy("{ \"shape\" : ( 6 , ) ,\"fortran_order\":False,'descr':'<f4'}", f6);
  ASSERT_TRUE(readTensorBytes(odd.data(), odd.size(), "mem.npy", t, err)) << err;
  EXPECT_EQ(t.desc().str(), "f32[6]");

  EXPECT_EQ(bytesError(ok.substr(0, 9)), "mem.npy: truncated header");
  EXPECT_EQ(bytesError(ok.substr(0, 30)), "mem.npy: truncated header");
  std::string v4 = ok;
  v4[6] = 4;
  EXPECT_EQ(bytesError(v4), "mem.npy: unsupported .npy format version 4.0");
  EXPECT_EQ(bytesError(ok + "x"),
            "mem.npy: size mismatch: 25 data bytes, shape (2, 3) of '<f4' "
            "needs 24");
  EXPECT_EQ(bytesError(npy("{'descr': '<f4', 'shape': (2, 3)}", f6)),
            "mem.npy: malformed .npy header: needs 'descr', 'fortran_order' and "
            "'shape'");
  EXPECT_EQ(bytesError(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3)}", f6)),
            "mem.npy: malformed .npy header: shape must be a tuple of "
            "non-negative integers");
  EXPECT_EQ(bytesError(npy("{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3)}", f6)),
            "mem.npy: malformed .npy header: expected True or False");
  EXPECT_EQ(bytesError(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)", f6)),
            "mem.npy: malformed .npy header: expected ',' or '}'");
  EXPECT_EQ(bytesError(npy("{'descr: '<f4'}", f6)),
            "mem.npy: malformed .npy header: expected ':'");
  EXPECT_EQ(bytesError(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}", f6)),
            "mem.npy: malformed .npy header: unexpected key 'x'");
  EXPECT_EQ(bytesError(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", f6)),
            "mem.npy: malformed .npy header: dimension too large");
  EXPECT_EQ(bytesError(npy("{'descr': '<f8', 'fortran_order': False, 'shape': (1073741824, 1073741824, 1073741824)}", f6)),
            "mem.npy: shape (1073741824, 1073741824, 1073741824) is too large");
  EXPECT_EQ(bytesError(npy("{'descr': '|b1', 'fortran_order': False, 'shape': (2,)}",
                           std::string("\x01\x02", 2))),
            "mem.npy: boolean data holds a value other than 0 and 1");
  EXPECT_EQ(bytesError(""), "mem.npy: empty file");
  EXPECT_EQ(bytesError("hello world\n"),
            "mem.npy: not a .npy file or an ONNX TensorProto");
}

TEST(TensorIO, NpyFuzzNeverCrashes) {
  std::string good = readFile(data("npy_f4.npy"));
  ASSERT_FALSE(good.empty());
  HostTensor t;
  std::string err;
  for (size_t n = 0; n <= good.size(); ++n)
    readTensorBytes(good.data(), n, "f.npy", t, err);
  for (size_t i = 0; i < good.size(); ++i)
    for (int b = 0; b < 8; ++b) {
      std::string bad = good;
      bad[i] ^= (char)(1 << b);
      if (readTensorBytes(bad.data(), bad.size(), "f.npy", t, err))
        EXPECT_LE(t.bytes(), bad.size());
    }
}

TEST(TensorIO, TensorProtoFixtures) {
  expectArange("pb_raw_f4.pb", "f32[2,3]");
  expectArange("pb_raw_i64.pb", "i64[2,3]");
  expectArange("pb_typed_f4.pb", "f32[2,3]");
  expectArange("pb_typed_f8.pb", "f64[2,3]");
  expectArange("pb_typed_i32.pb", "i32[2,3]");
  expectArange("pb_typed_i64.pb", "i64[2,3]");
  expectArange("pb_typed_i16.pb", "i16[2,3]");
  expectArange("pb_typed_i8.pb", "i8[2,3]");
  expectArange("pb_typed_u8.pb", "u8[2,3]");
  expectArange("pb_typed_u16.pb", "u16[2,3]");
  expectArange("pb_typed_u32.pb", "u32[2,3]");
  expectArange("pb_typed_u64.pb", "u64[2,3]");
  expectArange("pb_typed_f16.pb", "f16[2,3]");
  expectArange("pb_typed_bf16.pb", "bf16[2,3]");
  for (const char *name : {"pb_raw_b1.pb", "pb_typed_b1.pb"}) {
    HostTensor t;
    std::string err;
    ASSERT_TRUE(readTensorFile(data(name), t, err)) << err;
    EXPECT_EQ(t.desc().str(), "i1[2,3]");
    EXPECT_EQ(std::vector<uint8_t>(t.as<uint8_t>(), t.as<uint8_t>() + 6),
              (std::vector<uint8_t>{1, 0, 1, 0, 0, 1}));
  }
  HostTensor t;
  std::string err;
  ASSERT_TRUE(readTensorFile(data("pb_scalar.pb"), t, err)) << err;
  EXPECT_EQ(t.desc().str(), "i32[]");
  EXPECT_EQ(elem(t, 0), 7);
}

TEST(TensorIO, TensorProtoRefused) {
  EXPECT_EQ(readError(data("pb_string.pb")),
            data("pb_string.pb") + ": string tensors are not supported");
  EXPECT_EQ(readError(data("pb_external.pb")),
            data("pb_external.pb") +
                ": tensors with external data are not supported");
  EXPECT_EQ(readError(data("pb_count_mismatch.pb")),
            data("pb_count_mismatch.pb") +
                ": TensorProto has 3 elements, shape (2, 3) needs 6");
  EXPECT_EQ(readError(data("pb_negative_dim.pb")),
            data("pb_negative_dim.pb") + ": negative dimension in shape (-1,)");
  // raw_data of the wrong size: cut the last raw byte and fix the length.
  std::string raw = readFile(data("pb_raw_f4.pb"));
  size_t at = raw.find(std::string("\x4a\x18", 2)); // field 9, 24 bytes
  ASSERT_NE(at, std::string::npos);
  raw[at + 1] = 0x17;
  raw.erase(at + 2, 1);
  EXPECT_EQ(bytesError(raw),
            "mem.npy: raw_data has 23 bytes, shape (2, 3) of f32 needs 24");
}

TEST(TensorIO, NpyRoundTrip) {
  std::mt19937 rng(7);
  std::string path = tmp("rt.npy");
  const DType types[] = {DType::F32, DType::F64, DType::F16, DType::I64,
                         DType::I32, DType::I16, DType::I8,  DType::U64,
                         DType::U32, DType::U16, DType::U8,  DType::Bool};
  const std::vector<std::vector<int64_t>> shapes = {
      {}, {1}, {0}, {3, 0, 2}, {5}, {2, 3, 4}, {1, 1, 1, 1, 7}, {130}};
  for (DType dt : types)
    for (const auto &shape : shapes) {
      HostTensor t = randomTensor(rng, dt, shape), back;
      std::string err;
      ASSERT_TRUE(writeNpy(path, t, err)) << err;
      EXPECT_NE(access((path + ".tmp").c_str(), F_OK), 0);
      std::string bytes = readFile(path);
      ASSERT_GE(bytes.size(), 10u);
      size_t hl = (uint8_t)bytes[8] | (size_t)(uint8_t)bytes[9] << 8;
      EXPECT_EQ((10 + hl) % 64, 0u);
      EXPECT_EQ(bytes[10 + hl - 1], '\n');
      ASSERT_TRUE(readTensorFile(path, back, err)) << err;
      ASSERT_EQ(back.desc(), t.desc());
      EXPECT_EQ(std::memcmp(back.data(), t.data(), t.bytes()), 0);
    }
  std::remove(path.c_str());
  // A 1-D shape is written as a Python 1-tuple.
  HostTensor v(TensorDesc{DType::F32, {4}});
  std::string err;
  ASSERT_TRUE(writeNpy(path, v, err));
  EXPECT_TRUE(contains(readFile(path), "'shape': (4,), }")) << readFile(path);
  std::remove(path.c_str());
}

TEST(TensorIO, NpyWriteErrors) {
  std::string err;
  HostTensor bf(TensorDesc{DType::BF16, {2}});
  EXPECT_FALSE(writeNpy(tmp("bf.npy"), bf, err));
  EXPECT_EQ(err, tmp("bf.npy") + ": bf16 has no .npy dtype (write safetensors instead)");
  HostTensor t(TensorDesc{DType::F32, {2}});
  EXPECT_FALSE(writeNpy("/nonexistent/dir/x.npy", t, err));
  EXPECT_TRUE(contains(err, "/nonexistent/dir/x.npy: cannot create")) << err;
}

TEST(TensorIO, SafetensorsRoundTrip) {
  std::mt19937 rng(3);
  std::vector<HostTensor> ts = {
      randomTensor(rng, DType::F32, {2, 3}), randomTensor(rng, DType::BF16, {5}),
      randomTensor(rng, DType::F16, {}),     randomTensor(rng, DType::I64, {0, 4}),
      randomTensor(rng, DType::Bool, {3}),   randomTensor(rng, DType::U8, {7}),
      randomTensor(rng, DType::F64, {1, 2}), randomTensor(rng, DType::I8, {2}),
      randomTensor(rng, DType::I16, {2}),    randomTensor(rng, DType::I32, {2}),
      randomTensor(rng, DType::U16, {2}),    randomTensor(rng, DType::U32, {2}),
      randomTensor(rng, DType::U64, {2})};
  std::vector<std::pair<std::string, const HostTensor *>> named;
  const char *names[] = {"z.weight", "a.bias", "scalar", "empty", "mask", "bytes",
                         "f64", "i8", "i16", "i32", "u16", "u32", "u64"};
  for (size_t i = 0; i < ts.size(); ++i)
    named.emplace_back(names[i], &ts[i]);
  std::string path = tmp("rt.safetensors"), err;
  ASSERT_TRUE(writeSafetensors(path, named, err)) << err;
  EXPECT_NE(access((path + ".tmp").c_str(), F_OK), 0);
  std::string bytes = readFile(path);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= (uint64_t)(uint8_t)bytes[i] << (8 * i);
  EXPECT_EQ(n % 8, 0u);
  auto header = nlohmann::json::parse(bytes.substr(8, n));
  EXPECT_EQ(header["z.weight"]["dtype"], "F32");
  EXPECT_EQ(header["a.bias"]["dtype"], "BF16");
  EXPECT_EQ(header["mask"]["dtype"], "BOOL");
  EXPECT_EQ(header["z.weight"]["data_offsets"], nlohmann::json({0, 24}));

  std::vector<std::pair<std::string, HostTensor>> back;
  ASSERT_TRUE(readSafetensors(path, back, err)) << err;
  ASSERT_EQ(back.size(), ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    // Zero-byte tensors share their offset with the next one; their order
    // among equals is by name.
    if (ts[i].bytes() == 0)
      continue;
    bool found = false;
    for (auto &kv : back)
      if (kv.first == names[i]) {
        found = true;
        ASSERT_EQ(kv.second.desc(), ts[i].desc()) << names[i];
        EXPECT_EQ(std::memcmp(kv.second.data(), ts[i].data(), ts[i].bytes()), 0);
      }
    EXPECT_TRUE(found) << names[i];
  }
  EXPECT_EQ(back[0].first, "z.weight"); // file order, not name order
  std::remove(path.c_str());
}

// readSafetensorsBytes reads the same format from memory (the npy fuzzer's
// entry point); messages start with the name it is given.
TEST(TensorIO, SafetensorsFromMemory) {
  std::string header = R"({"a": {"dtype": "I32", "shape": [2], "data_offsets": [0, 8]}})";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    bytes[i] = (char)((header.size() >> (8 * i)) & 0xff);
  int32_t v[2] = {7, -3};
  bytes += header + std::string(reinterpret_cast<const char *>(v), 8);
  std::vector<std::pair<std::string, HostTensor>> out;
  std::string err;
  ASSERT_TRUE(readSafetensorsBytes(bytes.data(), bytes.size(), "mem", out, err))
      << err;
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].first, "a");
  EXPECT_EQ(out[0].second.as<int32_t>()[1], -3);
  EXPECT_FALSE(readSafetensorsBytes(bytes.data(), bytes.size() - 1, "mem", out, err));
  EXPECT_EQ(err, "mem: tensor 'a': data [0, 8) runs past the 7-byte data section");
  EXPECT_FALSE(readSafetensorsBytes(bytes.data(), 3, "mem", out, err));
  EXPECT_EQ(err, "mem: truncated header");
}

TEST(TensorIO, SafetensorsErrors) {
  std::string path = tmp("bad.safetensors"), err;
  auto file = [&](const std::string &header, const std::string &payload) {
    std::string s(8, '\0');
    for (int i = 0; i < 8; ++i)
      s[i] = (char)((header.size() >> (8 * i)) & 0xff);
    writeFile(path, s + header + payload);
  };
  auto error = [&]() {
    std::vector<std::pair<std::string, HostTensor>> out;
    EXPECT_FALSE(readSafetensors(path, out, err));
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
    EXPECT_EQ(err.rfind(path + ": ", 0), 0u) << err;
    return err.substr(path.size() + 2);
  };
  std::string p8(8, '\0');
  file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", p8);
  std::vector<std::pair<std::string, HostTensor>> out;
  ASSERT_TRUE(readSafetensors(path, out, err)) << err;
  file(R"({"__metadata__": {"format": "pt"}, "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", p8);
  ASSERT_TRUE(readSafetensors(path, out, err)) << err;
  ASSERT_EQ(out.size(), 1u);

  writeFile(path, "abc");
  EXPECT_EQ(error(), "truncated header");
  writeFile(path, std::string("\x10\0\0\0\0\0\0\0{}", 10));
  EXPECT_EQ(error(), "truncated header");
  writeFile(path, std::string("\xff\xff\xff\xff\xff\xff\xff\xff", 8));
  EXPECT_EQ(error(), "header length 18446744073709551615 is too large");
  file("{\"a\": ", "");
  EXPECT_EQ(error().rfind("header is not valid JSON: ", 0), 0u);
  file("[]", "");
  EXPECT_EQ(error(), "header is not a JSON object");
  file(R"({"__metadata__": {"format": 1}})", "");
  EXPECT_EQ(error(), "__metadata__ value 'format' is not a string");
  file(R"({"a": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [0, 2]}})", p8);
  EXPECT_EQ(error(), "tensor 'a': unsupported dtype 'F8_E4M3'");
  file(R"({"a": {"dtype": "F32", "shape": [2, -1], "data_offsets": [0, 8]}})", p8);
  EXPECT_EQ(error(), "tensor 'a': shape must hold non-negative integers");
  file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 16]}})", p8);
  EXPECT_EQ(error(), "tensor 'a': data [0, 16) runs past the 8-byte data section");
  file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", p8);
  EXPECT_EQ(error(), "tensor 'a': data_offsets must be [begin, end] with begin <= end");
  file(R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", p8);
  EXPECT_EQ(error(), "tensor 'a': has 8 data bytes, shape (3,) of F32 needs 12");
  file(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
           "b": {"dtype": "F32", "shape": [1], "data_offsets": [2, 6]}})", p8);
  EXPECT_EQ(error(), "tensors 'a' and 'b' overlap");
  file(R"({"a": {"dtype": "F32", "shape": [1]}})", p8);
  EXPECT_EQ(error(), "tensor 'a': data_offsets must be [begin, end] with begin <= end");
  std::remove(path.c_str());
  EXPECT_EQ(error(), "No such file or directory");

  HostTensor t(TensorDesc{DType::F32, {2}});
  EXPECT_FALSE(writeSafetensors(path, {{"a", &t}, {"a", &t}}, err));
  EXPECT_EQ(err, path + ": tensor name 'a' is given twice");
  EXPECT_FALSE(writeSafetensors(path, {{"__metadata__", &t}}, err));
  EXPECT_EQ(err, path + ": '__metadata__' cannot name a tensor");
  EXPECT_FALSE(writeSafetensors(path, {{"a", nullptr}}, err));
  EXPECT_EQ(err, path + ": tensor 'a' is null");
  EXPECT_FALSE(writeSafetensors(path, {{std::string("\xff"), &t}}, err));
  EXPECT_TRUE(contains(err, "cannot write the header")) << err;
  EXPECT_NE(access(path.c_str(), F_OK), 0);
}
