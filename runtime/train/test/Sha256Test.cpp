//===- Sha256Test.cpp - SHA-256 known answers -----------------------------===//
// SPDX-License-Identifier: Apache-2.0
//
// The NIST FIPS 180-4 example digests (csrc.nist.gov, "SHA256.pdf" and
// "SHA2_Additional.pdf"): "abc", the empty message, the 448-bit two-block
// message and one million 'a's, through each entry point (one shot, the
// streaming object fed in uneven pieces, a file). Checkpoints are written
// and verified by the same code, so only fixed answers catch a wrong digest.
//===----------------------------------------------------------------------===//
#include "Sha256.h"

#include "kiln/runtime/FileIO.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <unistd.h>
#include <vector>

using namespace kiln::train;

namespace {

struct Kat {
  const char *name;
  std::string message;
  const char *digest;
};

std::vector<Kat> kats() {
  return {
      {"abc", "abc",
       "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
      {"empty", "",
       "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
      {"448-bit", "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
      {"million-a", std::string(1000000, 'a'),
       "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
  };
}

TEST(Sha256, OneShot) {
  for (const Kat &k : kats())
    EXPECT_EQ(sha256Hex(k.message.data(), k.message.size()), k.digest) << k.name;
}

TEST(Sha256, StreamingInPieces) {
  // Piece sizes that straddle the 64-byte block and the 56-byte padding edge.
  const size_t pieces[] = {1, 3, 55, 56, 57, 63, 64, 65, 127, 4096};
  for (const Kat &k : kats())
    for (size_t piece : pieces) {
      Sha256 h;
      for (size_t off = 0; off < k.message.size(); off += piece)
        h.update(k.message.data() + off,
                 std::min(piece, k.message.size() - off));
      EXPECT_EQ(h.hexDigest(), k.digest) << k.name << " in pieces of " << piece;
    }
}

TEST(Sha256, File) {
  char dir[] = "/tmp/kiln-sha-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string path = std::string(dir) + "/m";
  for (const Kat &k : kats()) {
    std::string err, hex;
    ASSERT_TRUE(kiln::rt::writeFileAtomic(path, {k.message}, err)) << err;
    uint64_t bytes = 0;
    ASSERT_TRUE(sha256File(path, hex, bytes, err)) << err;
    EXPECT_EQ(hex, k.digest) << k.name;
    EXPECT_EQ(bytes, k.message.size()) << k.name;
  }
  std::string err, hex;
  uint64_t bytes = 0;
  EXPECT_FALSE(sha256File(std::string(dir) + "/missing", hex, bytes, err));
  EXPECT_EQ(err, std::string(dir) + "/missing: No such file or directory");
  ::unlink(path.c_str());
  ::rmdir(dir);
}

} // namespace
