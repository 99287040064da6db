//===- ONNXLibrary.cpp - no-throw wrapper over libonnx -----------*- C++
//-*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The one file of Kiln compiled with -fexceptions: it calls libonnx and
// protobuf, catches everything they throw and turns it into one-line errors.
// It includes no MLIR header.
//===----------------------------------------------------------------------===//

#include "ONNXLibrary.h"

#include "kiln/Support/InputFile.h"

#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/stubs/logging.h>

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <set>
#include <unordered_map>
#include <vector>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace kiln {
namespace onnxlib {

namespace {

using ::onnx::AttributeProto;
using ::onnx::GraphProto;
using ::onnx::ModelProto;
using ::onnx::NodeProto;
using ::onnx::TensorProto;

/// Deepest message nesting protobuf accepts (its default); ONNX subgraphs nest
/// a few levels per If/Loop, far below this.
constexpr int kRecursionLimit = 100;

/// A protobuf-serialized model cannot exceed 2 GiB.
constexpr uint64_t kMaxModelBytes = INT_MAX;

/// Collapses `text` to one line: newlines, tabs and other control characters
/// become single spaces, leading and trailing spaces go.
std::string oneLine(const std::string &text) {
  std::string out;
  out.reserve(text.size());
  bool pendingSpace = false;
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f || c == ' ') {
      pendingSpace = !out.empty();
      continue;
    }
    if (pendingSpace)
      out.push_back(' ');
    pendingSpace = false;
    out.push_back(static_cast<char>(c));
  }
  constexpr size_t kMaxMessage = 2000;
  if (out.size() > kMaxMessage) {
    out.resize(kMaxMessage);
    out += "...";
  }
  return out;
}

bool isKnownDomain(const std::string &domain) {
  return domain.empty() || domain == "ai.onnx.ml" ||
         domain == "ai.onnx.preview.training";
}

std::string nodeDesc(const NodeProto &node, int index) {
  return "node " + quote(nodeDisplayName(node, index)) + " (op " +
         sanitize(node.op_type()) + ")";
}

/// The byte size of one element of `dataType`, or 0 when it has no fixed
/// size (strings, unknown types).
size_t elementSize(int32_t dataType) {
  switch (dataType) {
  case TensorProto::FLOAT:
  case TensorProto::INT32:
  case TensorProto::UINT32:
    return 4;
  case TensorProto::DOUBLE:
  case TensorProto::INT64:
  case TensorProto::UINT64:
  case TensorProto::COMPLEX64:
    return 8;
  case TensorProto::COMPLEX128:
    return 16;
  case TensorProto::FLOAT16:
  case TensorProto::BFLOAT16:
  case TensorProto::INT16:
  case TensorProto::UINT16:
    return 2;
  case TensorProto::INT8:
  case TensorProto::UINT8:
  case TensorProto::BOOL:
    return 1;
  default:
    return 0;
  }
}

/// The byte size `tensor`'s dims and data type call for, or false when it
/// cannot be computed (negative dims, overflow, variable-size type).
bool expectedBytes(const TensorProto &tensor, uint64_t &bytes) {
  uint64_t n = elementSize(tensor.data_type());
  if (n == 0)
    return false;
  for (int64_t d : tensor.dims()) {
    if (d < 0)
      return false;
    if (d != 0 && n > UINT64_MAX / static_cast<uint64_t>(d))
      return false;
    n *= static_cast<uint64_t>(d);
  }
  bytes = n;
  return true;
}

