//===- ExportPlan.cpp - krt to the runtime's plan format --------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "kiln/Target/Plan/ExportPlan.h"

#include "kiln/Dialect/KRT/IR/KRTOps.h"
#include "kiln/Dialect/Kiln/IR/KilnAttributes.h"
#include "kiln/InitAllDialects.h"
#include "kiln/Target/ONNX/Import.h"
#include "kiln/Target/Plan/PlanDType.h"
#include "kiln/Support/TensorSize.h"
#include "kiln/runtime/PlanFile.h"
#include "kiln/runtime/KernelManifest.h"
#include "kiln/runtime/SliceTensor.h"

#include <cstring>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/JSON.h"

#include <cmath>
#include <cstring>

using namespace mlir;
using namespace kiln;
namespace json = llvm::json;

namespace {

json::Array shapeOf(MemRefType t) {
  json::Array a;
  for (int64_t d : t.getShape())
    a.push_back(d);
  return a;
}

/// A float attribute as JSON: non-finite values as strings.
json::Value floatValue(double d) {
  if (std::isnan(d))
    return "nan";
  if (std::isinf(d))
    return d > 0 ? "inf" : "-inf";
  return d;
}

FailureOr<json::Value> attrValue(Attribute a) {
  if (auto b = dyn_cast<BoolAttr>(a))
    return json::Value(b.getValue());
  if (auto i = dyn_cast<IntegerAttr>(a))
    return json::Value(i.getValue().getSExtValue());
  if (auto f = dyn_cast<FloatAttr>(a))
    return floatValue(f.getValueAsDouble());
  if (auto s = dyn_cast<StringAttr>(a))
    return json::Value(s.getValue().str());
  if (auto d = dyn_cast<DenseI64ArrayAttr>(a)) {
    json::Array arr;
    for (int64_t v : d.asArrayRef())
      arr.push_back(v);
    return json::Value(std::move(arr));
  }
  if (auto d = dyn_cast<DenseI32ArrayAttr>(a)) {
    json::Array arr;
    for (int32_t v : d.asArrayRef())
      arr.push_back(v);
    return json::Value(std::move(arr));
  }
  if (auto d = dyn_cast<DenseF32ArrayAttr>(a)) {
    json::Array arr;
    for (float v : d.asArrayRef())
      arr.push_back(floatValue(v));
    return json::Value(std::move(arr));
  }
  if (auto d = dyn_cast<DenseF64ArrayAttr>(a)) {
    json::Array arr;
    for (double v : d.asArrayRef())
      arr.push_back(floatValue(v));
    return json::Value(std::move(arr));
  }
  if (auto arr = dyn_cast<ArrayAttr>(a)) {
    json::Array out;
    for (Attribute e : arr) {
      auto v = attrValue(e);
      if (failed(v))
        return failure();
      out.push_back(std::move(*v));
    }
    return json::Value(std::move(out));
  }
  return failure();
}

std::string locString(Location loc);

/// The row-major bytes of a constant (i1 as one byte per element), at most
/// kMaxPlanConstantBytes of them.
LogicalResult constantBytes(krt::ConstantOp op, std::string &out) {
  auto type = op.getType();
  int64_t n = type.getNumElements();
  int64_t size = krt::bufferBytes(type); // verified: checked, <= 2^60
  if (size > kMaxPlanConstantBytes) {
    // A constant folded from several nodes has a fused location, which the
    // drivers do not print: name its nodes here.
    std::string at =
        isa<NameLoc>(op.getLoc()) ? "" : locString(op.getLoc());
    return op.emitError() << "constant " << tensorTypeText(type)
                          << (at.empty() ? "" : " (from " + at + ")")
                          << " is " << byteSizeText(double(size))
                          << "; the plan stores each constant's bytes and "
                             "holds at most "
                          << byteSizeText(double(kMaxPlanConstantBytes))
                          << " for one";
  }
  Attribute value = op.getValue();
  if (auto dense = dyn_cast<DenseElementsAttr>(value)) {
    if (type.getElementType().isInteger(1)) {
      out.reserve(n);
      for (bool b : dense.getValues<bool>())
        out.push_back(b ? 1 : 0);
      return success();
    }
    ArrayRef<char> raw = dense.getRawData();
    if (dense.isSplat()) {
      int64_t elem = size / std::max<int64_t>(n, 1);
      if ((int64_t)raw.size() < elem)
        return op.emitOpError() << "splat constant has too few bytes";
      out.reserve(size);
      for (int64_t i = 0; i < n; ++i)
        out.append(raw.data(), elem);
      return success();
    }
    if ((int64_t)raw.size() != size)
      return op.emitOpError() << "constant has " << raw.size()
                              << " bytes, its type needs " << size;
    out.assign(raw.data(), raw.size());
    return success();
  }
  if (auto res = dyn_cast<DenseResourceElementsAttr>(value)) {
    AsmResourceBlob *blob = res.getRawHandle().getBlob();
    if (!blob)
      return op.emitOpError() << "constant resource '"
                              << res.getRawHandle().getKey()
                              << "' has no data";
    ArrayRef<char> data = blob->getData();
    if ((int64_t)data.size() != size)
      return op.emitOpError() << "constant resource has " << data.size()
                              << " bytes, its type needs " << size;
    out.assign(data.data(), data.size());
    return success();
  }
  return op.emitOpError() << "constant of kind " << value
                          << " cannot be written to a plan";
}

/// A location for messages: the ONNX node name, or file:line:col.
std::string locString(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().getValue().str();
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return (file.getFilename().getValue() + ":" + llvm::Twine(file.getLine()) +
            ":" + llvm::Twine(file.getColumn()))
        .str();
  if (auto fused = dyn_cast<FusedLoc>(loc)) {
    std::string out;
    for (Location part : fused.getLocations()) {
      std::string s = locString(part);
      if (!s.empty())
        out += (out.empty() ? "" : ", ") + s;
    }
    return out;
  }
  if (auto callsite = dyn_cast<CallSiteLoc>(loc))
    return locString(callsite.getCallee());
  return "";
}

/// Whether `a` is an attribute of manifest type `t` (what attrValue writes
/// for it is what the runtime's plan loader accepts for `t`).
bool hasManifestType(Attribute a, manifest::AttrType t) {
  switch (t) {
  case manifest::AttrType::Bool:
    return isa<BoolAttr>(a);
  case manifest::AttrType::Int:
    return isa<IntegerAttr>(a) && !isa<BoolAttr>(a);
  case manifest::AttrType::Float:
    return isa<FloatAttr>(a);
  case manifest::AttrType::String:
    return isa<StringAttr>(a);
  case manifest::AttrType::IntArray:
    return isa<DenseI64ArrayAttr, DenseI32ArrayAttr>(a);
  case manifest::AttrType::FloatArray:
    return isa<DenseF32ArrayAttr, DenseF64ArrayAttr>(a);
  case manifest::AttrType::StringArray:
    return isa<ArrayAttr>(a) &&
           llvm::all_of(cast<ArrayAttr>(a), [](Attribute e) { return isa<StringAttr>(e); });
  case manifest::AttrType::Elements:
    return false;
  }
  return false;
}

/// Checks a launch against the kernel manifest before it becomes a step: the
/// kernel is declared and launched, its operand and result counts fit, and
/// every parameter is declared with its type and every required one present.
/// A mismatch is the compiler's bug (the lowering emits the op's own
/// attributes), so it is reported as an internal error at the op.
/// A parameter held split (`kiln.sharding`, tensor parallelism) as one
/// block per rank position: `whole` (the value's bytes, row-major) cut into
/// the blocks of `local` (this rank's type), block b being the block at
/// index b of the axes that split it, linearised in order of appearance
/// (the first outermost), as the runtime picks it (Program::setMeshPosition).
/// `axes` receives their names and `blocks` their count (1: not split).
LogicalResult splitIntoBlocks(func::FuncOp func, const std::string &name,
                              ArrayAttr sharding, MemRefType local,
                              const std::string &whole, std::string &out,
                              llvm::json::Array &axes, int64_t &blocks) {
  auto grid = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(
      func, StringAttr::get(func.getContext(), "kiln_mesh"));
  auto names = grid ? grid->getAttrOfType<ArrayAttr>(
                          KilnDialect::getAxisNamesAttrName())
                    : ArrayAttr();
  if (!names)
    return func.emitOpError() << "parameter '" << name
                              << "' is split, but the module has no @kiln_mesh "
                                 "with axis names";
  ArrayRef<int64_t> shape = local.getShape();
  if ((int64_t)sharding.size() != local.getRank())
    return func.emitOpError() << "parameter '" << name << "': its sharding has "
                              << sharding.size() << " dimensions, its type "
                              << local.getRank();
  // Per dimension, its axes' sizes; the order of all axes.
  SmallVector<SmallVector<int64_t>> dimAxes(shape.size());
  SmallVector<int64_t> sizes; // of each axis in order of appearance
  blocks = 1;
  for (auto [d, dim] : llvm::enumerate(sharding))
    for (Attribute a : cast<ArrayAttr>(dim)) {
      int64_t k = -1;
      for (auto [i, n] : llvm::enumerate(names))
        if (n == a)
          k = i;
      if (k < 0)
        return func.emitOpError() << "parameter '" << name << "' is split over "
                                  << a << ", which the mesh does not have";
      dimAxes[d].push_back((int64_t)sizes.size());
      sizes.push_back(grid.getShape()[k]);
      axes.push_back(cast<StringAttr>(a).getValue().str());
      blocks *= grid.getShape()[k];
    }
  int64_t elt = local.getElementTypeBitWidth() / 8, localBytes = elt;
  SmallVector<int64_t> wholeShape(shape);
  for (auto [d, list] : llvm::enumerate(dimAxes))
    for (int64_t k : list)
      wholeShape[d] *= sizes[k];
  for (int64_t n : shape)
    localBytes *= n;
  if ((int64_t)whole.size() != localBytes * blocks)
    return func.emitOpError() << "parameter '" << name << "' has " << whole.size()
                              << " bytes, its " << blocks << " blocks need "
                              << localBytes * blocks;
  out.assign(whole.size(), '\0');
  std::vector<int64_t> localShape(shape.begin(), shape.end()),
      wholeDims(wholeShape.begin(), wholeShape.end());
  SmallVector<int64_t> coord(sizes.size());
  for (int64_t b = 0; b < blocks; ++b) {
    // Block b's coordinate on each axis (the last axis fastest).
    for (int64_t k = (int64_t)sizes.size() - 1, r = b; k >= 0; --k) {
      coord[k] = r % sizes[k];
      r /= sizes[k];
    }
    std::vector<int64_t> offset(shape.size(), 0);
    for (auto [d, list] : llvm::enumerate(dimAxes)) {
      int64_t idx = 0;
      for (int64_t k : list)
        idx = idx * sizes[k] + coord[k];
      offset[d] = idx * shape[d];
    }
    copyTensorBlock(const_cast<char *>(whole.data()), out.data() + b * localBytes,
                    wholeDims, localShape, offset, (size_t)elt, /*toWhole=*/false);
  }
  return success();
}

LogicalResult checkAgainstManifest(krt::LaunchOp l) {
  auto internal = [&]() {
    return l.emitOpError() << "internal error: kernel '" << l.getKernel()
                           << "' ";
  };
  const manifest::Kernel *k = manifest::find(l.getKernel());
  if (!k)
    return internal() << "is not in the kernel manifest (KernelManifest.inc; "
                         "regenerate it after changing the ODS)";
  if (!k->launched)
    return internal() << "is never launched (the manifest's "
                      << k->op << " lowers to another krt op)";
  if (!k->acceptsOperands(l.getIns().size()) ||
      !k->acceptsResults(l.getOuts().size()))
    return internal() << "has " << l.getIns().size() << " inputs and "
                      << l.getOuts().size() << " outputs, which its manifest "
                      << "entry (" << k->numOperands << " operands, "
                      << k->numResults << " results) does not allow";
  DictionaryAttr params = l.getParams();
  for (NamedAttribute na : params) {
    const manifest::Attr *decl = k->attr(na.getName().getValue());
    if (!decl)
      return internal() << "has parameter '" << na.getName().getValue()
                        << "', which the kernel manifest does not declare";
    if (!hasManifestType(na.getValue(), decl->type))
      return internal() << "has parameter '" << na.getName().getValue()
                        << "' = " << na.getValue()
                        << ", the kernel manifest declares "
                        << manifest::typeName(decl->type);
  }
  for (const manifest::Attr *a = k->attrs(), *e = a + k->numAttrs; a != e; ++a)
    if (a->presence != manifest::Presence::Optional && !params.get(a->name))
      return internal() << "lacks parameter '" << a->name
                        << "', which the kernel manifest requires";
  return success();
}

class PlanWriter {
public:
  PlanWriter(func::FuncOp func, const ParamData &params)
      : func(func), params(params) {}
  LogicalResult write(std::string &out);

private:
  func::FuncOp func;
  const ParamData &params;
  llvm::DenseMap<Value, int64_t> ids;
  json::Array values;
  std::string blob;

