//===- PlanFile.h - the plan container (docs/PlanFormat.md) -----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The binary container around a plan's JSON header and data blob:
//   "KILNPLAN", u32 version, u32 reserved (0), u64 J, u64 D, J bytes of JSON,
//   zero padding to a multiple of 64, D bytes of blob. Little-endian.
// Header-only and free of exceptions other than std::bad_alloc: the only
// writer of the container, used by the compiler (lib/Target/Plan/
// ExportPlan.cpp) and tests, so they build the same bytes the loader reads.
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_PLANFILE_H
#define KILN_RUNTIME_PLANFILE_H

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace kiln::rt {

constexpr char kPlanMagic[8] = {'K', 'I', 'L', 'N', 'P', 'L', 'A', 'N'};
/// The format version the compiler writes and this runtime reads (in the
/// container and as the JSON header's "version").
constexpr uint32_t kPlanFormatVersion = 1;
/// The roles a plan parameter may carry (docs/PlanFormat.md, the schema's
/// $defs/role), as the plan spells them. The compiler's ParamRole enum
/// (KilnEnums.td) must name exactly these: ExportPlan.cpp checks each role it
/// writes, FormatSchemaTest checks the schema against this list.
inline constexpr std::string_view kParamRoles[] = {"weight", "state", "frozen",
                                                   "optimizer"};

inline bool isParamRole(std::string_view role) {
  for (std::string_view r : kParamRoles)
    if (r == role)
      return true;
  return false;
}

/// Bytes before the JSON header.
constexpr size_t kPlanPreambleBytes = 32;
/// The blob starts at the first multiple of this after the JSON.
constexpr size_t kPlanBlobAlignment = 64;

/// Builds a container: the JSON text and the blob, for format `version`.
inline std::string writePlanContainer(std::string_view json,
                                      std::string_view blob,
                                      uint32_t version = kPlanFormatVersion) {
  std::string out;
  auto put = [&](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i)
      out.push_back(char((v >> (8 * i)) & 0xff));
  };
  out.append(kPlanMagic, 8);
  put(version, 4);
  put(0, 4);
  put(json.size(), 8);
  put(blob.size(), 8);
  out.append(json.data(), json.size());
  while (out.size() % kPlanBlobAlignment)
    out.push_back('\0');
  out.append(blob.data(), blob.size());
  return out;
}

/// The parts of a container. On failure `err` is one line:
/// "not a Kiln plan (bad magic)", "plan format version N, this runtime reads
/// version 1", "truncated plan: ...", "plan has N bytes after its data blob".
struct PlanContainer {
  uint32_t version = 0;
  std::string_view json;
  std::string_view blob;
};

inline bool parsePlanContainer(const void *data, size_t size,
                               PlanContainer &out, std::string &err,
                               uint32_t wantVersion = kPlanFormatVersion) {
  const unsigned char *p = static_cast<const unsigned char *>(data);
  auto get = [&](size_t at, int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i)
      v |= (uint64_t)p[at + i] << (8 * i);
    return v;
  };
  if (!p || size < 8 || std::memcmp(p, kPlanMagic, 8) != 0) {
    err = "not a Kiln plan (bad magic)";
    return false;
  }
  if (size < kPlanPreambleBytes) {
    err = "truncated plan: " + std::to_string(size) +
          " bytes, the container header needs " +
          std::to_string(kPlanPreambleBytes);
    return false;
  }
  out.version = (uint32_t)get(8, 4);
  if (out.version != wantVersion) {
    err = "plan format version " + std::to_string(out.version) +
          ", this runtime reads version " + std::to_string(wantVersion);
    return false;
  }
  uint64_t j = get(16, 8), d = get(24, 8);
  uint64_t avail = size - kPlanPreambleBytes;
  if (j > avail) {
    err = "truncated plan: the JSON header is " + std::to_string(j) +
          " bytes, the file has " + std::to_string(avail) + " after the "
          "container header";
    return false;
  }
  uint64_t jsonEnd = kPlanPreambleBytes + j;
  uint64_t blobStart =
      (jsonEnd + kPlanBlobAlignment - 1) / kPlanBlobAlignment * kPlanBlobAlignment;
  if (d == 0 && blobStart > size) // an empty blob needs no padding
    blobStart = jsonEnd;
  if (blobStart > size || d > size - blobStart) {
    err = "truncated plan: the data blob is " + std::to_string(d) +
          " bytes at offset " + std::to_string(blobStart) + ", the file has " +
          std::to_string(size) + " bytes";
    return false;
  }
  if (blobStart + d != size) {
    err = "plan has " + std::to_string(size - blobStart - d) +
          " bytes after its data blob";
    return false;
  }
  out.json = std::string_view(reinterpret_cast<const char *>(p) + kPlanPreambleBytes, j);
  out.blob = std::string_view(reinterpret_cast<const char *>(p) + blobStart, d);
  return true;
}

} // namespace kiln::rt

#endif // KILN_RUNTIME_PLANFILE_H