/// Checks that `tensor` (described as `what`) holds as many values as its
/// dims say. External data must have been inlined.
bool checkTensorData(const TensorProto &tensor, const std::string &what,
                     LoadError &err) {
  for (int64_t d : tensor.dims())
    if (d < 0) {
      err.message = what + " has invalid shape " + shapeString(tensor);
      return false;
    }
  uint64_t bytes;
  if (tensor.data_location() == TensorProto::EXTERNAL ||
      !expectedBytes(tensor, bytes))
    return true; // Unsupported types are refused by the importer.
  uint64_t elem = elementSize(tensor.data_type());
  if (tensor.has_raw_data()) {
    if (tensor.raw_data().size() != bytes) {
      err.message = what + " has " + std::to_string(tensor.raw_data().size()) +
                    " bytes of raw data but its shape " + shapeString(tensor) +
                    " of " + dataTypeName(tensor.data_type()) + " needs " +
                    std::to_string(bytes);
      return false;
    }
    return true;
  }
  uint64_t count;
  switch (tensor.data_type()) {
  case TensorProto::FLOAT:
    count = static_cast<uint64_t>(tensor.float_data_size());
    break;
  case TensorProto::COMPLEX64:
    count = static_cast<uint64_t>(tensor.float_data_size()) / 2;
    break;
  case TensorProto::DOUBLE:
    count = static_cast<uint64_t>(tensor.double_data_size());
    break;
  case TensorProto::COMPLEX128:
    count = static_cast<uint64_t>(tensor.double_data_size()) / 2;
    break;
  case TensorProto::INT64:
    count = static_cast<uint64_t>(tensor.int64_data_size());
    break;
  case TensorProto::UINT32:
  case TensorProto::UINT64:
    count = static_cast<uint64_t>(tensor.uint64_data_size());
    break;
  default:
    count = static_cast<uint64_t>(tensor.int32_data_size());
    break;
  }
  if (count != bytes / elem) {
    err.message = what + " has " + std::to_string(count) +
                  " values but its shape " + shapeString(tensor) + " needs " +
                  std::to_string(bytes / elem);
    return false;
  }
  return true;
}

std::string errnoText(int err) { return std::strerror(err); }

/// Reads all of `path` into `out`: a regular file (kiln/Support/InputFile.h:
/// a FIFO is refused rather than waited on) of at most 2 GiB.
bool readFile(const std::string &path, std::string &out, std::string &why) {
  uint64_t size = 0;
  int fd = openRegularFile(path, why, &size);
  if (fd < 0)
    return false;
  if (size > kMaxModelBytes) {
    why = "the file is " + std::to_string(size) +
          " bytes; a serialized ONNX model is at most 2 GiB (store the "
          "weights as external data)";
    ::close(fd);
    return false;
  }
  out.clear();
  char buf[1 << 16];
  while (true) {
    ssize_t got = ::read(fd, buf, sizeof(buf));
    if (got < 0) {
      if (errno == EINTR)
        continue;
      why = errnoText(errno);
      ::close(fd);
      return false;
    }
    if (got == 0)
      break;
    out.append(buf, static_cast<size_t>(got));
    if (out.size() > kMaxModelBytes) {
      why = "a serialized ONNX model is at most 2 GiB";
      ::close(fd);
      return false;
    }
  }
  ::close(fd);
  return true;
}

/// Parses a non-negative decimal integer; false on anything else.
bool parseUnsigned(const std::string &text, uint64_t &value) {
  if (text.empty() || text.size() > 20)
    return false;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return false;
    uint64_t digit = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - digit) / 10)
      return false;
    v = v * 10 + digit;
  }
  value = v;
  return true;
}

/// Resolves an external data `location` against `baseDir`, refusing anything
/// that is not inside that folder once symbolic links are followed.
bool resolveExternalLocation(const std::string &baseDir,
                             const std::string &location, std::string &resolved,
                             std::string &why) {
  if (location.empty()) {
    why = "is empty";
    return false;
  }
  if (location.find('\0') != std::string::npos) {
    why = "contains a NUL character";
    return false;
  }
  if (location[0] == '/') {
    why = "is absolute; it must be relative to the model's folder";
    return false;
  }
  // Lexical check first, so that "../x" is refused whether or not it exists.
  int depth = 0;
  size_t start = 0;
  while (start <= location.size()) {
    size_t end = location.find('/', start);
    if (end == std::string::npos)
      end = location.size();
    std::string part = location.substr(start, end - start);
    if (part == "..") {
      if (depth == 0) {
        why = "escapes the model's folder";
        return false;
      }
      --depth;
    } else if (!part.empty() && part != ".") {
      ++depth;
    }
    start = end + 1;
  }
  char *baseReal = ::realpath(baseDir.empty() ? "." : baseDir.c_str(), nullptr);
  if (!baseReal) {
    why = "cannot be resolved: the model's folder " + quote(baseDir) + " is " +
          errnoText(errno);
    return false;
  }
  std::string base = baseReal;
  std::free(baseReal);
  std::string joined = base + "/" + location;
  char *real = ::realpath(joined.c_str(), nullptr);
  if (!real) {
    why = "cannot be opened: " + errnoText(errno);
    return false;
  }
  resolved = real;
  std::free(real);
  std::string prefix = base == "/" ? base : base + "/";
  if (resolved.compare(0, prefix.size(), prefix) != 0 ||
      resolved.size() == prefix.size()) {
    why = "escapes the model's folder (through a symbolic link)";
    return false;
  }
  return true;
}

