//===- Sha256.h - SHA-256 (FIPS 180-4) --------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// A small streaming SHA-256 for checkpoint checksums and model identity.
//===----------------------------------------------------------------------===//
#ifndef KILN_TRAIN_SHA256_H
#define KILN_TRAIN_SHA256_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln::train {

class Sha256 {
public:
  Sha256();
  void update(const void *data, size_t size);
  /// The digest as 64 lowercase hex digits; the object is spent afterwards.
  std::string hexDigest();

private:
  void block(const uint8_t *p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t used_ = 0;
  uint64_t total_ = 0;
};

/// SHA-256 of `size` bytes as lowercase hex.
std::string sha256Hex(const void *data, size_t size);
/// SHA-256 of a file's contents; false (with `err`) when it cannot be read.
bool sha256File(const std::string &path, std::string &hex, uint64_t &bytes,
                std::string &err);

} // namespace kiln::train

#endif // KILN_TRAIN_SHA256_H
