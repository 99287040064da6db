//===- Util.cpp - errors, files and formatting for kiln-train ---*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "Util.h"

#include "kiln/runtime/InputFile.h"

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
  // Regular files only, opened without blocking (a FIFO given as --data
  // once hung here forever; issue 21, defect 9).
  std::string why;
  uint64_t fileSize = 0;
  int fd = rt::openRegularFile(path, why, &fileSize);
  if (fd < 0) {
    err = path + ": " + why;
    return false;
  }
  size_t size = (size_t)fileSize;
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