/// Loads the external data of `tensor` (described as `what` in messages) into
/// its raw_data.
bool inlineExternalData(TensorProto &tensor, const std::string &what,
                        const std::string &baseDir, LoadError &err) {
  if (tensor.data_location() != TensorProto::EXTERNAL)
    return true;
  std::string location;
  bool hasLocation = false, hasLength = false;
  uint64_t offset = 0, length = 0;
  for (const auto &entry : tensor.external_data()) {
    const std::string &key = entry.key();
    if (key == "location") {
      location = entry.value();
      hasLocation = true;
    } else if (key == "offset" || key == "length") {
      uint64_t v;
      if (!parseUnsigned(entry.value(), v)) {
        err.message = what + ": external data " + key + " " +
                      quote(entry.value()) + " is not a non-negative integer";
        return false;
      }
      if (key == "offset") {
        offset = v;
      } else {
        length = v;
        hasLength = true;
      }
    }
  }
  if (!hasLocation) {
    err.message = what + ": external data has no 'location' entry";
    return false;
  }
  std::string path, why;
  if (!resolveExternalLocation(baseDir, location, path, why)) {
    err.message =
        what + ": external data location " + quote(location) + " " + why;
    return false;
  }
  uint64_t fileSize = 0;
  int fd = openRegularFile(path, why, &fileSize);
  if (fd < 0) {
    err.message = what + ": external data file " + quote(location) + ": " + why;
    return false;
  }
  if (offset > fileSize) {
    err.message = what + ": external data offset " + std::to_string(offset) +
                  " is past the end of " + quote(location) + " (" +
                  std::to_string(fileSize) + " bytes)";
    ::close(fd);
    return false;
  }
  if (!hasLength)
    length = fileSize - offset;
  if (length > fileSize - offset) {
    err.message = what + ": external data range [" + std::to_string(offset) +
                  ", " + std::to_string(offset) + "+" + std::to_string(length) +
                  ") is past the end of " + quote(location) + " (" +
                  std::to_string(fileSize) + " bytes)";
    ::close(fd);
    return false;
  }
  uint64_t expected;
  if (expectedBytes(tensor, expected) && expected != length) {
    err.message = what + ": external data has " + std::to_string(length) +
                  " bytes but its shape " + shapeString(tensor) + " of " +
                  dataTypeName(tensor.data_type()) + " needs " +
                  std::to_string(expected);
    ::close(fd);
    return false;
  }
  std::string bytes;
  bytes.resize(length);
  uint64_t done = 0;
  while (done < length) {
    ssize_t got = ::pread(fd, &bytes[done], length - done,
                          static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0) {
      err.message = what + ": cannot read external data file " +
                    quote(location) + ": " +
                    (got < 0 ? errnoText(errno) : "unexpected end of file");
      ::close(fd);
      return false;
    }
    done += static_cast<uint64_t>(got);
  }
  ::close(fd);
  tensor.clear_external_data();
  tensor.set_data_location(TensorProto::DEFAULT);
  tensor.set_raw_data(std::move(bytes));
  return true;
}

