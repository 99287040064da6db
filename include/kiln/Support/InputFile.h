//===- InputFile.h - opening the files the compiler reads -------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Every file the compiler side reads (the model, its external data, a
// --bind or --input value, the kiln-train runtime, a backend test's data) is
// opened here, and only a regular file is read. A plain open() of a FIFO
// blocks until a writer appears, which for a path given by mistake is
// forever; a character device (/dev/zero) never ends. So the file is opened
// with O_NONBLOCK, which returns at once for a FIFO, and refused after
// fstat unless it is a regular file: "PATH: not a regular file (a FIFO)".
// Header-only POSIX, free of MLIR and LLVM: ONNXLibrary.cpp (built with
// exceptions, no MLIR) includes it too. Nothing here throws except
// std::string's own allocation failures.
//===----------------------------------------------------------------------===//
#ifndef KILN_SUPPORT_INPUTFILE_H
#define KILN_SUPPORT_INPUTFILE_H

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln {

/// What a non-regular file is, for "not a regular file (a FIFO)".
inline const char *fileKindName(mode_t mode) {
  return S_ISFIFO(mode)   ? "a FIFO"
         : S_ISDIR(mode)  ? "a directory"
         : S_ISCHR(mode)  ? "a character device"
         : S_ISBLK(mode)  ? "a block device"
         : S_ISSOCK(mode) ? "a socket"
                          : "not a plain file";
}

/// Opens `path` read-only, without blocking, and keeps it only if it is a
/// regular file (symbolic links are followed). Returns the descriptor
/// (blocking again, close-on-exec) and its size in `size`, or -1 with the
/// reason in `why`: the system's ("No such file or directory") or "not a
/// regular file (a FIFO)".
inline int openRegularFile(const std::string &path, std::string &why,
                           uint64_t *size = nullptr) {
  int fd;
  do
    fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    why = std::strerror(errno);
    return -1;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    why = std::strerror(errno);
    ::close(fd);
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    why = std::string("not a regular file (") + fileKindName(st.st_mode) + ")";
    ::close(fd);
    return -1;
  }
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0)
    (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  if (size)
    *size = static_cast<uint64_t>(st.st_size);
  return fd;
}

/// Whether `path` is a regular file that can be opened for reading; if not,
/// `err` is one line, "PATH: not a regular file (a FIFO)". For readers that
/// hand the path to code of their own (the runtime's tensor readers).
inline bool checkRegularFile(const std::string &path, std::string &err) {
  std::string why;
  int fd = openRegularFile(path, why);
  if (fd < 0) {
    err = path + ": " + why;
    return false;
  }
  ::close(fd);
  return true;
}

/// Reads the whole of the regular file `path` into `out`. On failure `err`
/// is "PATH: why"; a file over `maxBytes` is refused before it is read.
inline bool readRegularFile(const std::string &path, std::string &out,
                            std::string &err,
                            uint64_t maxBytes = UINT64_MAX) {
  std::string why;
  uint64_t size = 0;
  int fd = openRegularFile(path, why, &size);
  if (fd < 0) {
    err = path + ": " + why;
    return false;
  }
  if (size > maxBytes) {
    err = path + ": the file is " + std::to_string(size) +
          " bytes, more than the " + std::to_string(maxBytes) + " accepted";
    ::close(fd);
    return false;
  }
  out.clear();
  out.reserve(static_cast<size_t>(size));
  char buf[1 << 16];
  while (true) {
    ssize_t got = ::read(fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0) {
      err = path + ": " + std::strerror(errno);
      ::close(fd);
      return false;
    }
    if (got == 0)
      break;
    out.append(buf, static_cast<size_t>(got));
    if (out.size() > maxBytes) { // grew while being read
      err = path + ": the file is more than the " +
            std::to_string(maxBytes) + " bytes accepted";
      ::close(fd);
      return false;
    }
  }
  ::close(fd);
  return true;
}

} // namespace kiln

#endif // KILN_SUPPORT_INPUTFILE_H
