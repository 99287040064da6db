//===- FileIO.cpp - whole-file reads and atomic writes ----------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "kiln/runtime/FileIO.h"
#include "kiln/runtime/InputFile.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <new>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln::rt {

namespace {

std::string why(int e) { return std::strerror(e); }

bool writeAll(int fd, std::string_view data) {
  const char *p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t w = ::write(fd, p, left);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    p += w;
    left -= (size_t)w;
  }
  return true;
}

} // namespace

std::string parentDir(const std::string &path) {
  size_t end = path.size();
  while (end > 1 && path[end - 1] == '/')
    --end;
  if (end == 0)
    return ".";
  size_t slash = path.rfind('/', end - 1);
  if (slash == std::string::npos)
    return ".";
  if (slash == 0)
    return "/";
  return path.substr(0, slash);
}

bool fsyncPath(const std::string &path, std::string &err) noexcept {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    err = path + ": " + why(errno);
    return false;
  }
  if (::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) {
    err = path + ": fsync failed: " + why(errno);
    ::close(fd);
    return false;
  }
  ::close(fd);
  return true;
}

bool writeFileSynced(const std::string &path, std::string_view data,
                     std::string &err) noexcept {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    err = path + ": " + why(errno);
    return false;
  }
  if (!writeAll(fd, data) || ::fsync(fd) != 0) {
    err = path + ": write error: " + why(errno);
    ::close(fd);
    return false;
  }
  if (::close(fd) != 0) {
    err = path + ": " + why(errno);
    return false;
  }
  return true;
}

bool writeFileAtomic(const std::string &path,
                     const std::vector<std::string_view> &parts,
                     std::string &err, unsigned mode) noexcept {
  // The temporary lives next to PATH: rename is atomic only within one file
  // system, and a fixed name means a crashed writer's leftover is replaced by
  // the next write instead of piling up. It is created afresh (O_EXCL) so
  // that it gets `mode` and a link planted under its name is not followed.
  std::string tmp = path + ".tmp";
  ::unlink(tmp.c_str());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
                  (mode_t)mode);
  if (fd < 0) {
    err = path + ": cannot create " + tmp + ": " + why(errno);
    return false;
  }
  auto bail = [&](const char *what) {
    err = path + ": " + what + ": " + why(errno);
    ::close(fd);
    ::unlink(tmp.c_str());
    return false;
  };
  for (std::string_view part : parts)
    if (!writeAll(fd, part))
      return bail("write error");
  if (::fsync(fd) != 0)
    return bail("fsync failed");
  if (::close(fd) != 0) {
    err = path + ": close failed: " + why(errno);
    ::unlink(tmp.c_str());
    return false;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    err = path + ": cannot rename " + tmp + ": " + why(errno);
    ::unlink(tmp.c_str());
    return false;
  }
  // The rename is durable only once the directory entry is on disk.
  return fsyncPath(parentDir(path), err);
}

bool readWholeFile(const std::string &path, std::string &bytes,
                   std::string &err) noexcept {
  try {
    // A regular file only: a FIFO would block in open(), a device never end.
    return readRegularFile(path, bytes, err);
  } catch (const std::bad_alloc &) {
    err = path + ": out of memory reading the file";
    return false;
  }
}

bool checkOutputPath(const std::string &flag, const std::string &path,
                     const std::vector<NamedInput> &inputs,
                     std::string &err) noexcept {
  try {
    std::string at = flag + " " + path + ": ";
    if (path.empty()) {
      err = flag + ": the path is empty";
      return false;
    }
    // The directory must take a new file now (the atomic writer's
    // temporary), not only when the output is written at the end of a run.
    const std::string dir = parentDir(path);
    {
      std::string probe = dir + "/.kiln-probe-XXXXXX";
      int fd = ::mkstemp(probe.data());
      if (fd < 0) {
        int e = errno;
        struct stat ds;
        if (::stat(dir.c_str(), &ds) != 0)
          err = at + "its directory " + dir + " does not exist (" + why(errno) + ")";
        else if (!S_ISDIR(ds.st_mode))
          err = at + dir + " is not a directory";
        else
          err = at + "cannot create a file in " + dir + ": " + why(e);
        return false;
      }
      ::close(fd);
      ::unlink(probe.c_str());
    }
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) {
      if (errno == ENOENT)
        return true; // a new file in a directory that takes one
      err = at + why(errno);
      return false;
    }
    const char *kind = S_ISLNK(st.st_mode)    ? "a symbolic link"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISDIR(st.st_mode)  ? "a directory"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                       : S_ISREG(st.st_mode)  ? nullptr
                                              : "not a regular file";
    if (kind) {
      err = at + "it is " + std::string(kind) +
            ", and the output would replace it; give a regular file's path";
      return false;
    }
    for (const NamedInput &in : inputs) {
      struct stat is;
      if (::stat(in.path.c_str(), &is) == 0 && is.st_dev == st.st_dev &&
          is.st_ino == st.st_ino) {
        err = at + "it is also an input (" + in.what +
              "); give another path";
        return false;
      }
    }
    return true;
  } catch (const std::bad_alloc &) {
    err = flag + ": out of memory";
    return false;
  }
}

} // namespace kiln::rt