/// Structural checks the checker reports badly or not at all. Fills
/// `opsets` with the model's imports (domain normalised).
bool validateStructure(ModelProto &model, const std::string &displayName,
                       std::map<std::string, int64_t> &opsets, LoadError &err) {
  const std::string invalid = quote(displayName) + " is not a valid ONNX model";
  if (!model.has_ir_version()) {
    err.message = invalid + " (it has no ir_version)";
    return false;
  }
  if (!model.has_graph()) {
    err.message = invalid + " (it has no graph)";
    return false;
  }
  const GraphProto &graph = model.graph();

  // Operator sets.
  std::map<std::string, int64_t> firstUse; // domain -> node index
  for (int i = 0, e = graph.node_size(); i < e; ++i) {
    std::string domain = normalizeDomain(graph.node(i).domain());
    firstUse.emplace(domain, i);
  }
  for (const auto &imp : model.opset_import()) {
    std::string domain = normalizeDomain(imp.domain());
    if (!isKnownDomain(domain)) {
      err.message =
          "opset_import names unknown operator domain " + quote(imp.domain());
      auto it = firstUse.find(domain);
      if (it != firstUse.end()) {
        err.message += ", first used by " +
                       nodeDesc(graph.node(static_cast<int>(it->second)),
                                static_cast<int>(it->second));
        err.nodeIndex = static_cast<int>(it->second);
      } else {
        err.message += " (no node uses it)";
      }
      err.message += "; Kiln supports ai.onnx, ai.onnx.ml and "
                     "ai.onnx.preview.training";
      return false;
    }
    if (imp.version() < 1) {
      err.message = "opset_import of domain " +
                    quote(domain.empty() ? "ai.onnx" : domain) +
                    " has invalid version " + std::to_string(imp.version());
      return false;
    }
    if (!opsets.emplace(domain, imp.version()).second) {
      err.message = "opset_import lists domain " +
                    quote(domain.empty() ? "ai.onnx" : domain) + " twice";
      return false;
    }
  }
  for (const auto &use : firstUse) {
    if (opsets.count(use.first))
      continue;
    int idx = static_cast<int>(use.second);
    err.nodeIndex = idx;
    if (!isKnownDomain(use.first))
      err.message = nodeDesc(graph.node(idx), idx) +
                    " uses unknown operator domain " + quote(use.first) +
                    "; Kiln supports ai.onnx, ai.onnx.ml and "
                    "ai.onnx.preview.training";
    else
      err.message = nodeDesc(graph.node(idx), idx) + " uses domain " +
                    quote(use.first.empty() ? "ai.onnx" : use.first) +
                    ", which the model's opset_import does not list";
    return false;
  }
  // A model may import only ai.onnx.preview.training or ai.onnx.ml (the loop
  // above made sure then that no node uses the default domain).
  auto def = opsets.find("");
  if (def != opsets.end() && def->second < kMinOpset) {
    err.message = "opset " + std::to_string(def->second) + " is older than " +
                  std::to_string(kMinOpset) +
                  ", the oldest ONNX operator set Kiln imports; re-export the "
                  "model with a newer opset";
    return false;
  }

  if (graph.sparse_initializer_size() > 0) {
    err.message = "sparse initializer " +
                  quote(graph.sparse_initializer(0).values().name()) +
                  ": sparse initializers are not supported";
    return false;
  }

  // Every name is defined once, before its first use.
  enum Origin { Input, Initializer, Node };
  std::unordered_map<std::string, Origin> defined;
  for (const auto &init : graph.initializer()) {
    if (init.name().empty()) {
      err.message = "an initializer has no name";
      return false;
    }
    if (!defined.emplace(init.name(), Initializer).second) {
      err.message = "initializer " + quote(init.name()) + " is defined twice";
      return false;
    }
  }
  std::set<std::string> inputNames;
  for (const auto &input : graph.input()) {
    if (input.name().empty()) {
      err.message = "a graph input has no name";
      return false;
    }
    if (!inputNames.insert(input.name()).second) {
      err.message = "graph input " + quote(input.name()) + " is listed twice";
      return false;
    }
    // An input may also be an initializer (its default value; IR < 4).
    defined.emplace(input.name(), Input);
  }
  for (int i = 0, e = graph.node_size(); i < e; ++i) {
    const NodeProto &node = graph.node(i);
    for (const std::string &in : node.input()) {
      if (in.empty() || defined.count(in))
        continue;
      err.message = nodeDesc(node, i) + " uses " + quote(in) +
                    " which no earlier node, input or initializer defines "
                    "(dangling input or cycle)";
      err.nodeIndex = i;
      return false;
    }
    for (const std::string &out : node.output()) {
      if (out.empty())
        continue;
      auto [it, inserted] = defined.emplace(out, Node);
      if (inserted)
        continue;
      const char *by = it->second == Input         ? "a graph input"
                       : it->second == Initializer ? "an initializer"
                                                   : "an earlier node";
      err.message = nodeDesc(node, i) + " defines " + quote(out) + ", which " +
                    by + " already defines (ONNX graphs are in SSA form)";
      err.nodeIndex = i;
      return false;
    }
  }
  for (const auto &output : graph.output()) {
    if (!defined.count(output.name())) {
      err.message = "graph output " + quote(output.name()) +
                    " is not produced by any node, input or initializer";
      return false;
    }
  }
  return true;
}

