//===- ToolFlagsTest.cpp - the runtime tools' bounded flag parser ---------===//
// SPDX-License-Identifier: Apache-2.0
//
// parseBoundedInt's syntax, bounds and messages (the ones kiln-train's tests
// match), and FlagParser on whole command lines: "--f v" and "--f=v", the
// last of a repeated flag wins but every one is checked, repeatable flags
// keep their order, plain flags refuse a value, help, unknown flags and
// positional arguments.
//===----------------------------------------------------------------------===//
#include "kiln/runtime/ToolFlags.h"

#include <gtest/gtest.h>

#include <limits>

using namespace kiln::rt;

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

std::string parseError(const std::string &v, int64_t min, int64_t max) {
  try {
    parseBoundedInt("--n", v, min, max);
  } catch (const FlagError &e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(ToolFlags, BoundedInt) {
  EXPECT_EQ(parseBoundedInt("--n", "0", 0, kMax), 0);
  EXPECT_EQ(parseBoundedInt("--n", "1024", 1, 1024), 1024);
  EXPECT_EQ(parseBoundedInt("--n", "-5", -10, 10), -5);
  EXPECT_EQ(parseBoundedInt("--n", "9223372036854775807", 0, kMax), kMax);
  EXPECT_EQ(parseBoundedInt("--n", "-9223372036854775808", kMin, 0), kMin);
  EXPECT_EQ(parseError("x", 1, kMax), "--n needs a positive integer, got 'x'");
  EXPECT_EQ(parseError("0", 1, kMax), "--n needs a positive integer, got '0'");
  EXPECT_EQ(parseError("-1", 0, kMax), "--n needs a non-negative integer, got '-1'");
  EXPECT_EQ(parseError("2", 3, 9), "--n needs an integer of at least 3, got '2'");
  EXPECT_EQ(parseError("1025", 1, 1024), "--n is at most 1024, got '1025'");
  for (const char *bad : {"", "-", "+3", " 3", "3 ", "3x", "0x10", "1e3",
                          "9223372036854775808", "-9223372036854775809"})
    EXPECT_EQ(parseError(bad, kMin, kMax).rfind("--n needs ", 0), 0u) << bad;
  EXPECT_EQ(parseUnsigned("--seed", "18446744073709551615"),
            std::numeric_limits<uint64_t>::max());
  EXPECT_THROW(parseUnsigned("--seed", "18446744073709551616"), FlagError);
  EXPECT_THROW(parseUnsigned("--seed", "-1"), FlagError);
}

struct Line {
  std::string text = "d";
  std::vector<std::string> list, positional;
  int64_t count = 7;
  uint64_t seed = 0;
  bool countGiven = false, seedGiven = false, on = false;
  /// Parses "tool ARGS..."; the FlagError message, "(help)" or "".
  std::string parse(std::vector<const char *> args) {
    args.insert(args.begin(), "tool");
    FlagParser p;
    p.text("--text", text)
        .list("--item", list)
        .integer("--count", count, 1, 100, &countGiven)
        .unsignedInteger("--seed", seed, &seedGiven)
        .flag("--on", on);
    try {
      return p.parse((int)args.size(), args.data(), positional) ? "" : "(help)";
    } catch (const FlagError &e) {
      return e.what();
    }
  }
};

TEST(ToolFlags, Parser) {
  Line a;
  EXPECT_EQ(a.parse({}), "");
  EXPECT_EQ(a.text, "d");
  EXPECT_EQ(a.count, 7);
  EXPECT_FALSE(a.countGiven || a.seedGiven || a.on);

  Line b;
  EXPECT_EQ(b.parse({"--text", "t", "--item=x", "P", "--item", "y", "--count=5",
                     "--count", "9", "--on", "--seed", "3", "Q", "--text=u"}),
            "");
  EXPECT_EQ(b.text, "u");
  EXPECT_EQ(b.list, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(b.positional, (std::vector<std::string>{"P", "Q"}));
  EXPECT_EQ(b.count, 9);
  EXPECT_TRUE(b.countGiven && b.seedGiven && b.on);
  EXPECT_EQ(b.seed, 3u);

  EXPECT_EQ(Line().parse({"--count", "0"}), "--count needs a positive integer, got '0'");
  EXPECT_EQ(Line().parse({"--count", "101"}), "--count is at most 100, got '101'");
  // Every occurrence is checked, not only the last.
  EXPECT_EQ(Line().parse({"--count", "x", "--count", "3"}),
            "--count needs a positive integer, got 'x'");
  EXPECT_EQ(Line().parse({"--seed", "-1"}), "--seed needs a non-negative integer, got '-1'");
  std::string m0;
  // An empty value is refused, not taken as "the flag is absent" (issue 21:
  // --checkpoint-dir '' ran without checkpoints).
  EXPECT_EQ(Line().parse({"--text", ""}), "--text needs a value, got ''");
  m0 = Line().parse({"--text="}); // CLI11's own "1 required TEXT missing"
  EXPECT_NE(m0.find("--text"), std::string::npos) << m0;
  EXPECT_EQ(Line().parse({"--item", "x", "--item", ""}), "--item needs a value, got ''");
  EXPECT_EQ(Line().parse({"--frob=3"}), "unknown flag '--frob' (see --help)");
  EXPECT_EQ(Line().parse({"-x"}), "unknown flag '-x' (see --help)");
  EXPECT_EQ(Line().parse({"--help"}), "(help)");
  EXPECT_EQ(Line().parse({"-h", "--frob"}), "(help)");
  // CLI11's own messages: one line, naming the flag.
  std::string m = Line().parse({"--text"});
  EXPECT_NE(m.find("--text"), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  m = Line().parse({"--on=1"});
  EXPECT_NE(m.find("on"), std::string::npos) << m;
  EXPECT_NE(m, "") << "a plain flag took a value";
}

} // namespace