  int64_t addBlob(llvm::StringRef bytes) {
    while (blob.size() % krt::kArenaAlignment)
      blob.push_back('\0');
    int64_t off = blob.size();
    blob.append(bytes.data(), bytes.size());
    return off;
  }
  FailureOr<json::Object> valueEntry(Value v, Operation *where);
};

FailureOr<json::Object> PlanWriter::valueEntry(Value v, Operation *where) {
  auto type = dyn_cast<MemRefType>(v.getType());
  if (!type)
    return where->emitOpError() << "value of type " << v.getType()
                                << " is not a buffer; run "
                                   "--kiln-lower-to-runtime first";
  std::optional<rt::DType> dt = planDType(type.getElementType());
  if (!dt)
    return where->emitOpError() << "element type " << type.getElementType()
                                << " has no plan dtype";
  json::Object o;
  o["dtype"] = rt::dtypeName(*dt);
  o["shape"] = shapeOf(type);
  return o;
}

LogicalResult PlanWriter::write(std::string &out) {
  Block &body = func.getBody().front();
  auto arena = func->getAttrOfType<IntegerAttr>(
      krt::KRTDialect::getArenaBytesAttrName());
  if (!arena)
    return func.emitOpError() << "has no krt.arena_bytes; run "
                                 "--kiln-assign-buffers first";
  json::Array inputs, outputs, outputNames, steps;

  int64_t inputIndex = 0;
  for (BlockArgument arg : body.getArguments()) {
    auto e = valueEntry(arg, func);
    if (failed(e))
      return failure();
    auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                  "onnx.name");
    std::string argName = name ? name.getValue().str()
                               : "arg" + std::to_string(arg.getArgNumber());
    (*e)["name"] = argName;
    if (isParam(func, arg.getArgNumber())) {
      // Arguments have no verifier: size them here.
      int64_t bytes;
      if (!checkedTypeBytes(cast<MemRefType>(arg.getType()), bytes))
        return func.emitError()
               << tooLargeText("parameter '" + argName + "'",
                               cast<MemRefType>(arg.getType()));
      std::optional<ParamInit> init = getInit(func, arg.getArgNumber());
      auto it = params.find(argName);
      if (init == ParamInit::Zeros) {
        // Optimizer state starts at zero.
        (*e)["data_offset"] = addBlob(std::string(bytes, '\0'));
      } else {
        if (it == params.end())
          return func.emitOpError() << "parameter '" << argName
                                    << "' has no value to write";
        auto whole = func.getArgAttrOfType<DenseI64ArrayAttr>(
            arg.getArgNumber(), KilnDialect::getShardedShapeAttrName());
        auto split = func.getArgAttrOfType<ArrayAttr>(
            arg.getArgNumber(), KilnDialect::getShardingAttrName());
        int64_t blocks = 1;
        std::string data;
        auto grid = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(
            func, StringAttr::get(func.getContext(), "kiln_mesh"));
        if (whole && grid && grid.getShape().size() > 1) {
          // ZeRO-3 over the dp axis of a mesh of several axes: block (s, d)
          // is dp block d of the flattened, zero-padded split block s (the
          // whole value when the parameter is not split otherwise), listed
          // with the split axes first and dp last (Program::setMeshPosition).
          auto names = grid->getAttrOfType<ArrayAttr>(KilnDialect::getAxisNamesAttrName());
          int64_t dpSize = 0;
          for (auto [i, n] : llvm::enumerate(names ? names : ArrayAttr::get(func.getContext(), {})))
            if (cast<StringAttr>(n).getValue() == "dp")
              dpSize = grid.getShape()[i];
          if (dpSize < 1)
            return func.emitOpError() << "parameter '" << argName
                                      << "' is sharded, but @kiln_mesh has no dp axis";
          auto elt = cast<MemRefType>(arg.getType()).getElementType();
          auto local = MemRefType::get(whole.asArrayRef(), elt);
          int64_t localBytes = (int64_t)(elt.getIntOrFloatBitWidth() / 8);
          for (int64_t d : whole.asArrayRef())
            localBytes *= d;
          llvm::json::Array axes;
          std::string splitData = it->second;
          int64_t splitBlocks = 1;
          if (split && failed(splitIntoBlocks(func, argName, split, local, it->second,
                                              splitData, axes, splitBlocks)))
            return failure();
          if (!split && (int64_t)splitData.size() != localBytes)
            return func.emitOpError() << "parameter '" << argName << "' has "
                                      << splitData.size() << " bytes, its shape needs "
                                      << localBytes;
          if (bytes * dpSize < localBytes)
            return func.emitOpError() << "parameter '" << argName << "': " << dpSize
                                      << " blocks of " << bytes << " bytes do not hold "
                                      << localBytes;
          data.assign((size_t)(bytes * dpSize * splitBlocks), '\0');
          for (int64_t sb = 0; sb < splitBlocks; ++sb)
            std::memcpy(data.data() + sb * bytes * dpSize,
                        splitData.data() + sb * localBytes, (size_t)localBytes);
          axes.push_back("dp");
          blocks = splitBlocks * dpSize;
          (*e)["block_axes"] = std::move(axes);
        } else if (whole) {
          // Split over the dp ranks (ZeRO-3): every rank's block of the
          // flattened value, zero-padded; each rank loads its own.
          if (!grid || grid.getShape().size() != 1)
            return func.emitOpError()
                   << "parameter '" << argName
                   << "' is sharded, but the module has no 1-axis @kiln_mesh";
          blocks = grid.getShape()[0];
          if ((int64_t)it->second.size() > bytes * blocks)
            return func.emitOpError()
                   << "parameter '" << argName << "' has " << it->second.size()
                   << " bytes, its type needs " << bytes << " in each of "
                   << blocks << " blocks";
          data = it->second;
          data.resize(bytes * blocks, '\0');
        } else if (split) {
          // Split over mesh axes (tensor parallelism): every rank's block of
          // the value, in the order of `block_axes`; each rank loads its own.
          llvm::json::Array axes;
          if (failed(splitIntoBlocks(func, argName, split,
                                     cast<MemRefType>(arg.getType()), it->second,
                                     data, axes, blocks)))
            return failure();
          if (blocks > 1)
            (*e)["block_axes"] = std::move(axes);
        } else {
          if ((int64_t)it->second.size() != bytes)
            return func.emitOpError() << "parameter '" << argName << "' has "
                                      << it->second.size() << " bytes, its type "
                                      << "needs " << bytes;
          data = it->second;
        }
        (*e)["data_offset"] = addBlob(data);
        if (blocks > 1)
          (*e)["blocks"] = blocks;
        bytes *= blocks;
      }
      (*e)["kind"] = "param";
      (*e)["data_bytes"] = bytes;
      if (std::optional<ParamRole> role = getRole(func, arg.getArgNumber())) {
        llvm::StringRef name = stringifyParamRole(*role);
        if (!rt::isParamRole(std::string_view(name.data(), name.size()))) {
          func.emitError() << "internal error: parameter role '" << name
                           << "' is not one the runtime reads (PlanFile.h "
                              "kParamRoles)";
          return failure();
        }
        (*e)["role"] = name.str();
      }
    } else {
      (*e)["kind"] = "input";
      (*e)["index"] = inputIndex++;
      inputs.push_back((int64_t)values.size());
    }
    ids[arg] = values.size();
    values.push_back(std::move(*e));
  }

