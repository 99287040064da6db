//===- CommandLine.h - flag handling shared by Kiln's drivers ---*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// kiln-run and kiln-compile declare their flags with llvm::cl (as kiln-opt
// and kiln-translate do through MLIR's mains) and parse them here, so that
// every driver keeps CONTRACT.md's promise the same way: `--flag=value` and
// `--flag value` both work, `--help` lists only the tool's own flags, and a
// bad flag is one line on stderr naming it, with exit status 1.
//===----------------------------------------------------------------------===//
#ifndef KILN_TOOLS_COMMANDLINE_H
#define KILN_TOOLS_COMMANDLINE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/CommandLine.h"

#include <cstdint>
#include <limits>
#include <string>

namespace kiln::tool {

/// Parses `argv` for the tool `name`. Only the options of `category` show in
/// `--help` (LLVM's own stay accepted but hidden); `-h` is `--help`. An error
/// (unknown flag, missing or bad value) prints one line `name: ...` naming
/// the flag and exits with status 1.
void parseCommandLine(int argc, char **argv, llvm::StringRef name,
                      llvm::cl::OptionCategory &category,
                      llvm::StringRef overview);

/// Prints `<tool>: msg` on stderr and exits with status 1: the one-line user
/// error of CONTRACT.md. `<tool>` is the name given to parseCommandLine.
[[noreturn]] void fail(const llvm::Twine &msg);

/// Reads `text` as a decimal integer in [min, max] for the flag `flag`
/// (spelt as the user sees it, "--dim"); fails with one line naming the flag
/// and the accepted range otherwise. `note` says why the range is what it is.
int64_t parseInt(llvm::StringRef flag, llvm::StringRef text, int64_t min,
                 int64_t max, llvm::StringRef note = "");

/// Splits a `NAME=VALUE` flag value; fails naming `flag` and `form` (e.g.
/// "NAME=N") when there is no `=` or no name.
std::pair<std::string, std::string> splitNameValue(llvm::StringRef flag,
                                                   llvm::StringRef text,
                                                   llvm::StringRef form);

/// The largest batch or dimension a flag accepts. Static shapes multiply a
/// batch by every per-sample size; the importer checks each such product
/// (kiln/runtime/CheckedMath.h) and refuses one over 2^60 bytes naming the
/// input, and this bound keeps the flag itself to sizes a machine can hold.
constexpr int64_t kMaxDimFlag = int64_t(1) << 31;

/// An integer flag's range, as an llvm::cl modifier:
///   cl::opt<long long, false, IntParser> n("n", IntRange{1, 100});
struct IntRange {
  int64_t min = 0;
  int64_t max = std::numeric_limits<int64_t>::max();
  /// Why the range is what it is, appended to the error.
  const char *note = "";
  template <class Opt>
  void apply(Opt &o) const {
    o.getParser().setRange(*this);
  }
};

/// Parses an integer flag with parseInt's messages and its IntRange (by
/// default any non-negative value). It derives from parser<long long> rather
/// than parser<int64_t> because LLVM marks parser<long> final.
class IntParser : public llvm::cl::parser<long long> {
public:
  using parser::parser;
  void setRange(const IntRange &r) { range = r; }
  /// Shadows parser<long long>::parse (cl::opt calls it on ParserClass).
  bool parse(llvm::cl::Option &o, llvm::StringRef argName, llvm::StringRef arg,
             long long &value);
  llvm::StringRef getValueName() const override { return "int"; }

private:
  IntRange range;
};

/// A floating-point flag's range, as an llvm::cl modifier (the counterpart
/// of IntRange): each bound inclusive or exclusive, unbounded by default.
///   cl::opt<double, false, NumberParser> b("beta1", NumberRange::unit());
/// A value outside it fails as "--beta1 must be in [0, 1), got 2".
struct NumberRange {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool minOpen = false, maxOpen = false;

  /// (0, inf): a learning rate, an epsilon.
  static constexpr NumberRange positive() {
    return {0, std::numeric_limits<double>::infinity(), true, false};
  }
  /// [0, inf): a weight decay, a clipping norm (0: none).
  static constexpr NumberRange nonNegative() {
    return {0, std::numeric_limits<double>::infinity(), false, false};
  }
  /// [0, 1): a momentum or Adam beta (1 would never forget).
  static constexpr NumberRange unit() { return {0, 1, false, true}; }

  bool contains(double v) const {
    return (minOpen ? v > min : v >= min) && (maxOpen ? v < max : v <= max);
  }
  /// "in [0, 1)", "> 0", ">= 0": what a message says the value must be.
  std::string text() const;
  template <class Opt>
  void apply(Opt &o) const {
    o.getParser().setRange(*this);
  }
};

/// Fails, naming `flag`, unless `value` lies in `range`: the one check every
/// bounded floating-point flag goes through ("--eps must be > 0, got 0").
/// `text` is the value as the user wrote it.
void checkNumber(llvm::StringRef flag, double value, const NumberRange &range,
                 llvm::StringRef text);

/// Parses a floating-point flag: a finite number in its NumberRange (by
/// default any), or one line naming the flag.
class NumberParser : public llvm::cl::parser<double> {
public:
  using parser::parser;
  void setRange(const NumberRange &r) { range = r; }
  bool parse(llvm::cl::Option &o, llvm::StringRef argName, llvm::StringRef arg,
             double &value);

private:
  NumberRange range;
};

} // namespace kiln::tool

#endif // KILN_TOOLS_COMMANDLINE_H
