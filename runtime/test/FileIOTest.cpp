//===- FileIOTest.cpp - the atomic writer and the whole-file reader -------===//
// SPDX-License-Identifier: Apache-2.0
//
// writeFileAtomic: the bytes land under PATH (replacing an old file, from
// several parts, empty), no PATH.tmp is left, a stale PATH.tmp (even a
// symlink) is replaced rather than followed, the mode is the one asked for,
// and a failed write names the file and leaves nothing. readWholeFile reads
// back what was written and reports a missing file. parentDir's edge cases.
//===----------------------------------------------------------------------===//
#include "kiln/runtime/FileIO.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace kiln::rt;

namespace {

class FileIO : public ::testing::Test {
protected:
  void SetUp() override {
    char d[] = "/tmp/kiln-fileio-test-XXXXXX";
    ASSERT_NE(mkdtemp(d), nullptr);
    dir = d;
  }
  void TearDown() override {
    for (const char *n : {"/f", "/f.tmp", "/victim", "/exe"})
      ::unlink((dir + n).c_str());
    ::rmdir(dir.c_str());
  }
  std::string read(const std::string &path) {
    std::string bytes, err;
    EXPECT_TRUE(readWholeFile(path, bytes, err)) << err;
    return bytes;
  }
  bool exists(const std::string &path) {
    struct stat st;
    return ::lstat(path.c_str(), &st) == 0;
  }
  std::string dir;
};

TEST_F(FileIO, WritesReplacesAndLeavesNoTemporary) {
  std::string path = dir + "/f", err;
  ASSERT_TRUE(writeFileAtomic(path, {"hello, ", "world", ""}, err)) << err;
  EXPECT_EQ(read(path), "hello, world");
  EXPECT_FALSE(exists(path + ".tmp"));
  ASSERT_TRUE(writeFileAtomic(path, {"x"}, err)) << err;
  EXPECT_EQ(read(path), "x");
  ASSERT_TRUE(writeFileAtomic(path, {}, err)) << err;
  EXPECT_EQ(read(path), "");
  std::string big(3 << 20, 'q');
  big[12345] = '\0';
  ASSERT_TRUE(writeFileAtomic(path, {big, big}, err)) << err;
  EXPECT_EQ(read(path), big + big);
  EXPECT_FALSE(exists(path + ".tmp"));
}

TEST_F(FileIO, StaleTemporaryIsReplacedNotFollowed) {
  std::string path = dir + "/f", victim = dir + "/victim", err;
  ASSERT_TRUE(writeFileAtomic(victim, {"keep"}, err)) << err;
  ASSERT_EQ(::symlink(victim.c_str(), (path + ".tmp").c_str()), 0);
  ASSERT_TRUE(writeFileAtomic(path, {"new"}, err)) << err;
  EXPECT_EQ(read(path), "new");
  EXPECT_EQ(read(victim), "keep");
  EXPECT_FALSE(exists(path + ".tmp"));
}

TEST_F(FileIO, Mode) {
  mode_t old = ::umask(022);
  std::string path = dir + "/exe", err;
  ASSERT_TRUE(writeFileAtomic(path, {"#!/bin/sh\n"}, err, 0755)) << err;
  ::umask(old);
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
}

TEST_F(FileIO, Errors) {
  std::string err;
  EXPECT_FALSE(writeFileAtomic(dir + "/no/such/f", {"x"}, err));
  EXPECT_EQ(err, dir + "/no/such/f: cannot create " + dir +
                     "/no/such/f.tmp: No such file or directory");
  // Renaming a file over a directory fails: the temporary goes away.
  std::string sub = dir + "/f";
  ASSERT_EQ(::mkdir(sub.c_str(), 0755), 0);
  EXPECT_FALSE(writeFileAtomic(sub, {"x"}, err));
  EXPECT_EQ(err.rfind(sub + ": cannot rename " + sub + ".tmp: ", 0), 0u) << err;
  EXPECT_FALSE(exists(sub + ".tmp"));
  ::rmdir(sub.c_str());
  std::string bytes;
  EXPECT_FALSE(readWholeFile(dir + "/missing", bytes, err));
  EXPECT_EQ(err, dir + "/missing: No such file or directory");
  EXPECT_FALSE(readWholeFile(dir, bytes, err));
  EXPECT_EQ(err.rfind(dir + ": ", 0), 0u) << err;
}

TEST_F(FileIO, OutputPathIsCheckedBeforeAnythingIsWritten) {
  // A missing directory or one that is a file is refused at once (not when
  // the output is written at the end of a run), and the probe leaves
  // nothing behind.
  std::string err;
  EXPECT_TRUE(checkOutputPath("--profile", dir + "/t.json", {}, err)) << err;
  EXPECT_FALSE(checkOutputPath("--profile", dir + "/no/t.json", {}, err));
  EXPECT_EQ(err.rfind("--profile " + dir + "/no/t.json: its directory " + dir +
                          "/no does not exist",
                      0),
            0u)
      << err;
  std::string file = dir + "/f";
  ASSERT_TRUE(writeFileAtomic(file, {"x"}, err)) << err;
  EXPECT_FALSE(checkOutputPath("--export-onnx", file + "/m.onnx", {}, err));
  EXPECT_EQ(err, "--export-onnx " + file + "/m.onnx: " + file + " is not a directory");
  // An input given as the output is refused.
  EXPECT_FALSE(checkOutputPath("--metrics", file, {{file, "--data x"}}, err));
  EXPECT_EQ(err, "--metrics " + file + ": it is also an input (--data x); give another path");
  int entries = 0;
  if (DIR *d = ::opendir(dir.c_str())) {
    while (dirent *e = ::readdir(d))
      entries += e->d_name[0] != '.' || std::string(e->d_name).rfind(".kiln-probe", 0) == 0;
    ::closedir(d);
  }
  EXPECT_EQ(entries, 1); // f
}

TEST(FileIOPaths, ParentDir) {
  EXPECT_EQ(parentDir("f"), ".");
  EXPECT_EQ(parentDir(""), ".");
  EXPECT_EQ(parentDir("/f"), "/");
  EXPECT_EQ(parentDir("/"), "/");
  EXPECT_EQ(parentDir("a/b/c"), "a/b");
  EXPECT_EQ(parentDir("a/b/"), "a");
  EXPECT_EQ(parentDir("/a/b"), "/a");
}

} // namespace
