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

/// A file a run reads, named as the user named it (for messages).
struct NamedInput {
  std::string path;
  std::string what; // "--data x", "the executable"
};

/// Checks, before anything is written, that `path` may be replaced by the
/// output `flag` names: its directory exists and takes a new file (a probe
/// file is created and removed), it is absent or a regular file (not a
/// symlink, FIFO, device or directory, which the atomic writer's rename
/// would replace), and it is none of `inputs` (same device and inode). On failure `err` is one
/// line: "--metrics x.npy: it is also an input (--data x); give another path".
bool checkOutputPath(const std::string &flag, const std::string &path,
                     const std::vector<NamedInput> &inputs,
                     std::string &err) noexcept;

/// The directory part of a path ("." when there is none, "/" for the root).
std::string parentDir(const std::string &path);

} // namespace kiln::rt

#endif // KILN_RUNTIME_FILEIO_H
