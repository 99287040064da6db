//===- FileIO.h - whole-file reads and atomic writes ------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The one place the runtime and kiln-train write and read whole files. A
// write goes to PATH.tmp in the same directory, is fsynced, renamed over
// PATH and the directory is fsynced, so a crash leaves either the old file
// or the new one under PATH, never a part, and the rename itself survives a
// power loss. Nothing here throws (callers built without exceptions may use
// it): failures return false with "PATH: why" in `err`.
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_FILEIO_H
#define KILN_RUNTIME_FILEIO_H

#include <string>
#include <string_view>
#include <vector>

namespace kiln::rt {

/// Writes the concatenation of `parts` to `path` atomically (PATH.tmp,
/// fsync, rename, fsync of the directory), with permission bits `mode`
/// (before the umask). On failure nothing is left behind but what was at
/// PATH before, except when only the final directory fsync failed.
bool writeFileAtomic(const std::string &path,
                     const std::vector<std::string_view> &parts,
                     std::string &err, unsigned mode = 0644) noexcept;

/// Writes `data` to `path` in place (create or truncate) and fsyncs it; for
/// files inside a directory that is itself renamed into place afterwards.
bool writeFileSynced(const std::string &path, std::string_view data,
                     std::string &err) noexcept;

/// fsyncs a file or directory. A file system that refuses fsync on a
/// directory (EINVAL, EROFS) is not an error.
bool fsyncPath(const std::string &path, std::string &err) noexcept;

/// Reads the whole of `path` into `bytes`.
bool readWholeFile(const std::string &path, std::string &bytes,
                   std::string &err) noexcept;

/// The directory part of a path ("." when there is none, "/" for the root).
std::string parentDir(const std::string &path);

} // namespace kiln::rt

#endif // KILN_RUNTIME_FILEIO_H