  for (Operation &op : body) {
    if (auto c = dyn_cast<krt::ConstantOp>(op)) {
      auto e = valueEntry(c, &op);
      std::string bytes;
      if (failed(e) || failed(constantBytes(c, bytes)))
        return failure();
      (*e)["kind"] = "constant";
      (*e)["data_offset"] = addBlob(bytes);
      (*e)["data_bytes"] = (int64_t)bytes.size();
      ids[c] = values.size();
      values.push_back(std::move(*e));
    } else if (auto a = dyn_cast<krt::AllocOp>(op)) {
      auto e = valueEntry(a, &op);
      if (failed(e))
        return failure();
      if (!a.getOffset())
        return a.emitOpError() << "has no offset; run --kiln-assign-buffers";
      (*e)["kind"] = "arena";
      (*e)["offset"] = *a.getOffset();
      ids[a] = values.size();
      values.push_back(std::move(*e));
    } else if (auto v = dyn_cast<krt::ViewOp>(op)) {
      auto e = valueEntry(v, &op);
      if (failed(e))
        return failure();
      (*e)["kind"] = "view";
      (*e)["source"] = ids.lookup(v.getSource());
      ids[v] = values.size();
      values.push_back(std::move(*e));
    } else if (auto l = dyn_cast<krt::LaunchOp>(op)) {
      if (l.getStream() != 0)
        return l.emitOpError() << "runs on stream " << l.getStream()
                               << "; plan format version 1 has one stream";
      if (failed(checkAgainstManifest(l)))
        return failure();
      json::Object step;
      step["kernel"] = l.getKernel().str();
      json::Array ins, outs;
      for (Value in : l.getIns())
        ins.push_back(ids.lookup(in));
      for (Value o : l.getOuts())
        outs.push_back(ids.lookup(o));
      step["inputs"] = std::move(ins);
      step["outputs"] = std::move(outs);
      json::Object attrs;
      for (NamedAttribute na : l.getParams()) {
        auto v = attrValue(na.getValue());
        if (failed(v))
          return l.emitOpError() << "parameter '" << na.getName().getValue()
                                 << "' of kernel '" << l.getKernel()
                                 << "' cannot be written to a plan: "
                                 << na.getValue();
        attrs[na.getName().getValue()] = std::move(*v);
      }
      step["attrs"] = std::move(attrs);
      step["loc"] = locString(l.getLoc());
      if (std::optional<uint64_t> flops = l.getFlops())
        step["flops"] = (int64_t)*flops;
      steps.push_back(std::move(step));
    } else if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (auto [k, v] : llvm::enumerate(ret.getOperands())) {
        outputs.push_back(ids.lookup(v));
        auto name = func.getResultAttrOfType<StringAttr>(k, "onnx.name");
        outputNames.push_back(name ? name.getValue().str()
                                   : "output_" + std::to_string(k));
      }
    } else {
      return op.emitOpError() << "cannot be written to a plan: format "
                                 "version 1 holds one CPU process (no "
                                 "collectives, streams or events)";
    }
  }

  json::Object header;
  header["format"] = "kiln-plan";
  header["version"] = (int64_t)kPlanFormatVersion;
  header["producer"] = "kiln 0.1";
  header["function"] = func.getSymName().str();
  header["target"] = "cpu";
  header["alignment"] = krt::kArenaAlignment;
  header["arena_bytes"] = arena.getInt();
  header["values"] = std::move(values);
  header["inputs"] = std::move(inputs);
  header["outputs"] = std::move(outputs);
  header["output_names"] = std::move(outputNames);
  header["steps"] = std::move(steps);
  std::string text;
  llvm::raw_string_ostream os(text);
  os << json::Value(std::move(header));

  // The blob's parts are aligned to the arena alignment inside the blob, so
  // the container must start the blob at a multiple of it too.
  static_assert(rt::kPlanBlobAlignment % krt::kArenaAlignment == 0,
                "the container must keep the blob's alignment");
  out = rt::writePlanContainer(text, blob, kPlanFormatVersion);
  return success();
}

} // namespace

