//===- Import.cpp - ONNX model to the onnx dialect ---------------*- C++
//-*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Builds `func.func @forward` from a loaded, validated and shape-inferred
// ModelProto (see ONNXLibrary.h, which does everything that may throw). This
// file is compiled without exceptions and bounds-checks all it reads from the
// model; every failure emits exactly one error.
//===----------------------------------------------------------------------===//

#include "kiln/Target/ONNX/Import.h"

#include "ONNXLibrary.h"
#include "kiln/Dialect/Kiln/IR/KilnAttributes.h"
#include "kiln/Dialect/ONNX/IR/ONNXOps.h"
#include "kiln/runtime/InputFile.h"
#include "kiln/Support/TensorSize.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"

#include <climits>
#include <cstring>

using namespace mlir;

namespace proto = ::onnx;

namespace kiln {
namespace {

using onnxlib::nodeDisplayName;
using onnxlib::quote;
using onnxlib::sanitize;

/// Tensors with more elements than this become dense_resource blobs.
constexpr int64_t kMaxInlineElements = 4096;

/// The folder of `path` ("." for a bare file name).
std::string parentDir(llvm::StringRef path) {
  llvm::StringRef dir = llvm::sys::path::parent_path(path);
  return dir.empty() ? std::string(".") : dir.str();
}

bool isFloatingDataType(int32_t dt) {
  return dt == proto::TensorProto::FLOAT || dt == proto::TensorProto::DOUBLE ||
         dt == proto::TensorProto::FLOAT16 ||
         dt == proto::TensorProto::BFLOAT16;
}

/// Bytes per element as Kiln stores it (bool: one byte), or 0 if unsupported.
size_t storageSize(int32_t dt) {
  switch (dt) {
  case proto::TensorProto::DOUBLE:
  case proto::TensorProto::INT64:
  case proto::TensorProto::UINT64:
    return 8;
  case proto::TensorProto::FLOAT:
  case proto::TensorProto::INT32:
  case proto::TensorProto::UINT32:
    return 4;
  case proto::TensorProto::FLOAT16:
  case proto::TensorProto::BFLOAT16:
  case proto::TensorProto::INT16:
  case proto::TensorProto::UINT16:
    return 2;
  case proto::TensorProto::INT8:
  case proto::TensorProto::UINT8:
  case proto::TensorProto::BOOL:
    return 1;
  default:
    return 0;
  }
}

const char *typeKindName(const proto::TypeProto &type) {
  switch (type.value_case()) {
  case proto::TypeProto::kSequenceType:
    return "a sequence";
  case proto::TypeProto::kMapType:
    return "a map";
  case proto::TypeProto::kOptionalType:
    return "an optional";
  case proto::TypeProto::kSparseTensorType:
    return "a sparse tensor";
  default:
    return "a non-tensor";
  }
}

/// Sanitises `name` into a resource blob key ([A-Za-z0-9_.]).
std::string blobKey(const std::string &name) {
  std::string key;
  for (char c : name)
    key.push_back(llvm::isAlnum(c) || c == '_' || c == '.' ? c : '_');
  if (key.empty() || llvm::isDigit(key[0]))
    key.insert(0, "t_");
  if (key.size() > 64)
    key.resize(64);
  return key;
}

/// Reads the values of `tensor` as little-endian storage (`elemSize` bytes an
/// element, bool as 0/1 bytes) into `bytes`, or with `bytes` null only checks
/// that there are `numel` of them. Returns "" or the reason it failed.
std::string readTensorData(const proto::TensorProto &tensor, uint64_t numel,
                           size_t elemSize, std::string *bytes) {
  const int32_t dt = tensor.data_type();
  if (tensor.has_raw_data()) {
    const std::string &raw = tensor.raw_data();
    if (raw.size() / elemSize != numel || raw.size() % elemSize != 0)
      return "it has " + std::to_string(raw.size()) +
             " bytes of raw data but its shape " +
             onnxlib::shapeString(tensor) + " of " + onnxlib::dataTypeName(dt) +
             " needs " + std::to_string(numel * elemSize);
    if (bytes) {
      *bytes = raw;
      if (dt == proto::TensorProto::BOOL)
        for (char &c : *bytes)
          c = c != 0;
    }
    return "";
  }

  uint64_t count = 0;
  switch (dt) {
  case proto::TensorProto::FLOAT:
    count = static_cast<uint64_t>(tensor.float_data_size());
    break;
  case proto::TensorProto::DOUBLE:
    count = static_cast<uint64_t>(tensor.double_data_size());
    break;
  case proto::TensorProto::INT64:
    count = static_cast<uint64_t>(tensor.int64_data_size());
    break;
  case proto::TensorProto::UINT32:
  case proto::TensorProto::UINT64:
    count = static_cast<uint64_t>(tensor.uint64_data_size());
    break;
  default:
    count = static_cast<uint64_t>(tensor.int32_data_size());
    break;
  }
  if (count != numel)
    return "it has " + std::to_string(count) + " values but its shape " +
           onnxlib::shapeString(tensor) + " needs " + std::to_string(numel);
  if (!bytes)
    return "";

  bytes->assign(numel * elemSize, '\0');
  char *out = &(*bytes)[0];
  auto put = [&](uint64_t i, uint64_t bits) {
    // Little-endian, the first elemSize bytes of `bits`.
    for (size_t b = 0; b < elemSize; ++b)
      out[i * elemSize + b] = static_cast<char>((bits >> (8 * b)) & 0xff);
  };
  for (uint64_t i = 0; i < numel; ++i) {
    int idx = static_cast<int>(i);
    switch (dt) {
    case proto::TensorProto::FLOAT: {
      float f = tensor.float_data(idx);
      uint32_t bits;
      std::memcpy(&bits, &f, sizeof(bits));
      put(i, bits);
      break;
    }
    case proto::TensorProto::DOUBLE: {
      double d = tensor.double_data(idx);
      uint64_t bits;
      std::memcpy(&bits, &d, sizeof(bits));
      put(i, bits);
      break;
    }
    case proto::TensorProto::INT64:
      put(i, static_cast<uint64_t>(tensor.int64_data(idx)));
      break;
    case proto::TensorProto::UINT32:
    case proto::TensorProto::UINT64:
      put(i, tensor.uint64_data(idx));
      break;
    case proto::TensorProto::BOOL:
      put(i, tensor.int32_data(idx) != 0);
      break;
    default: // INT32, INT16, INT8, UINT16, UINT8, FLOAT16, BFLOAT16.
      put(i,
          static_cast<uint64_t>(static_cast<uint32_t>(tensor.int32_data(idx))));
      break;
    }
  }
  return "";
}

class Importer {
public:
  Importer(MLIRContext &ctx, llvm::StringRef path,
           const proto::ModelProto &model, const ImportOptions &opts)
      : ctx(ctx), builder(&ctx), path(path.str()), model(model), opts(opts),
        fileLoc(FileLineColLoc::get(&ctx, path, 0, 0)) {}

