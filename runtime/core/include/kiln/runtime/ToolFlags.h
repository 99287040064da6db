//===- ToolFlags.h - the runtime tools' bounded flag parser -----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// One command-line parser for kiln-exec and kiln-train, on CLI11 (header
// only). CLI11 splits "--flag value" / "--flag=value", finds missing values
// and values given to plain flags; this wrapper adds what the tools promise:
// every integer flag is parsed strictly (an optional '-' and decimal digits)
// into int64 and checked against bounds declared with the flag, the last of
// a repeated single-value flag wins, unknown flags and stray arguments are
// reported the house way, and every failure is one FlagError line that names
// the flag. Help is only reported: each tool prints its own usage text.
// Header-only and throwing: for the runtime tools, not for the compiler.
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_TOOLFLAGS_H
#define KILN_RUNTIME_TOOLFLAGS_H

#include <CLI/CLI.hpp>

#include <cstdint>
#include <deque>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln::rt {

/// A bad command line; what() is one line naming the flag.
class FlagError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// `v` as a decimal integer in [min, max] (an optional '-', then digits, no
/// blanks or '+'). Otherwise FlagError: "FLAG needs a positive integer, got
/// 'v'" (min 1; "a non-negative integer" for min 0, "an integer of at least
/// MIN" otherwise) when it is no integer or below min, "FLAG is at most MAX,
/// got 'v'" when above max.
inline int64_t parseBoundedInt(const std::string &flag, const std::string &v,
                               int64_t min, int64_t max) {
  size_t i = !v.empty() && v[0] == '-';
  bool ok = i < v.size();
  // Accumulate as a negative number so that INT64_MIN parses too.
  int64_t n = 0;
  for (; ok && i < v.size(); ++i) {
    if (v[i] < '0' || v[i] > '9' || __builtin_mul_overflow(n, 10, &n) ||
        __builtin_sub_overflow(n, v[i] - '0', &n))
      ok = false;
  }
  if (ok && v[0] != '-')
    ok = !__builtin_mul_overflow(n, -1, &n);
  if (ok && n >= min && n <= max)
    return n;
  if (ok && n > max)
    throw FlagError(flag + " is at most " + std::to_string(max) + ", got '" +
                    v + "'");
  std::string what = min == 1 ? "a positive integer"
                     : min == 0
                         ? "a non-negative integer"
                         : "an integer of at least " + std::to_string(min);
  throw FlagError(flag + " needs " + what + ", got '" + v + "'");
}

/// `v` as an unsigned 64-bit decimal integer (digits only).
inline uint64_t parseUnsigned(const std::string &flag, const std::string &v) {
  uint64_t n = 0;
  bool ok = !v.empty();
  for (char c : v)
    if (c < '0' || c > '9' || __builtin_mul_overflow(n, 10u, &n) ||
        __builtin_add_overflow(n, uint64_t(c - '0'), &n))
      ok = false;
  if (!ok)
    throw FlagError(flag + " needs a non-negative integer, got '" + v + "'");
  return n;
}

class FlagParser {
public:
  FlagParser() {
    app_.set_help_flag(); // the tools print their own usage
    app_.add_flag("-h,--help", help_);
    app_.allow_extras(); // stray arguments come back to the tool, in order
  }

  /// A flag with a non-empty value (a path, a name); the last one given
  /// wins. An empty one ("--metrics ''") is FlagError "--metrics needs a
  /// value, got ''" rather than the flag silently left out.
  FlagParser &text(const std::string &name, std::string &dst) {
    app_.add_option(name, dst)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
        ->each([name](const std::string &v) { nonEmpty(name, v); });
    return *this;
  }

  /// A repeatable flag with a non-empty value; the values in order.
  FlagParser &list(const std::string &name, std::vector<std::string> &dst) {
    app_.add_option(name, dst)->allow_extra_args(false)->each(
        [name](const std::string &v) { nonEmpty(name, v); });
    return *this;
  }

  /// An integer flag in [min, max] (every occurrence is checked, the last
  /// wins); `given` (if any) is set when it appears.
  FlagParser &integer(const std::string &name, int64_t &dst, int64_t min,
                      int64_t max, bool *given = nullptr) {
    app_.add_option(name, scratch_.emplace_back())
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
        ->each([name, &dst, min, max, given](const std::string &v) {
          dst = parseBoundedInt(name, v, min, max);
          if (given)
            *given = true;
        });
    return *this;
  }

  /// An unsigned 64-bit integer flag (seeds).
  FlagParser &unsignedInteger(const std::string &name, uint64_t &dst,
                              bool *given = nullptr) {
    app_.add_option(name, scratch_.emplace_back())
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
        ->each([name, &dst, given](const std::string &v) {
          dst = parseUnsigned(name, v);
          if (given)
            *given = true;
        });
    return *this;
  }

  /// A flag that takes no value ("--flag=x" is an error).
  FlagParser &flag(const std::string &name, bool &dst) {
    app_.add_flag(name, dst)->disable_flag_override();
    return *this;
  }

  /// Parses argv[1..]. False when -h/--help was given (nothing else is
  /// checked then). `positional` gets the arguments that are not flags; an
  /// unknown flag is FlagError "unknown flag '--x' (see --help)".
  bool parse(int argc, const char *const *argv,
             std::vector<std::string> &positional) {
    try {
      app_.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
      if (help_)
        return false;
      throw FlagError(e.what());
    }
    if (help_)
      return false;
    for (const std::string &a : app_.remaining()) {
      if (a.size() > 1 && a[0] == '-')
        throw FlagError("unknown flag '" + a.substr(0, a.find('=')) +
                        "' (see --help)");
      positional.push_back(a);
    }
    return true;
  }

private:
  static void nonEmpty(const std::string &flag, const std::string &v) {
    if (v.empty())
      throw FlagError(flag + " needs a value, got ''");
  }

  CLI::App app_;
  bool help_ = false;
  std::deque<std::string> scratch_; // CLI11's storage of the integer flags
};

} // namespace kiln::rt

#endif // KILN_RUNTIME_TOOLFLAGS_H