/// Replaces symbolic dims in `shape` by the values in `params`.
void substituteDims(::onnx::TypeProto *type,
                    const std::map<std::string, int64_t> &params) {
  if (!type || !type->has_tensor_type() || !type->tensor_type().has_shape())
    return;
  auto *shape = type->mutable_tensor_type()->mutable_shape();
  for (auto &dim : *shape->mutable_dim()) {
    if (!dim.has_dim_param())
      continue;
    auto it = params.find(dim.dim_param());
    if (it != params.end())
      dim.set_dim_value(it->second);
  }
}

/// Applies --dim / --batch-size to the graph.
void applyDimOptions(GraphProto &graph, const LoadOptions &options) {
  std::map<std::string, int64_t> params = options.dimValues;
  std::set<std::string> initNames;
  for (const auto &init : graph.initializer())
    initNames.insert(init.name());
  if (options.batchSize > 0) {
    for (auto &input : *graph.mutable_input()) {
      if (initNames.count(input.name()) || !input.has_type() ||
          !input.type().has_tensor_type() ||
          !input.type().tensor_type().has_shape() ||
          input.type().tensor_type().shape().dim_size() == 0)
        continue;
      auto *dim0 = input.mutable_type()
                       ->mutable_tensor_type()
                       ->mutable_shape()
                       ->mutable_dim(0);
      if (dim0->has_dim_value()) {
        if (options.overrideBatch && dim0->dim_value() != options.batchSize) {
          int64_t old = dim0->dim_value();
          dim0->set_dim_value(options.batchSize);
          // Shapes downstream follow from inference again.
          graph.clear_value_info();
          for (auto &out : *graph.mutable_output())
            if (out.type().has_tensor_type() &&
                out.type().tensor_type().has_shape() &&
                out.type().tensor_type().shape().dim_size() > 0 &&
                out.type().tensor_type().shape().dim(0).dim_value() == old)
              out.mutable_type()->mutable_tensor_type()->mutable_shape()
                  ->mutable_dim(0)->set_dim_value(options.batchSize);
        }
        continue;
      }
      if (dim0->has_dim_param()) {
        params.emplace(dim0->dim_param(), options.batchSize);
        continue;
      }
      dim0->set_dim_value(options.batchSize);
    }
  }
  if (params.empty())
    return;
  for (auto &v : *graph.mutable_input())
    if (!initNames.count(v.name()))
      substituteDims(v.mutable_type(), params);
  for (auto &v : *graph.mutable_output())
    substituteDims(v.mutable_type(), params);
  for (auto &v : *graph.mutable_value_info())
    substituteDims(v.mutable_type(), params);
}

/// Initializers larger than this are left out of the copy of the model that
/// the version converter and shape inference see (and that the isolated
/// process sends back): they only need its type and shape, which a graph
/// input of the same name gives them.
constexpr uint64_t kStripBytes = 64 * 1024;

/// Time the isolated libonnx process may take.
constexpr unsigned kStageSeconds = 300;

uint64_t dataBytes(const TensorProto &tensor) {
  return tensor.raw_data().size() + 4 * uint64_t(tensor.float_data_size()) +
         4 * uint64_t(tensor.int32_data_size()) +
         8 * uint64_t(tensor.int64_data_size()) +
         8 * uint64_t(tensor.double_data_size()) +
         8 * uint64_t(tensor.uint64_data_size());
}

bool isStripped(const TensorProto &tensor) {
  return dataBytes(tensor) > kStripBytes;
}

/// Replaces every large initializer of `model` by a graph input of the same
/// name, type and shape (unless the graph already lists it as an input).
void stripLargeInitializers(ModelProto &model) {
  GraphProto &graph = *model.mutable_graph();
  std::set<std::string> inputs;
  for (const auto &input : graph.input())
    inputs.insert(input.name());
  auto *inits = graph.mutable_initializer();
  int kept = 0;
  for (int i = 0, e = inits->size(); i < e; ++i) {
    TensorProto &init = *inits->Mutable(i);
    if (!isStripped(init)) {
      if (kept != i)
        inits->Mutable(kept)->Swap(&init);
      ++kept;
      continue;
    }
    if (inputs.insert(init.name()).second) {
      ::onnx::ValueInfoProto *input = graph.add_input();
      input->set_name(init.name());
      auto *tensorType = input->mutable_type()->mutable_tensor_type();
      tensorType->set_elem_type(init.data_type());
      auto *shape = tensorType->mutable_shape();
      for (int64_t d : init.dims())
        shape->add_dim()->set_dim_value(d);
    }
  }
  while (inits->size() > kept)
    inits->RemoveLast();
}

