//===- Sha256.h - SHA-256 (FIPS 180-4) --------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// A streaming SHA-256 for checkpoint checksums and model identity, computed
// by libcrypto (OpenSSL's EVP interface) so that the digest does not come
// from the same hand-written code that writes and verifies checkpoints;
// test/Sha256Test.cpp holds the NIST known answers.
//===----------------------------------------------------------------------===//
#ifndef KILN_TRAIN_SHA256_H
#define KILN_TRAIN_SHA256_H

#include <cstddef>
#include <cstdint>
#include <string>

struct evp_md_ctx_st; // OpenSSL's EVP_MD_CTX

namespace kiln::train {

class Sha256 {
public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256 &) = delete;
  Sha256 &operator=(const Sha256 &) = delete;
  void update(const void *data, size_t size);
  /// The digest as 64 lowercase hex digits; the object is spent afterwards.
  std::string hexDigest();

private:
  evp_md_ctx_st *ctx_;
};

/// SHA-256 of `size` bytes as lowercase hex.
std::string sha256Hex(const void *data, size_t size);
/// SHA-256 of a file's contents; false (with `err`) when it cannot be read.
bool sha256File(const std::string &path, std::string &hex, uint64_t &bytes,
                std::string &err);

} // namespace kiln::train

#endif // KILN_TRAIN_SHA256_H
