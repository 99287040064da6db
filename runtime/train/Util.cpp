//===- Util.cpp - errors, files and formatting for kiln-train ---*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "Util.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln::train {

void fail(const std::string &msg) { throw UserError(msg); }

std::string shapeStr(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string typeStr(rt::DType dtype, const std::vector<int64_t> &shape) {
  return std::string(rt::dtypeName(dtype)) + " " + shapeStr(shape);
}

std::string lastError() { return std::strerror(errno); }

namespace {

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

bool writeFileSynced(const std::string &path, std::string_view data,
                     std::string &err) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    err = path + ": " + lastError();
    return false;
  }
  if (!writeAll(fd, data) || ::fsync(fd) != 0) {
    err = path + ": write error: " + lastError();
    ::close(fd);
    return false;
  }
  if (::close(fd) != 0) {
    err = path + ": " + lastError();
    return false;
  }
  return true;
}

bool fsyncPath(const std::string &path, std::string &err) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    err = path + ": " + lastError();
    return false;
  }
  // Some file systems refuse fsync on a directory (EINVAL): not an error.
  if (::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) {
    err = path + ": fsync failed: " + lastError();
    ::close(fd);
    return false;
  }
  ::close(fd);
  return true;
}

bool writeFileAtomic(const std::string &path,
                     const std::vector<std::string_view> &parts,
                     std::string &err) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    err = path + ": cannot create " + tmp + ": " + lastError();
    return false;
  }
  for (std::string_view part : parts)
    if (!writeAll(fd, part)) {
      err = path + ": write error: " + lastError();
      ::close(fd);
      ::unlink(tmp.c_str());
      return false;
    }
  if (::fsync(fd) != 0) {
    err = path + ": fsync failed: " + lastError();
    ::close(fd);
    ::unlink(tmp.c_str());
    return false;
  }
  if (::close(fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    err = path + ": " + lastError();
    ::unlink(tmp.c_str());
    return false;
  }
  return fsyncPath(parentDir(path), err);
}

bool makeDirs(const std::string &path, std::string &err) {
  if (path.empty())
    return true;
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode))
      return true;
    err = path + ": exists and is not a directory";
    return false;
  }
  std::string parent = parentDir(path);
  if (parent != path && parent != "." && parent != "/" &&
      !makeDirs(parent, err))
    return false;
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    err = path + ": " + lastError();
    return false;
  }
  return true;
}

void removeTree(const std::string &path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0)
    return;
  if (S_ISDIR(st.st_mode)) {
    for (const std::string &e : listDir(path))
      removeTree(path + "/" + e);
    ::rmdir(path.c_str());
  } else {
    ::unlink(path.c_str());
  }
}

bool isDirectory(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool pathExists(const std::string &path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

std::string parentDir(const std::string &path) {
  size_t end = path.size();
  while (end > 1 && path[end - 1] == '/')
    --end;
  size_t slash = path.rfind('/', end - 1);
  if (slash == std::string::npos)
    return ".";
  if (slash == 0)
    return "/";
  return path.substr(0, slash);
}

std::vector<std::string> listDir(const std::string &path) {
  std::vector<std::string> out;
  DIR *d = ::opendir(path.c_str());
  if (!d)
    return out;
  while (struct dirent *e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..")
      out.push_back(std::move(n));
  }
  ::closedir(d);
  return out;
}

MappedFile::MappedFile(MappedFile &&o) noexcept
    : data_(o.data_), size_(o.size_), map_(o.map_) {
  o.data_ = nullptr;
  o.size_ = 0;
  o.map_ = nullptr;
}

MappedFile &MappedFile::operator=(MappedFile &&o) noexcept {
  if (this != &o) {
    if (map_)
      ::munmap(map_, size_);
    data_ = o.data_;
    size_ = o.size_;
    map_ = o.map_;
    o.data_ = nullptr;
    o.size_ = 0;
    o.map_ = nullptr;
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (map_)
    ::munmap(map_, size_);
}

bool MappedFile::open(const std::string &path, std::string &err) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    err = path + ": " + lastError();
    return false;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    err = path + ": " + lastError();
    ::close(fd);
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    err = path + ": not a regular file";
    ::close(fd);
    return false;
  }
  size_t size = (size_t)st.st_size;
  void *m = nullptr;
  if (size) {
    m = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
      err = path + ": cannot map: " + lastError();
      ::close(fd);
      return false;
    }
  }
  ::close(fd);
  if (map_)
    ::munmap(map_, size_);
  map_ = m;
  data_ = static_cast<const uint8_t *>(m);
  size_ = size;
  return true;
}

void MappedFile::adviseRandom() const {
  if (map_)
    ::madvise(map_, size_, MADV_RANDOM);
}

std::string formatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0)
    seconds = 0;
  uint64_t s = (uint64_t)std::llround(seconds);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%llu:%02llu:%02llu",
                (unsigned long long)(s / 3600), (unsigned long long)(s / 60 % 60),
                (unsigned long long)(s % 60));
  return buf;
}

} // namespace kiln::train