/// Undoes stripLargeInitializers on `result` (the converted, shape-inferred
/// model) using the initializers of `original`, in their original order.
void restoreInitializers(ModelProto &original, ModelProto &result) {
  GraphProto &from = *original.mutable_graph();
  GraphProto &to = *result.mutable_graph();
  std::set<std::string> originalInputs, stripped;
  for (const auto &input : from.input())
    originalInputs.insert(input.name());
  std::map<std::string, TensorProto *> kept;
  for (auto &init : *to.mutable_initializer())
    kept.emplace(init.name(), &init);
  ::google::protobuf::RepeatedPtrField<TensorProto> inits;
  std::set<std::string> placed;
  for (auto &init : *from.mutable_initializer()) {
    if (isStripped(init)) {
      stripped.insert(init.name());
      placed.insert(init.name());
      inits.Add()->Swap(&init);
      continue;
    }
    auto it = kept.find(init.name());
    if (it == kept.end())
      continue; // The converter dropped it.
    inits.Add()->Swap(it->second);
    placed.insert(it->first);
  }
  // Initializers the converter added (attributes that became inputs).
  for (auto &init : *to.mutable_initializer())
    if (!init.name().empty() && !placed.count(init.name()) &&
        !stripped.count(init.name()))
      inits.Add()->Swap(&init);
  to.mutable_initializer()->Swap(&inits);
  // Drop the stand-in inputs.
  auto *inputs = to.mutable_input();
  int keptInputs = 0;
  for (int i = 0, e = inputs->size(); i < e; ++i) {
    const std::string &name = inputs->Get(i).name();
    if (stripped.count(name) && !originalInputs.count(name))
      continue;
    if (keptInputs != i)
      inputs->Mutable(keptInputs)->Swap(inputs->Mutable(i));
    ++keptInputs;
  }
  while (inputs->size() > keptInputs)
    inputs->RemoveLast();
}

/// Runs the libonnx stages on `work` (a copy of the model the caller may
/// discard): the checker, then on a version without the large initializers,
/// the version converter (when `upgrade`) and shape inference. `mark` is told
/// the stage about to run. Returns "" or a one-line error.
std::string runStages(ModelProto &work, bool upgrade,
                      void (*mark)(char stage)) {
  mark('c');
  try {
    ::onnx::checker::check_model(work);
  } catch (const std::exception &e) {
    return "ONNX checker: " + oneLine(e.what());
  }
  stripLargeInitializers(work);
  // Upgrade old opsets; when the converter cannot, keep the model as it is.
  if (upgrade) {
    mark('v');
    try {
      ModelProto converted =
          ::onnx::version_conversion::ConvertVersion(work, kTargetOpset);
      ::onnx::checker::check_model(converted);
      work = std::move(converted);
    } catch (...) {
    }
  }
  mark('s');
  try {
    ::onnx::ShapeInferenceOptions inferOptions(/*check_type=*/false,
                                               /*strict_mode=*/1,
                                               /*data_prop=*/true);
    ::onnx::shape_inference::InferShapes(
        work, ::onnx::OpSchemaRegistry::Instance(), inferOptions);
  } catch (const std::exception &e) {
    return "shape inference failed: " + oneLine(e.what());
  }
  return "";
}

const char *stageName(char stage) {
  switch (stage) {
  case 'c':
    return "the ONNX checker";
  case 'v':
    return "the version converter";
  case 's':
    return "shape inference";
  default:
    return "loading";
  }
}

bool runStagesInProcess(const ModelProto &model, bool upgrade,
                        ModelProto &result, LoadError &err) {
  result = model;
  std::string why = runStages(result, upgrade, [](char) {});
  if (why.empty())
    return true;
  err.message = why;
  return false;
}

int stagePipe = -1;

