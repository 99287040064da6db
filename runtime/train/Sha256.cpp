//===- Sha256.cpp - SHA-256 (FIPS 180-4) through libcrypto ------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "Sha256.h"

#include "kiln/runtime/InputFile.h"

#include <openssl/evp.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <new>
#include <stdexcept>
#include <unistd.h>

namespace kiln::train {

namespace {

std::string toHex(const unsigned char *d, unsigned n) {
  static const char *kHex = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (unsigned i = 0; i < n; ++i) {
    out.push_back(kHex[d[i] >> 4]);
    out.push_back(kHex[d[i] & 0xf]);
  }
  return out;
}

// libcrypto fails only when it cannot allocate or is misconfigured (no
// SHA-256 provider): neither is a user error, and a digest must never be
// made up, so both abort the run through an exception.
void check(int ok, const char *what) {
  if (ok != 1)
    throw std::runtime_error(std::string("libcrypto: ") + what + " failed");
}

} // namespace

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (!ctx_)
    throw std::bad_alloc();
  if (EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) != 1) {
    EVP_MD_CTX_free(ctx_);
    check(0, "EVP_DigestInit_ex(sha256)");
  }
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_); }

void Sha256::update(const void *data, size_t size) {
  if (size)
    check(EVP_DigestUpdate(ctx_, data, size), "EVP_DigestUpdate");
}

std::string Sha256::hexDigest() {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  check(EVP_DigestFinal_ex(ctx_, d, &n), "EVP_DigestFinal_ex");
  return toHex(d, n);
}

std::string sha256Hex(const void *data, size_t size) {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  check(EVP_Digest(data, size, d, &n, EVP_sha256(), nullptr), "EVP_Digest");
  return toHex(d, n);
}

bool sha256File(const std::string &path, std::string &hex, uint64_t &bytes,
                std::string &err) {
  Sha256 h; // first: it may throw, and then no descriptor is open
  std::string why;
  int fd = rt::openRegularFile(path, why); // a FIFO never blocks
  if (fd < 0) {
    err = path + ": " + why;
    return false;
  }
  bytes = 0;
  static thread_local char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      err = path + ": read error: " + std::strerror(errno);
      ::close(fd);
      return false;
    }
    if (n == 0)
      break;
    h.update(buf, (size_t)n);
    bytes += (uint64_t)n;
  }
  ::close(fd);
  hex = h.hexDigest();
  return true;
}

} // namespace kiln::train
