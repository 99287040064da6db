//===- Util.h - errors, files and formatting for kiln-train -----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// kiln-train reports every user error as one line on stderr and exits 1:
// the parts throw UserError with that line and main prints it. Files are
// written and read through the runtime's FileIO.h (atomic writes).
//===----------------------------------------------------------------------===//
#ifndef KILN_TRAIN_UTIL_H
#define KILN_TRAIN_UTIL_H

#include "kiln/runtime/FileIO.h"
#include "kiln/runtime/Tensor.h"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::train {

/// A one-line message for the user; main prints it and exits 1.
class UserError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void fail(const std::string &msg);

/// "[28,28]" ("[]" for a scalar).
std::string shapeStr(const std::vector<int64_t> &shape);
/// "f32 [784]"
std::string typeStr(rt::DType dtype, const std::vector<int64_t> &shape);
/// strerror(errno) of the calling thread's last error.
std::string lastError();

using rt::fsyncPath;
using rt::parentDir;
using rt::readWholeFile;
using rt::writeFileAtomic;
using rt::writeFileSynced;

/// mkdir -p.
bool makeDirs(const std::string &path, std::string &err);
/// rm -rf of a directory tree (no symlinks followed).
void removeTree(const std::string &path);
bool isDirectory(const std::string &path);
bool pathExists(const std::string &path);
/// Names of the entries of a directory (no "." or ".."); empty on error.
std::vector<std::string> listDir(const std::string &path);

/// A read-only mapping of a whole file.
class MappedFile {
public:
  MappedFile() = default;
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;
  MappedFile(MappedFile &&o) noexcept;
  MappedFile &operator=(MappedFile &&o) noexcept;
  ~MappedFile();
  /// False with `err` ("PATH: why"); an empty file maps to size 0.
  bool open(const std::string &path, std::string &err);
  const uint8_t *data() const { return data_; }
  size_t size() const { return size_; }
  void adviseRandom() const;

private:
  const uint8_t *data_ = nullptr;
  size_t size_ = 0;
  void *map_ = nullptr;
};

/// "0:01:23" (hours unbounded).
std::string formatDuration(double seconds);

} // namespace kiln::train

#endif // KILN_TRAIN_UTIL_H