bool writeAll(int fd, const char *data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

/// Runs the stages in a forked child, so that a crash inside libonnx (whose
/// inference functions trust their inputs' ranks) is an error, not the end of
/// the process. The child sends back stage marks, then 'O' and the model, or
/// 'E' and a message.
bool runStagesIsolated(const ModelProto &model, bool upgrade,
                       ModelProto &result, LoadError &err) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    err.message = "cannot create a pipe for libonnx: " + errnoText(errno);
    return false;
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    err.message = "cannot fork for libonnx: " + errnoText(errno);
    ::close(fds[0]);
    ::close(fds[1]);
    return false;
  }
  if (pid == 0) {
    // The child: no return, no exit handlers, and crashes that only its
    // exit status reports (no LLVM crash handler, no core file, no output).
    ::close(fds[0]);
    stagePipe = fds[1];
    for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGALRM, SIGPIPE})
      ::signal(sig, SIG_DFL);
    struct rlimit noCore = {0, 0};
    ::setrlimit(RLIMIT_CORE, &noCore);
    int devNull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devNull >= 0) {
      ::dup2(devNull, STDOUT_FILENO);
      ::dup2(devNull, STDERR_FILENO);
    }
    ::alarm(kStageSeconds);
    int status = 0;
    try {
      ModelProto work = model;
      std::string why = runStages(work, upgrade, [](char stage) {
        (void)writeAll(stagePipe, &stage, 1);
      });
      std::string out;
      if (why.empty()) {
        out = "O";
        std::string bytes;
        if (!work.SerializeToString(&bytes))
          out = "Ethe model is too large to serialize after shape inference";
        else
          out += bytes;
      } else {
        out = "E" + why;
      }
      if (!writeAll(fds[1], out.data(), out.size()))
        status = 1;
    } catch (const std::exception &e) {
      std::string out = "E" + oneLine(e.what());
      (void)writeAll(fds[1], out.data(), out.size());
    } catch (...) {
      status = 1;
    }
    ::_exit(status);
  }

  ::close(fds[1]);
  std::string reply;
  char buf[1 << 16];
  while (true) {
    ssize_t n = ::read(fds[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    reply.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }

  // Skip the stage marks; remember the last.
  char stage = 0;
  size_t pos = 0;
  while (pos < reply.size() &&
         (reply[pos] == 'c' || reply[pos] == 'v' || reply[pos] == 's'))
    stage = reply[pos++];
  if (pos < reply.size() && reply[pos] == 'E') {
    err.message = reply.substr(pos + 1);
    return false;
  }
  if (pos < reply.size() && reply[pos] == 'O' && WIFEXITED(status) &&
      WEXITSTATUS(status) == 0) {
    google::protobuf::LogSilencer silence;
    if (reply.size() - pos - 1 > kMaxModelBytes) {
      err.message = "the model is too large after shape inference";
      return false;
    }
    google::protobuf::io::CodedInputStream in(
        reinterpret_cast<const uint8_t *>(reply.data() + pos + 1),
        static_cast<int>(reply.size() - pos - 1));
    in.SetRecursionLimit(kRecursionLimit);
    in.SetTotalBytesLimit(static_cast<int>(kMaxModelBytes));
    if (result.ParseFromCodedStream(&in) && in.ConsumedEntireMessage())
      return true;
    err.message = "cannot read back the model after shape inference";
    return false;
  }
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    if (sig == SIGALRM)
      err.message = std::string(stageName(stage)) + " took longer than " +
                    std::to_string(kStageSeconds) + " s on this model";
    else
      err.message = "libonnx crashed (" + std::string(strsignal(sig)) +
                    ") in " + stageName(stage) +
                    "; the model is malformed (inputs of ranks or attributes "
                    "an operator does not accept?)";
  } else {
    err.message = std::string(stageName(stage)) +
                  " failed without a message (exit status " +
                  std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                  ")";
  }
  return false;
}

