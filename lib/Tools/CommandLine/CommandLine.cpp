//===- CommandLine.cpp - flag handling shared by Kiln's drivers -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// llvm::cl does the parsing; this file keeps Kiln's error contract on top of
// it. LLVM reports an unknown flag on two lines (the error and a "did you
// mean" hint) under argv[0]'s name, and a bad number as "for the -x option:
// ... value invalid for integer argument!"; Kiln's drivers promise one line
// that names the flag, so both are rewritten here, and value errors are
// raised by Kiln's own parsers with the accepted range in the message.
//===----------------------------------------------------------------------===//
#include "kiln/Tools/CommandLine.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdlib>
#include <vector>

using namespace llvm;
using namespace kiln;

namespace {
/// The tool errors are reported under (set by parseCommandLine).
std::string &toolName() {
  static std::string name = "kiln";
  return name;
}

/// "--name" for a long option, "-o" for a one-letter one, as LLVM spells
/// them in --help.
std::string flagSpelling(StringRef argName) {
  return (argName.size() == 1 ? "-" : "--") + argName.str();
}
} // namespace

void tool::fail(const Twine &msg) {
  errs() << toolName() << ": " << msg << "\n";
  errs().flush();
  std::exit(1);
}

void tool::parseCommandLine(int argc, char **argv, StringRef name,
                            cl::OptionCategory &category, StringRef overview) {
  toolName() = name.str();
  cl::HideUnrelatedOptions(category);
  // The hand-written parsers these drivers had took -h for --help.
  std::vector<const char *> args(argv, argv + argc);
  for (const char *&a : args)
    if (StringRef(a) == "-h")
      a = "--help";

  std::string errors;
  raw_string_ostream os(errors);
  if (cl::ParseCommandLineOptions(static_cast<int>(args.size()), args.data(),
                                  overview, &os))
    return;
  StringRef text(errors);
  static constexpr StringLiteral kUnknown = "Unknown command line argument '";
  if (size_t at = text.find(kUnknown); at != StringRef::npos) {
    StringRef arg = text.substr(at + kUnknown.size());
    fail("unknown flag '" + arg.take_front(arg.find("'.")) + "' (see --help)");
  }
  // Any other parse error: LLVM's first line, under the tool's name. Errors
  // LLVM printed itself (a flag missing its value) are already one line.
  StringRef first = text.split('\n').first.trim();
  if (first.empty())
    std::exit(1);
  std::string self = sys::path::filename(argv[0]).str();
  first.consume_front(self + ": ");
  fail(first);
}

int64_t tool::parseInt(StringRef flag, StringRef text, int64_t min,
                       int64_t max, StringRef note) {
  long long v;
  if (!text.getAsInteger(10, v) && v >= min && v <= max)
    return v;
  std::string want;
  if (max == std::numeric_limits<int64_t>::max())
    want = min == 0   ? "a non-negative integer"
           : min == 1 ? "a positive integer"
                      : "an integer >= " + std::to_string(min);
  else
    want = "an integer in [" + std::to_string(min) + ", " +
           std::to_string(max) + "]";
  fail(flag + " needs " + want + ", got '" + text + "'" +
       (note.empty() ? "" : " (" + note + ")"));
}

std::pair<std::string, std::string>
tool::splitNameValue(StringRef flag, StringRef text, StringRef form) {
  size_t eq = text.find('=');
  if (eq == StringRef::npos || eq == 0)
    fail(flag + " needs " + form + ", got '" + text + "'");
  return {text.take_front(eq).str(), text.drop_front(eq + 1).str()};
}

bool tool::IntParser::parse(cl::Option &, StringRef argName, StringRef arg,
                            long long &value) {
  value = parseInt(flagSpelling(argName), arg, range.min, range.max,
                   range.note);
  return false;
}

std::string tool::NumberRange::text() const {
  auto num = [](double v) {
    std::string s;
    raw_string_ostream os(s);
    os << format("%g", v);
    return s;
  };
  bool lo = std::isfinite(min), hi = std::isfinite(max);
  if (lo && hi)
    return "in " + std::string(minOpen ? "(" : "[") + num(min) + ", " +
           num(max) + (maxOpen ? ")" : "]");
  if (lo)
    return (minOpen ? "> " : ">= ") + num(min);
  if (hi)
    return (maxOpen ? "< " : "<= ") + num(max);
  return "a number";
}

void tool::checkNumber(StringRef flag, double value, const NumberRange &range,
                       StringRef text) {
  if (!range.contains(value))
    fail(flag + " must be " + range.text() + ", got " + text);
}

bool tool::NumberParser::parse(cl::Option &, StringRef argName, StringRef arg,
                               double &value) {
  if (arg.getAsDouble(value) || !std::isfinite(value))
    fail(flagSpelling(argName) + " needs a number, got '" + arg + "'");
  checkNumber(flagSpelling(argName), value, range, arg);
  return false;
}