LogicalResult kiln::exportPlan(ModuleOp module, llvm::StringRef funcName,
                               const ParamData &params, std::string &out) {
  auto func = module.lookupSymbol<func::FuncOp>(funcName);
  if (!func || func.isExternal())
    return module.emitError() << "no function @" << funcName
                              << " to write as a plan";
  if (!func.getBody().hasOneBlock())
    return func.emitOpError() << "must have one block to be written as a plan";
  return PlanWriter(func, params).write(out);
}

static llvm::cl::opt<std::string>
    planFunction("plan-function", llvm::cl::desc("Function --export-plan writes"),
                 llvm::cl::init(kForwardFuncName.str()));

void kiln::registerPlanExportTranslation() {
  TranslateFromMLIRRegistration reg(
      "export-plan",
      "Write a krt function (buffers assigned) as a runtime plan",
      [](Operation *op, llvm::raw_ostream &os) -> LogicalResult {
        auto module = dyn_cast<ModuleOp>(op);
        if (!module)
          return op->emitError() << "--export-plan needs a module";
        ParamData params;
        auto weights = module->getAttrOfType<StringAttr>(
            KilnDialect::getWeightsAttrName());
        auto func = module.lookupSymbol<func::FuncOp>(planFunction);
        bool hasParams = false;
        if (func)
          for (unsigned i = 0; i < func.getNumArguments(); ++i)
            hasParams |= isParam(func, i);
        if (hasParams) {
          if (!weights)
            return module.emitError() << "module has parameters but no "
                                         "kiln.weights naming their model";
          // Re-import the model to read its parameter values.
          MLIRContext ctx;
          DialectRegistry registry;
          registerAllDialects(registry);
          ctx.appendDialectRegistry(registry);
          ImportOptions opts;
          opts.paramData = &params;
          ScopedDiagnosticHandler quiet(&ctx, [](Diagnostic &) {
            return success();
          });
          if (!importONNX(weights.getValue(), ctx, opts))
            return module.emitError() << "cannot read the parameters from '"
                                      << weights.getValue() << "'";
        }
        std::string plan;
        if (failed(exportPlan(module, planFunction, params, plan)))
          return failure();
        os.write(plan.data(), plan.size());
        return success();
      },
      [](DialectRegistry &registry) { registerAllDialects(registry); });
}