bool loadImpl(const char *data, size_t size, const std::string &displayName,
              const std::string &baseDir, const LoadOptions &options,
              ModelProto &model, LoadError &err) {
  err = LoadError();
  if (size > kMaxModelBytes) {
    err.message = quote(displayName) +
                  " is larger than 2 GiB, the most a serialized ONNX model "
                  "can be (store the weights as external data)";
    return false;
  }
  {
    google::protobuf::LogSilencer silence;
    google::protobuf::io::CodedInputStream in(
        reinterpret_cast<const uint8_t *>(data), static_cast<int>(size));
    in.SetRecursionLimit(kRecursionLimit);
    in.SetTotalBytesLimit(static_cast<int>(kMaxModelBytes));
    model.Clear();
    if (!model.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage()) {
      err.message = quote(displayName) +
                    " is not a valid ONNX model (protobuf parsing failed: the "
                    "file is truncated or not an ONNX model)";
      return false;
    }
  }

  std::map<std::string, int64_t> opsets;
  if (!validateStructure(model, displayName, opsets, err))
    return false;

  // Bring external data inline, so that everything after sees it.
  GraphProto &graph = *model.mutable_graph();
  for (auto &init : *graph.mutable_initializer()) {
    std::string what = "initializer " + quote(init.name());
    if (!inlineExternalData(init, what, baseDir, err) ||
        !checkTensorData(init, what, err))
      return false;
  }
  for (int i = 0, e = graph.node_size(); i < e; ++i) {
    NodeProto &node = *graph.mutable_node(i);
    for (auto &attr : *node.mutable_attribute()) {
      std::string what = nodeDesc(node, i) + " attribute " + quote(attr.name());
      if (attr.has_t() &&
          (!inlineExternalData(*attr.mutable_t(), what, baseDir, err) ||
           !checkTensorData(attr.t(), what, err))) {
        err.nodeIndex = i;
        return false;
      }
      for (auto &t : *attr.mutable_tensors())
        if (!inlineExternalData(t, what, baseDir, err) ||
            !checkTensorData(t, what, err)) {
          err.nodeIndex = i;
          return false;
        }
    }
  }

  applyDimOptions(graph, options);

  bool upgrade = opsets.count("") && opsets[""] < kTargetOpset;
  ModelProto result;
  const char *inProcess = std::getenv("KILN_ONNX_IN_PROCESS");
  bool ok = inProcess && *inProcess && std::strcmp(inProcess, "0") != 0
                ? runStagesInProcess(model, upgrade, result, err)
                : runStagesIsolated(model, upgrade, result, err);
  if (!ok)
    return false;
  restoreInitializers(model, result);
  model = std::move(result);
  return true;
}

} // namespace

std::string nodeDisplayName(const NodeProto &node, int index) {
  if (!node.name().empty())
    return node.name();
  return node.op_type() + "_" + std::to_string(index);
}

std::string dataTypeName(int32_t dataType) {
  if (TensorProto::DataType_IsValid(dataType))
    return TensorProto::DataType_Name(
        static_cast<TensorProto::DataType>(dataType));
  return "type " + std::to_string(dataType);
}

std::string normalizeDomain(const std::string &domain) {
  return domain == "ai.onnx" ? std::string() : domain;
}

std::string sanitize(const std::string &text) {
  constexpr size_t kMaxQuoted = 200;
  std::string out;
  size_t n = 0;
  for (unsigned char c : text) {
    if (++n > kMaxQuoted) {
      out += "...";
      break;
    }
    if (c < 0x20 || c == 0x7f || c == '\\') {
      static const char hex[] = "0123456789abcdef";
      out += "\\";
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

std::string quote(const std::string &text) {
  return "'" + sanitize(text) + "'";
}

std::string shapeString(const TensorProto &tensor) {
  if (tensor.dims_size() == 0)
    return "[] (a scalar)";
  std::string out = "[";
  for (int i = 0, e = tensor.dims_size(); i < e; ++i) {
    if (i)
      out += ", ";
    out += std::to_string(tensor.dims(i));
  }
  return out + "]";
}

bool loadModelFromBuffer(const char *data, size_t size,
                         const std::string &displayName,
                         const std::string &baseDir, const LoadOptions &options,
                         ModelProto &out, LoadError &err) {
  try {
    return loadImpl(data, size, displayName, baseDir, options, out, err);
  } catch (const std::exception &e) {
    err.message =
        "cannot load " + quote(displayName) + ": " + oneLine(e.what());
  } catch (...) {
    err.message = "cannot load " + quote(displayName) + ": unknown error";
  }
  return false;
}

bool loadModel(const std::string &path, const LoadOptions &options,
               ModelProto &out, LoadError &err) {
  err = LoadError();
  try {
    std::string bytes, why;
    if (!readFile(path, bytes, why)) {
      err.message = "cannot read " + quote(path) + ": " + why;
      return false;
    }
    std::string baseDir = ".";
    size_t slash = path.rfind('/');
    if (slash != std::string::npos)
      baseDir = slash == 0 ? "/" : path.substr(0, slash);
    return loadImpl(bytes.data(), bytes.size(), path, baseDir, options, out,
                    err);
  } catch (const std::exception &e) {
    err.message = "cannot load " + quote(path) + ": " + oneLine(e.what());
  } catch (...) {
    err.message = "cannot load " + quote(path) + ": unknown error";
  }
  return false;
}

bool loadModel(const std::string &path, ModelProto &out, std::string &err) {
  LoadError error;
  bool ok = loadModel(path, LoadOptions(), out, error);
  if (!ok)
    err = error.message;
  return ok;
}

} // namespace onnxlib
} // namespace kiln