  OwningOpRef<ModuleOp> run();

private:
  MLIRContext &ctx;
  OpBuilder builder;
  std::string path;
  const proto::ModelProto &model;
  const ImportOptions &opts;
  Location fileLoc;

  std::map<std::string, int64_t> opsets;
  llvm::StringMap<const proto::TypeProto *> typeInfo;
  llvm::StringMap<Value> values;
  Block *entry = nullptr;
  Value none;

  LogicalResult fail(Location loc, const std::string &message) {
    emitError(loc) << message;
    return failure();
  }

  Location nodeLoc(int index) {
    const proto::NodeProto &node = model.graph().node(index);
    return NameLoc::get(
        StringAttr::get(&ctx, nodeDisplayName(node, index)),
        FileLineColLoc::get(&ctx, path, static_cast<unsigned>(index) + 1, 0));
  }

  Location nameLoc(const std::string &name) {
    return NameLoc::get(StringAttr::get(&ctx, name), fileLoc);
  }

  Type elementType(int32_t dt);
  FailureOr<Type> valueType(const std::string &name, Location loc);
  FailureOr<Type> inputType(const proto::ValueInfoProto &input);
  /// Fails naming `what` when a tensor of `type` is larger than the largest
  /// tensor (kiln/Support/TensorSize.h). For a graph input (`isInput`)
  /// whose dimension 0 is the batch the options set, the message names the
  /// batch and the sample it multiplies.
  LogicalResult checkSize(RankedTensorType type, const std::string &what,
                          Location loc, bool isInput = false);
  FailureOr<SmallVector<int64_t>> tensorDims(const proto::TensorProto &tensor,
                                             const std::string &what,
                                             Location loc, uint64_t &numel);
  FailureOr<RankedTensorType> paramType(const proto::TensorProto &tensor);
  FailureOr<ElementsAttr> tensorAttr(const proto::TensorProto &tensor,
                                     const std::string &what, Location loc,
                                     const std::string &blobName);
  FailureOr<Attribute> nodeAttr(const proto::AttributeProto &attr,
                                const std::string &desc, Location loc);
  LogicalResult importNode(int index);
  Value getNone();
};

Type Importer::elementType(int32_t dt) {
  return onnx::getElementType(builder.getContext(), dt);
}

FailureOr<Type> Importer::valueType(const std::string &name, Location loc) {
  Type unknown = UnrankedTensorType::get(builder.getF32Type());
  auto it = typeInfo.find(name);
  if (it == typeInfo.end() || !it->second)
    return unknown;
  const proto::TypeProto &type = *it->second;
  if (type.value_case() == proto::TypeProto::VALUE_NOT_SET)
    return unknown;
  if (!type.has_tensor_type()) {
    (void)fail(loc, "value " + quote(name) + " has " + typeKindName(type) +
                        " type; Kiln supports only tensors");
    return failure();
  }
  const proto::TypeProto::Tensor &tensor = type.tensor_type();
  if (tensor.elem_type() == proto::TensorProto::UNDEFINED)
    return unknown;
  Type elem = elementType(tensor.elem_type());
  if (!elem) {
    (void)fail(loc, "value " + quote(name) + " has element type " +
                        onnxlib::dataTypeName(tensor.elem_type()) +
                        ", which Kiln does not support");
    return failure();
  }
  if (!tensor.has_shape())
    return Type(UnrankedTensorType::get(elem));
  SmallVector<int64_t> dims;
  for (const auto &dim : tensor.shape().dim()) {
    int64_t size = ShapedType::kDynamic;
    if (dim.has_dim_value() && dim.dim_value() >= 0) {
      size = dim.dim_value();
    } else if (dim.has_dim_param()) {
      auto found = opts.dimValues.find(dim.dim_param());
      if (found != opts.dimValues.end())
        size = found->second;
    }
    dims.push_back(size);
  }
  auto ranked = RankedTensorType::get(dims, elem);
  if (failed(checkSize(ranked, "output " + quote(name), loc)))
    return failure();
  return Type(ranked);
}

FailureOr<Type> Importer::inputType(const proto::ValueInfoProto &input) {
  Location loc = nameLoc(input.name());
  const std::string what = "input " + quote(input.name());
  if (!input.has_type() ||
      input.type().value_case() == proto::TypeProto::VALUE_NOT_SET) {
    (void)fail(loc, what + " has no type");
    return failure();
  }
  if (!input.type().has_tensor_type()) {
    (void)fail(loc, what + " has " + typeKindName(input.type()) +
                        " type; Kiln supports only tensors");
    return failure();
  }
  const proto::TypeProto::Tensor &tensor = input.type().tensor_type();
  Type elem = elementType(tensor.elem_type());
  if (!elem) {
    (void)fail(loc, what + " has element type " +
                        onnxlib::dataTypeName(tensor.elem_type()) +
                        ", which Kiln does not support");
    return failure();
  }
  if (!tensor.has_shape()) {
    (void)fail(loc, what + " has no shape; Kiln needs static input shapes");
    return failure();
  }
  SmallVector<int64_t> dims;
  for (int i = 0, e = tensor.shape().dim_size(); i < e; ++i) {
    const auto &dim = tensor.shape().dim(i);
    std::string where = what + " dimension " + std::to_string(i);
    if (dim.has_dim_value()) {
      if (dim.dim_value() < 0) {
        (void)fail(loc, where + " has invalid size " +
                            std::to_string(dim.dim_value()));
        return failure();
      }
      dims.push_back(dim.dim_value());
      continue;
    }
    if (dim.has_dim_param()) {
      auto found = opts.dimValues.find(dim.dim_param());
      if (found != opts.dimValues.end()) {
        dims.push_back(found->second);
        continue;
      }
    }
    if (i == 0 && opts.batchSize > 0) {
      dims.push_back(opts.batchSize);
      continue;
    }
    if (dim.has_dim_param()) {
      std::string param = sanitize(dim.dim_param());
      (void)fail(loc, where + " ('" + param + "') is dynamic; pass " +
                          (i == 0 ? "--batch-size N or " : "") + "--dim " +
                          param + "=N");
    } else {
      (void)fail(loc, where + " is dynamic and unnamed; " +
                          (i == 0 ? std::string("pass --batch-size N")
                                  : std::string("give it a static size in "
                                                "the model")));
    }
    return failure();
  }
  auto type = RankedTensorType::get(dims, elem);
  if (failed(checkSize(type, what, loc, /*isInput=*/true)))
    return failure();
  return Type(type);
}

LogicalResult Importer::checkSize(RankedTensorType type, const std::string &what,
                                  Location loc, bool isInput) {
  int64_t bytes;
  if (!type.hasStaticShape() || checkedTypeBytes(type, bytes))
    return success();
  std::string why = tooLargeText(what, type);
  // The batch is the usual culprit: say which of the two factors it is.
  if (isInput && opts.batchSize > 0 && type.getRank() > 0 &&
      type.getDimSize(0) == opts.batchSize) {
    auto sample = RankedTensorType::get(type.getShape().drop_front(),
                                        type.getElementType());
    why += " (the batch, " + std::to_string(type.getDimSize(0)) +
           ", times a sample of " + tensorTypeText(sample) + ")";
  }
  return fail(loc, why);
}

FailureOr<SmallVector<int64_t>>
Importer::tensorDims(const proto::TensorProto &tensor, const std::string &what,
                     Location loc, uint64_t &numel) {
  SmallVector<int64_t> dims(tensor.dims().begin(), tensor.dims().end());
  for (int64_t d : dims)
    if (d < 0) {
      (void)fail(loc,
                 what + " has invalid shape " + onnxlib::shapeString(tensor));
      return failure();
    }
  int64_t n = 0;
  if (!rt::checkedNumel(dims, storageSize(tensor.data_type()), n)) {
    (void)fail(loc, what + " has shape " + onnxlib::shapeString(tensor) +
                        " of " + onnxlib::dataTypeName(tensor.data_type()) +
                        ", more than the " + rt::kMaxTensorBytesText +
                        " a tensor may hold");
    return failure();
  }
  numel = static_cast<uint64_t>(n);
  if (tensor.has_segment()) {
    (void)fail(loc, what + " is segmented; segmented tensors are not "
                           "supported");
    return failure();
  }
  if (tensor.data_location() == proto::TensorProto::EXTERNAL) {
    (void)fail(loc, what + " has external data, which is only supported for "
                           "initializers and node attributes of the main "
                           "graph");
    return failure();
  }
  return dims;
}

FailureOr<RankedTensorType>
Importer::paramType(const proto::TensorProto &tensor) {
  Location loc = nameLoc(tensor.name());
  std::string what = "initializer " + quote(tensor.name());
  uint64_t numel;
  auto dims = tensorDims(tensor, what, loc, numel);
  if (failed(dims))
    return failure();
  std::string bytes;
  std::string why = readTensorData(tensor, numel, storageSize(tensor.data_type()),
                                   opts.paramData ? &bytes : nullptr);
  if (why.empty() && opts.paramData)
    (*opts.paramData)[tensor.name()] = std::move(bytes);
  if (!why.empty()) {
    (void)fail(loc, what + ": " + why);
    return failure();
  }
  return RankedTensorType::get(*dims, elementType(tensor.data_type()));
}

FailureOr<ElementsAttr> Importer::tensorAttr(const proto::TensorProto &tensor,
                                             const std::string &what,
                                             Location loc,
                                             const std::string &blobName) {
  Type elem = elementType(tensor.data_type());
  if (!elem) {
    (void)fail(loc, what + " has element type " +
                        onnxlib::dataTypeName(tensor.data_type()) +
                        ", which Kiln does not support");
    return failure();
  }
  uint64_t numel;
  auto dims = tensorDims(tensor, what, loc, numel);
  if (failed(dims))
    return failure();
  size_t elemSize = storageSize(tensor.data_type());
  std::string bytes;
  std::string why = readTensorData(tensor, numel, elemSize, &bytes);
  if (!why.empty()) {
    (void)fail(loc, what + ": " + why);
    return failure();
  }
  auto type = RankedTensorType::get(*dims, elem);
  if (numel > static_cast<uint64_t>(kMaxInlineElements)) {
    AsmResourceBlob blob = HeapAsmResourceBlob::allocateAndCopyWithAlign(
        ArrayRef<char>(bytes.data(), bytes.size()), alignof(uint64_t));
    return ElementsAttr(DenseResourceElementsAttr::get(type, blobKey(blobName),
                                                       std::move(blob)));
  }
  if (elem.isInteger(1)) {
    SmallVector<bool> bits;
    bits.reserve(bytes.size());
    for (char c : bytes)
      bits.push_back(c != 0);
    return ElementsAttr(DenseElementsAttr::get(type, ArrayRef<bool>(bits)));
  }
  return ElementsAttr(DenseElementsAttr::getFromRawBuffer(
      type, ArrayRef<char>(bytes.data(), bytes.size())));
}

FailureOr<Attribute> Importer::nodeAttr(const proto::AttributeProto &attr,
                                        const std::string &desc, Location loc) {
  using A = proto::AttributeProto;
  A::AttributeType kind = attr.type();
  if (kind == A::UNDEFINED) {
    // Old models may leave the type out; infer it from the field set.
    if (attr.has_f())
      kind = A::FLOAT;
    else if (attr.has_i())
      kind = A::INT;
    else if (attr.has_s())
      kind = A::STRING;
    else if (attr.has_t())
      kind = A::TENSOR;
    else if (attr.has_g())
      kind = A::GRAPH;
    else if (attr.has_sparse_tensor())
      kind = A::SPARSE_TENSOR;
    else if (attr.has_tp())
      kind = A::TYPE_PROTO;
    else if (attr.floats_size())
      kind = A::FLOATS;
    else if (attr.ints_size())
      kind = A::INTS;
    else if (attr.strings_size())
      kind = A::STRINGS;
    else if (attr.tensors_size())
      kind = A::TENSORS;
    else if (attr.graphs_size())
      kind = A::GRAPHS;
    else if (attr.sparse_tensors_size())
      kind = A::SPARSE_TENSORS;
    else if (attr.type_protos_size())
      kind = A::TYPE_PROTOS;
  }
  const std::string what = desc + " attribute " + quote(attr.name());
  switch (kind) {
  case A::FLOAT:
    return Attribute(builder.getF32FloatAttr(attr.f()));
  case A::INT:
    return Attribute(builder.getI64IntegerAttr(attr.i()));
  case A::STRING:
    return Attribute(builder.getStringAttr(attr.s()));
  case A::FLOATS: {
    SmallVector<Attribute> list;
    for (float f : attr.floats())
      list.push_back(builder.getF32FloatAttr(f));
    return Attribute(builder.getArrayAttr(list));
  }
  case A::INTS: {
    SmallVector<Attribute> list;
    for (int64_t i : attr.ints())
      list.push_back(builder.getI64IntegerAttr(i));
    return Attribute(builder.getArrayAttr(list));
  }
  case A::STRINGS: {
    SmallVector<Attribute> list;
    for (const std::string &s : attr.strings())
      list.push_back(builder.getStringAttr(s));
    return Attribute(builder.getArrayAttr(list));
  }
  case A::TENSOR: {
    auto value = tensorAttr(attr.t(), what, loc, attr.name());
    if (failed(value))
      return failure();
    return Attribute(*value);
  }
  case A::TENSORS: {
    SmallVector<Attribute> list;
    for (int i = 0, e = attr.tensors_size(); i < e; ++i) {
      auto value =
          tensorAttr(attr.tensors(i), what + " tensor " + std::to_string(i),
                     loc, attr.name());
      if (failed(value))
        return failure();
      list.push_back(*value);
    }
    return Attribute(builder.getArrayAttr(list));
  }
  case A::GRAPH:
  case A::GRAPHS:
    (void)fail(loc, desc + ": graph attributes are not supported");
    return failure();
  case A::SPARSE_TENSOR:
  case A::SPARSE_TENSORS:
    (void)fail(loc, desc + ": sparse tensor attributes are not supported");
    return failure();
  case A::TYPE_PROTO:
  case A::TYPE_PROTOS:
    (void)fail(loc, desc + ": type attributes are not supported");
    return failure();
  default:
    break;
  }
  if (!attr.ref_attr_name().empty())
    (void)fail(loc, what + " refers to a function attribute, which only "
                           "function bodies may do");
  else
    (void)fail(loc, what + " has no value");
  return failure();
}

Value Importer::getNone() {
  if (!none) {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToStart(entry);
    none = onnx::NoneOp::create(builder, fileLoc, builder.getNoneType());
  }
  return none;
}

LogicalResult Importer::importNode(int index) {
  const proto::NodeProto &node = model.graph().node(index);
  Location loc = nodeLoc(index);
  const std::string desc = "node " + quote(nodeDisplayName(node, index)) +
                           " (op " + sanitize(node.op_type()) + ")";
  std::string domain = onnxlib::normalizeDomain(node.domain());
  auto opset = opsets.find(domain);
  if (opset == opsets.end())
    return fail(loc, desc + " uses domain " + quote(node.domain()) +
                         ", which the model's opset_import does not list");

  SmallVector<NamedAttribute> attrs;
  llvm::StringSet<> seen;
  for (const proto::AttributeProto &attr : node.attribute()) {
    if (attr.name().empty())
      return fail(loc, desc + " has an attribute without a name");
    if (!seen.insert(attr.name()).second)
      return fail(loc,
                  desc + " has attribute " + quote(attr.name()) + " twice");
    auto value = nodeAttr(attr, desc, loc);
    if (failed(value))
      return failure();
    attrs.push_back(builder.getNamedAttr(attr.name(), *value));
  }

  SmallVector<Value> inputs;
  for (const std::string &name : node.input()) {
    if (name.empty()) {
      inputs.push_back(getNone());
      continue;
    }
    auto it = values.find(name);
    if (it == values.end())
      return fail(loc, desc + " uses " + quote(name) +
                           " which no earlier node, input or initializer "
                           "defines (dangling input or cycle)");
    inputs.push_back(it->second);
  }

  // ai.onnx.preview.training's Gradient names the tensor it differentiates
  // (attribute `y`) rather than taking it as an input: that value becomes
  // the node's last operand. Its inputs must be the tensors `xs` then `zs`
  // name (Kiln differentiates the graph as it stands, it does not re-run it
  // on other values), and each gradient has its input's type.
  bool isGradient = domain == "ai.onnx.preview.training" && node.op_type() == "Gradient";
  if (isGradient) {
    std::vector<std::string> named;
    const proto::AttributeProto *yAttr = nullptr;
    for (const proto::AttributeProto &attr : node.attribute()) {
      if (attr.name() == "y")
        yAttr = &attr;
      if (attr.name() == "xs" || attr.name() == "zs")
        for (const std::string &n : attr.strings())
          named.push_back(n);
    }
    if (!yAttr || !yAttr->has_s() || yAttr->s().empty())
      return fail(loc, desc + " needs the string attribute 'y', the tensor it "
                              "differentiates");
    std::vector<std::string> given(node.input().begin(), node.input().end());
    if (given != named)
      return fail(loc, desc + ": its inputs must be the tensors its 'xs' and "
                              "'zs' attributes name, in that order");
    auto it = values.find(yAttr->s());
    if (it == values.end())
      return fail(loc, desc + " differentiates " + quote(yAttr->s()) +
                           ", which no earlier node, input or initializer "
                           "defines");
    inputs.push_back(it->second);
  }

  SmallVector<Type> resultTypes;
  for (const std::string &name : node.output()) {
    if (name.empty()) {
      resultTypes.push_back(builder.getNoneType());
      continue;
    }
    if (isGradient && resultTypes.size() < inputs.size() - 1) {
      resultTypes.push_back(inputs[resultTypes.size()].getType());
      continue;
    }
    auto type = valueType(name, loc);
    if (failed(type))
      return failure();
    resultTypes.push_back(*type);
  }

  auto op = onnx::NodeOp::create(
      builder, loc, resultTypes, builder.getStringAttr(node.op_type()),
      builder.getStringAttr(domain), builder.getI64IntegerAttr(opset->second),
      builder.getDictionaryAttr(attrs), inputs);
  for (auto [name, result] : llvm::zip(node.output(), op->getResults()))
    if (!name.empty())
      values[name] = result;
  if (opts.valueNames) {
    SmallVector<Attribute> names;
    for (const std::string &name : node.output())
      names.push_back(builder.getStringAttr(name));
    names.resize(op->getNumResults(), builder.getStringAttr(""));
    op->setAttr("onnx.outputs", builder.getArrayAttr(names));
  }
  return success();
}

OwningOpRef<ModuleOp> Importer::run() {
  ctx.loadDialect<onnx::ONNXDialect, func::FuncDialect>();
  const proto::GraphProto &graph = model.graph();

  for (const auto &imp : model.opset_import())
    opsets[onnxlib::normalizeDomain(imp.domain())] = imp.version();
  auto defaultOpset = opsets.find("");

  // Shape inference results: value_info, then the declared outputs, inputs.
  for (const auto &vi : graph.value_info())
    if (vi.has_type())
      typeInfo[vi.name()] = &vi.type();
  for (const auto &vi : graph.output())
    if (vi.has_type())
      typeInfo[vi.name()] = &vi.type();

  // Function arguments: graph inputs that are not initializers, then the
  // floating-point initializers (parameters).
  llvm::StringSet<> initNames;
  for (const auto &init : graph.initializer())
    initNames.insert(init.name());
  SmallVector<Type> argTypes;
  SmallVector<std::string> argNames;
  SmallVector<bool> argIsParam;
  std::vector<std::pair<const proto::ValueInfoProto *, proto::TensorProto>> bound;
  for (const auto &input : graph.input()) {
    if (initNames.contains(input.name()))
      continue;
    auto b = opts.boundInputs.find(input.name());
    if (b != opts.boundInputs.end()) {
      proto::TensorProto t;
      if (!t.ParseFromString(b->second)) {
        (void)fail(fileLoc, "the value bound to input " + quote(input.name()) +
                                " is not a TensorProto");
        return {};
      }
      int64_t numel = 0;
      bool scalar = rt::checkedNumel(t.dims(), 1, numel) && numel <= 1;
      if (isFloatingDataType(t.data_type()) && !scalar) {
        (void)fail(fileLoc, "input " + quote(input.name()) +
                                " is a floating-point tensor; only integer and "
                                "boolean inputs and floating scalars can be "
                                "bound to a value");
        return {};
      }
      t.set_name(input.name());
      bound.push_back({&input, std::move(t)});
      continue;
    }
    auto type = inputType(input);
    if (failed(type))
      return {};
    argTypes.push_back(*type);
    argNames.push_back(input.name());
    argIsParam.push_back(false);
  }
  // A value bound to a name the graph does not take as an input would be
  // silently ignored; refuse it, listing the inputs there are.
  for (const auto &b : opts.boundInputs) {
    std::vector<std::string> names;
    bool found = false;
    for (const auto &input : graph.input()) {
      if (initNames.contains(input.name()))
        continue;
      found |= input.name() == b.first;
      names.push_back(input.name());
    }
    if (!found) {
      (void)fail(fileLoc, "a value is bound to input " + quote(b.first) +
                              ", which the model does not have (inputs: " +
                              (names.empty() ? std::string("none")
                                             : llvm::join(names, ", ")) +
                              ")");
      return {};
    }
  }
  SmallVector<const proto::TensorProto *> constants;
  for (const auto &init : graph.initializer()) {
    if (!isFloatingDataType(init.data_type())) {
      constants.push_back(&init);
      continue;
    }
    auto type = paramType(init);
    if (failed(type))
      return {};
    argTypes.push_back(*type);
    argNames.push_back(init.name());
    argIsParam.push_back(true);
  }

  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  ModuleOp m = *module;
  // Absent for a model that imports only other domains (e.g. the training
  // operators of ai.onnx.preview.training).
  if (defaultOpset != opsets.end())
    m->setAttr("onnx.opset", builder.getI64IntegerAttr(defaultOpset->second));
  llvm::SmallString<256> absPath(path);
  (void)llvm::sys::fs::make_absolute(absPath);
  llvm::sys::path::remove_dots(absPath, /*remove_dot_dot=*/true);
  m->setAttr(kiln::KilnDialect::getWeightsAttrName(),
             builder.getStringAttr(absPath));
  std::string producer = model.producer_name();
  if (!model.producer_version().empty())
    producer += (producer.empty() ? "" : " ") + model.producer_version();
  if (!producer.empty())
    m->setAttr("onnx.producer", builder.getStringAttr(producer));

  builder.setInsertionPointToEnd(m.getBody());
  auto func = func::FuncOp::create(builder, fileLoc, kiln::kForwardFuncName,
                                   builder.getFunctionType(argTypes, {}));
  entry = func.addEntryBlock();
  for (unsigned i = 0, e = argTypes.size(); i < e; ++i) {
    BlockArgument arg = entry->getArgument(i);
    arg.setLoc(nameLoc(argNames[i]));
    func.setArgAttr(i, "onnx.name", builder.getStringAttr(argNames[i]));
    if (argIsParam[i])
      func.setArgAttr(i, kiln::KilnDialect::getParamAttrName(),
                      builder.getUnitAttr());
    values[argNames[i]] = arg;
  }
  builder.setInsertionPointToEnd(entry);

  // Bound inputs are constants too, of the type the model declares.
  for (auto &[decl, t] : bound) {
    const std::string &name = decl->name();
    Location loc = nameLoc(name);
    auto value = tensorAttr(t, "the value bound to input " + quote(name), loc, name);
    if (failed(value))
      return {};
    auto declared = inputType(*decl);
    if (failed(declared))
      return {};
    auto want = dyn_cast<RankedTensorType>(*declared);
    auto got = cast<ShapedType>(value->getType());
    bool fits = want && want.getElementType() == got.getElementType() &&
                want.getRank() == got.getRank();
    for (int64_t d = 0; fits && d < want.getRank(); ++d)
      fits = want.isDynamicDim(d) || want.getDimSize(d) == got.getDimSize(d);
    if (!fits) {
      (void)fail(loc, "the value bound to input " + quote(name) + " does not have its type");
      return {};
    }
    values[name] = onnx::ConstantOp::create(builder, loc, value->getType(), *value).getResult();
  }

  // Non-floating initializers are constants.
  for (const proto::TensorProto *init : constants) {
    Location loc = nameLoc(init->name());
    auto value = tensorAttr(*init, "initializer " + quote(init->name()), loc,
                            init->name());
    if (failed(value))
      return {};
    values[init->name()] =
        onnx::ConstantOp::create(builder, loc, value->getType(), *value)
            .getResult();
  }

  for (int i = 0, e = graph.node_size(); i < e; ++i)
    if (failed(importNode(i)))
      return {};

  SmallVector<Value> results;
  SmallVector<Type> resultTypes;
  for (const auto &output : graph.output()) {
    auto it = values.find(output.name());
    if (output.name().empty() || it == values.end()) {
      (void)fail(fileLoc, "graph output " + quote(output.name()) +
                              " is not produced by any node, input or "
                              "initializer");
      return {};
    }
    results.push_back(it->second);
    resultTypes.push_back(it->second.getType());
  }
  func::ReturnOp::create(builder, fileLoc, results);
  func.setFunctionType(builder.getFunctionType(argTypes, resultTypes));
  for (unsigned i = 0, e = results.size(); i < e; ++i)
    func.setResultAttr(i, "onnx.name",
                       builder.getStringAttr(graph.output(i).name()));
  return module;
}

OwningOpRef<ModuleOp> finishImport(bool loaded, const proto::ModelProto &model,
                                   const onnxlib::LoadError &err,
                                   llvm::StringRef path, MLIRContext &ctx,
                                   const ImportOptions &opts) {
  if (!loaded) {
    Location loc = FileLineColLoc::get(&ctx, path, 0, 0);
    if (err.nodeIndex >= 0 && model.has_graph() &&
        err.nodeIndex < model.graph().node_size())
      loc = NameLoc::get(
          StringAttr::get(&ctx,
                          nodeDisplayName(model.graph().node(err.nodeIndex),
                                          err.nodeIndex)),
          FileLineColLoc::get(&ctx, path,
                              static_cast<unsigned>(err.nodeIndex) + 1, 0));
    emitError(loc) << err.message;
    return {};
  }
  return Importer(ctx, path, model, opts).run();
}

onnxlib::LoadOptions loadOptions(const ImportOptions &opts) {
  onnxlib::LoadOptions options;
  options.dimValues = opts.dimValues;
  options.batchSize = opts.batchSize;
  options.overrideBatch = opts.overrideBatch;
  return options;
}

} // namespace

OwningOpRef<ModuleOp> importONNX(llvm::StringRef path, MLIRContext &ctx,
                                 const ImportOptions &opts) {
  proto::ModelProto model;
  onnxlib::LoadError err;
  bool loaded = onnxlib::loadModel(path.str(), loadOptions(opts), model, err);
  return finishImport(loaded, model, err, path, ctx, opts);
}

OwningOpRef<ModuleOp> importONNXFromBuffer(llvm::StringRef bytes,
                                           llvm::StringRef path,
                                           MLIRContext &ctx,
                                           const ImportOptions &opts) {
  proto::ModelProto model;
  onnxlib::LoadError err;
  bool loaded = onnxlib::loadModelFromBuffer(bytes.data(), bytes.size(),
                                             path.str(), parentDir(path),
                                             loadOptions(opts), model, err);
  return finishImport(loaded, model, err, path, ctx, opts);
}

void registerONNXImportTranslation() {
  static llvm::cl::list<std::string> dimOption(
      "dim",
      llvm::cl::desc("--import-onnx: size of a symbolic dimension, NAME=N "
                     "(repeatable or comma-separated)"),
      llvm::cl::value_desc("name=N"), llvm::cl::CommaSeparated);
  static llvm::cl::opt<int64_t> batchSizeOption(
      "batch-size",
      llvm::cl::desc("--import-onnx: size of dimension 0 of every graph "
                     "input whose dimension 0 is symbolic"),
      llvm::cl::value_desc("N"), llvm::cl::init(0));

  static TranslateToMLIRRegistration registration(
      "import-onnx", "Import an ONNX model into the onnx dialect",
      [](const std::shared_ptr<llvm::SourceMgr> &sourceMgr,
         MLIRContext *ctx) -> OwningOpRef<Operation *> {
        const llvm::MemoryBuffer *buffer =
            sourceMgr->getMemoryBuffer(sourceMgr->getMainFileID());
        llvm::StringRef path = buffer->getBufferIdentifier();
        Location loc = FileLineColLoc::get(ctx, path, 0, 0);
        if (path == "<stdin>" || path == "-") {
          emitError(loc) << "the ONNX importer needs the model's file path "
                            "(its folder holds external data and it is "
                            "recorded in kiln.weights); do not pipe it in";
          return {};
        }
        ImportOptions opts;
        for (const std::string &dim : dimOption) {
          size_t eq = dim.rfind('=');
          long long value = 0;
          if (eq == std::string::npos || eq == 0 ||
              llvm::StringRef(dim).substr(eq + 1).getAsInteger(10, value) ||
              value <= 0) {
            emitError(loc) << "invalid --dim " << onnxlib::quote(dim)
                           << ": expected NAME=N with N a positive integer";
            return {};
          }
          opts.dimValues[dim.substr(0, eq)] = value;
        }
        if (batchSizeOption < 0) {
          emitError(loc) << "invalid --batch-size "
                         << std::to_string(batchSizeOption)
                         << ": expected a positive integer";
          return {};
        }
        opts.batchSize = batchSizeOption;
        OwningOpRef<ModuleOp> module =
            importONNXFromBuffer(buffer->getBuffer(), path, *ctx, opts);
        return OwningOpRef<Operation *>(module.release().getOperation());
      },
      [](DialectRegistry &registry) {
        registry.insert<onnx::ONNXDialect, func::FuncDialect>();
      });
}

} // namespace kiln

bool kiln::onnxGraphInputNames(const std::string &path,
                               std::vector<std::string> &names, std::string &err) {
  std::string bytes;
  if (!rt::readRegularFile(path, bytes, err, INT_MAX))
    return false;
  ::onnx::ModelProto model;
  if (!model.ParseFromArray(bytes.data(), (int)bytes.size())) {
    err = path + " is not a valid ONNX model";
    return false;
  }
  llvm::StringSet<> inits;
  for (const auto &init : model.graph().initializer())
    inits.insert(init.name());
  names.clear();
  for (const auto &input : model.graph().input())
    if (!inits.contains(input.name()))
      names.push_back(input.name());
  return true;
}
