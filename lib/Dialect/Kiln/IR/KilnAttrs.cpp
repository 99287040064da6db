//===- KilnAttrs.cpp - the kiln.* attributes' verifier ----------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The dialect verifier of the discardable `kiln.*` attributes (their names
// are KilnDialect's constants, KilnDialect.td), the enums of KilnEnums.td and
// their command-line parser.
//
// The training passes, the lowering and the plan writer hand these
// attributes to each other; the plan writer copies `kiln.role` into the plan,
// where the runtime refuses an unknown role only at load time. Verifying them
// here turns a typo in hand-written IR or a producer bug into a one-line
// error naming the attribute, at the pass that made it, and lets the typed
// accessors of KilnAttributes.h trust what they read.
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Kiln/IR/KilnAttributes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace kiln;

#include "kiln/Dialect/Kiln/IR/KilnEnums.cpp.inc"

namespace {

/// "a, b or c", for error messages.
std::string orList(ArrayRef<StringRef> names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0)
      out += i + 1 == names.size() ? " or " : ", ";
    out += names[i].str();
  }
  return out;
}

/// The names enum E accepts. The cases of every KilnEnums.td enum are
/// numbered from 0 without gaps.
template <typename E> std::string enumNames() {
  SmallVector<StringRef> names;
  for (uint32_t i = 0;; ++i) {
    StringRef s = stringifyEnum(static_cast<E>(i));
    if (s.empty())
      break;
    names.push_back(s);
  }
  return orList(names);
}

/// Checks that `attr` is a string naming a case of E.
template <typename E>
LogicalResult verifyEnumString(Operation *op, NamedAttribute attr) {
  auto s = dyn_cast<StringAttr>(attr.getValue());
  if (s && symbolizeEnum<E>(s.getValue()))
    return success();
  return op->emitError() << attr.getName().getValue() << " must be one of "
                         << enumNames<E>() << ", got " << attr.getValue();
}

LogicalResult verifyUnit(Operation *op, NamedAttribute attr) {
  if (isa<UnitAttr>(attr.getValue()))
    return success();
  return op->emitError() << attr.getName().getValue()
                         << " is a unit attribute, got " << attr.getValue();
}

/// `kiln.grad_of` / `kiln.update` on a result: an integer naming an argument
/// of the same function that is a parameter.
LogicalResult verifyArgIndex(Operation *op, NamedAttribute attr) {
  auto f = dyn_cast<FunctionOpInterface>(op);
  auto i = dyn_cast<IntegerAttr>(attr.getValue());
  if (!i || !i.getType().isSignlessInteger(64))
    return op->emitError() << attr.getName().getValue()
                           << " must be an i64 argument number, got "
                           << attr.getValue();
  if (!f)
    return op->emitError() << attr.getName().getValue()
                           << " belongs on a function result";
  int64_t n = f.getNumArguments();
  if (i.getInt() < 0 || i.getInt() >= n)
    return op->emitError() << attr.getName().getValue() << " = " << i.getInt()
                           << " is not an argument number (the function has "
                           << n << " arguments)";
  if (!isParam(f, i.getInt()))
    return op->emitError() << attr.getName().getValue() << " = " << i.getInt()
                           << " names an argument that is not a "
                           << KilnDialect::getParamAttrName();
  return success();
}

/// A sharding (`kiln.sharding`) of a value of type `t`: one array of
/// non-empty axis names per dimension, no axis twice. The axes' existence
/// and sizes are the sharding passes' to check (they know the mesh).
LogicalResult verifySharding(Operation *op, StringRef name, Attribute a,
                             Type t) {
  auto dims = dyn_cast<ArrayAttr>(a);
  // A tensor's, or (after bufferization) the memref's that holds it.
  auto st = dyn_cast<ShapedType>(t);
  int64_t rank = st && st.hasRank() ? st.getRank() : 0;
  if (!dims || (int64_t)dims.size() != rank)
    return op->emitError() << name << " must give one array of mesh-axis "
                           << "names per dimension (" << rank << " for " << t
                           << "), got " << a;
  llvm::StringSet<> seen;
  for (Attribute d : dims) {
    auto axes = dyn_cast<ArrayAttr>(d);
    if (!axes)
      return op->emitError() << name << ": " << d
                             << " is not an array of mesh-axis names";
    for (Attribute x : axes) {
      auto s = dyn_cast<StringAttr>(x);
      if (!s || s.getValue().empty())
        return op->emitError() << name << ": " << x << " is not a mesh-axis name";
      if (!seen.insert(s.getValue()).second)
        return op->emitError() << name << " shards over mesh axis '"
                               << s.getValue() << "' twice";
    }
  }
  return success();
}

/// A module attribute holding an array of records (dictionaries), each of
/// which `valid` accepts; the error says what `each` needs.
LogicalResult verifyModuleRecords(Operation *op, NamedAttribute attr,
                                  llvm::function_ref<bool(DictionaryAttr)> valid,
                                  StringRef each) {
  StringRef name = attr.getName().getValue();
  if (!isa<ModuleOp>(op))
    return op->emitError() << name << " belongs on a module";
  auto all = dyn_cast<ArrayAttr>(attr.getValue());
  if (!all)
    return op->emitError() << name << " must be an array of dictionaries";
  for (Attribute a : all) {
    auto d = dyn_cast<DictionaryAttr>(a);
    if (!d || !valid(d))
      return op->emitError() << name << ": " << each << ", got " << a;
  }
  return success();
}

} // namespace

LogicalResult KilnDialect::verifyRegionArgAttribute(Operation *op,
                                                    unsigned regionIndex,
                                                    unsigned argIndex,
                                                    NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == getParamAttrName() || name == getLabelsAttrName())
    return verifyUnit(op, attr);
  if (name == getShardingAttrName()) {
    auto f = dyn_cast<FunctionOpInterface>(op);
    if (!f || regionIndex != 0)
      return op->emitError() << name << " belongs on a function argument";
    // ZeRO over dp of a split parameter's state: the argument is a dp
    // block of the flattened split block, whose shape kiln.sharded_shape
    // keeps; the sharding describes that block.
    Type t = f.getArgumentTypes()[argIndex];
    if (auto zs = f.getArgAttrOfType<DenseI64ArrayAttr>(argIndex, getShardedShapeAttrName()))
      if (auto st = dyn_cast<ShapedType>(t))
        t = RankedTensorType::get(zs.asArrayRef(), st.getElementType());
    return verifySharding(op, name, attr.getValue(), t);
  }
  if (name == getModelShapeAttrName() || name == getShardedShapeAttrName()) {
    // A whole parameter's shape: ZeRO's (kiln.sharded_shape), or the
    // model's shape of a parameter held as a view (kiln.model_shape: the
    // same elements as its type, unless partitioning split it).
    auto shape = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    auto f = dyn_cast<FunctionOpInterface>(op);
    if (!shape || llvm::any_of(shape.asArrayRef(), [](int64_t d) { return d < 0; }))
      return op->emitError() << name << " must be an array<i64> of "
                             << "non-negative sizes, got " << attr.getValue();
    if (!f || regionIndex != 0 || !isParam(f, argIndex))
      return op->emitError() << name << " on argument " << argIndex
                             << ", which is not a " << getParamAttrName();
    if (name == getShardedShapeAttrName())
      return success();
    auto t = dyn_cast<ShapedType>(f.getArgumentTypes()[argIndex]);
    int64_t n = 1;
    for (int64_t d : shape.asArrayRef())
      n *= d;
    if (t && t.hasStaticShape() &&
        !f.getArgAttr(argIndex, getShardingAttrName()) && t.getNumElements() != n)
      return op->emitError() << name << " " << attr.getValue() << " has " << n
                             << " elements, argument " << argIndex << " " << t;
    return success();
  }
  if (name == getRoleAttrName() || name == getInitAttrName()) {
    if (failed(name == getRoleAttrName()
                   ? verifyEnumString<ParamRole>(op, attr)
                   : verifyEnumString<ParamInit>(op, attr)))
      return failure();
    // Only a parameter has a role or an initialiser: the plan writer reads
    // them on parameters alone.
    auto f = dyn_cast<FunctionOpInterface>(op);
    if (!f || regionIndex != 0 || !isParam(f, argIndex))
      return op->emitError() << name << " on argument " << argIndex
                             << ", which is not a " << getParamAttrName();
    return success();
  }
  return op->emitError() << "unknown kiln argument attribute '" << name << "'";
}

LogicalResult KilnDialect::verifyRegionResultAttribute(Operation *op,
                                                       unsigned regionIndex,
                                                       unsigned resultIndex,
                                                       NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == getLossAttrName())
    return verifyUnit(op, attr);
  if (name == getGradOfAttrName() || name == getUpdateAttrName())
    return verifyArgIndex(op, attr);
  if (name == getShardingAttrName()) {
    auto f = dyn_cast<FunctionOpInterface>(op);
    if (!f)
      return op->emitError() << name << " belongs on a function result";
    return verifySharding(op, name, attr.getValue(),
                          f.getResultTypes()[resultIndex]);
  }
  return op->emitError() << "unknown kiln result attribute '" << name << "'";
}

LogicalResult KilnDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == getOptimizerAttrName()) {
    if (!isa<FunctionOpInterface>(op))
      return op->emitError() << name << " belongs on a function";
    return verifyEnumString<OptimizerKind>(op, attr);
  }
  if (name == getWeightsAttrName()) {
    if (!isa<ModuleOp>(op))
      return op->emitError() << name << " belongs on a module";
    if (!isa<StringAttr>(attr.getValue()))
      return op->emitError() << name << " must be a string (the model's path), "
                             << "got " << attr.getValue();
    return success();
  }
  if (name == getChannelClassesAttrName()) {
    if (!isa<ModuleOp>(op))
      return op->emitError() << name << " belongs on a module";
    auto all = dyn_cast<ArrayAttr>(attr.getValue());
    if (!all)
      return op->emitError() << name << " must be an array of dictionaries";
    for (auto [index, a] : llvm::enumerate(all)) {
      auto d = dyn_cast<DictionaryAttr>(a);
      auto params = d ? d.getAs<ArrayAttr>("params") : ArrayAttr();
      // A concat's result: its parts (earlier classes, -1: whole) side by
      // side, no producers of its own.
      if (auto parts = d ? d.getAs<DenseI64ArrayAttr>("parts") : DenseI64ArrayAttr()) {
        auto sizes = d.getAs<DenseI64ArrayAttr>("part_channels");
        auto axes = d.getAs<DenseI64ArrayAttr>("axes");
        auto blocks = d.getAs<DenseI64ArrayAttr>("blocks");
        auto channels = d.getAs<IntegerAttr>("channels");
        bool ok = sizes && sizes.size() == parts.size() && params && axes && blocks &&
                  channels && d.getAs<IntegerAttr>("keep") && d.getAs<IntegerAttr>("at") &&
                  (size_t)axes.size() == params.size() &&
                  (size_t)blocks.size() == params.size();
        int64_t sum = 0;
        for (auto [p, n] : llvm::zip(parts.asArrayRef(), sizes.asArrayRef())) {
          ok &= p >= -1 && p < (int64_t)index && n >= 1;
          if (p >= 0)
            ok &= !cast<DictionaryAttr>(all[p]).contains("parts");
          sum += n;
        }
        if (!ok || sum != channels.getInt())
          return op->emitError() << name << ": malformed concat class " << a;
        continue;
      }
      auto axes = d ? d.getAs<DenseI64ArrayAttr>("axes") : DenseI64ArrayAttr();
      auto blocks = d ? d.getAs<DenseI64ArrayAttr>("blocks") : DenseI64ArrayAttr();
      auto prods = d ? d.getAs<ArrayAttr>("producers") : ArrayAttr();
      auto pAxes = d ? d.getAs<DenseI64ArrayAttr>("producer_axes") : DenseI64ArrayAttr();
      auto pBlocks = d ? d.getAs<DenseI64ArrayAttr>("producer_blocks") : DenseI64ArrayAttr();
      if (!d || !d.getAs<IntegerAttr>("channels") || !d.getAs<IntegerAttr>("keep") ||
          !d.getAs<IntegerAttr>("at") ||
          !params || !axes || !blocks || !prods || !pAxes || !pBlocks ||
          (size_t)axes.size() != params.size() || (size_t)blocks.size() != params.size() ||
          (size_t)pAxes.size() != prods.size() || (size_t)pBlocks.size() != prods.size())
        return op->emitError() << name << ": malformed class " << a;
    }
    return success();
  }
  if (name == getTpBlocksAttrName())
    return verifyModuleRecords(
        op, attr,
        [](DictionaryAttr d) {
          auto kind = d.getAs<StringAttr>("kind");
          return kind &&
                 llvm::is_contained({"attention", "mlp", "lm_head", "embedding"},
                                    kind.getValue()) &&
                 d.getAs<ArrayAttr>("params");
        },
        "each block needs kind (attention, mlp, lm_head or embedding) and params");
  if (name == getEpLayersAttrName())
    return verifyModuleRecords(
        op, attr,
        [](DictionaryAttr d) {
          return d.getAs<IntegerAttr>("experts") && d.getAs<ArrayAttr>("params");
        },
        "each layer needs experts (i64) and params");
  if (name == getQatSitesAttrName())
    return verifyModuleRecords(
        op, attr,
        [](DictionaryAttr d) {
          return d.getAs<IntegerAttr>("node") && d.getAs<IntegerAttr>("axis") &&
                 d.getAs<StringAttr>("name") && d.getAs<StringAttr>("weight") &&
                 d.getAs<StringAttr>("observer");
        },
        "each site needs node and axis (i64) and name, weight and observer (strings)");
  if (name == getOnnxNamesAttrName()) {
    auto all = dyn_cast<ArrayAttr>(attr.getValue());
    if (!all || all.size() != op->getNumResults() ||
        !llvm::all_of(all, llvm::IsaPred<StringAttr>))
      return op->emitError() << name << " must give one string per result ("
                             << op->getNumResults() << "), got " << attr.getValue();
    return success();
  }
  if (name == getShardingsAttrName()) {
    auto all = dyn_cast<ArrayAttr>(attr.getValue());
    if (!all || all.size() != op->getNumResults())
      return op->emitError() << name << " must give one sharding per result ("
                             << op->getNumResults() << "), got "
                             << attr.getValue();
    for (auto [a, t] : llvm::zip(all, op->getResultTypes()))
      if (failed(verifySharding(op, name, a, t)))
        return failure();
    return success();
  }
  if (name == getCompressionAttrName()) {
    auto ar = dyn_cast<shard::AllReduceOp>(op);
    if (!ar)
      return op->emitError() << name << " belongs on a shard.all_reduce";
    auto v = dyn_cast<StringAttr>(attr.getValue());
    if (!v || (v.getValue() != "bf16" && v.getValue() != "fp16" &&
               v.getValue() != "int8"))
      return op->emitError() << name << " must be \"bf16\", \"fp16\" or "
                             << "\"int8\", got " << attr.getValue();
    auto t = cast<ShapedType>(ar.getType());
    if (!t.getElementType().isF32() ||
        (ar.getReduction() != shard::ReductionKind::Sum &&
         ar.getReduction() != shard::ReductionKind::Average))
      return op->emitError() << name << " compresses sums and averages of "
                             << "f32 only";
    return success();
  }
  if (name == getZeroGatherAttrName()) {
    if (!isa<shard::AllGatherOp>(op))
      return op->emitError() << name << " belongs on a shard.all_gather";
    if (!isa<IntegerAttr>(attr.getValue()))
      return op->emitError() << name << " must be an integer, got "
                             << attr.getValue();
    return success();
  }
  if (name == getStageAttrName() || name == getMicrobatchAttrName()) {
    auto i = dyn_cast<IntegerAttr>(attr.getValue());
    if (!i || i.getInt() < 0)
      return op->emitError() << name << " must be an integer >= 0, got "
                             << attr.getValue();
    return success();
  }
  if (name == getRecomputeAttrName()) {
    auto d = dyn_cast<DictionaryAttr>(attr.getValue());
    if (!isa<FunctionOpInterface>(op) || !d)
      return op->emitError() << name << " is a dictionary on a step function";
    for (StringRef k : {"activations", "flops", "peak_before", "peak_after"}) {
      auto i = d.getAs<IntegerAttr>(k);
      if (!i || i.getInt() < 0)
        return op->emitError() << name << "'s '" << k
                               << "' must be an integer >= 0";
    }
    if (d.size() != 4)
      return op->emitError() << name << " holds activations, flops, "
                             << "peak_before and peak_after only";
    return success();
  }
  if (name == getBackwardAttrName()) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitError() << name << " is a unit attribute, got "
                             << attr.getValue();
    return success();
  }
  if (name == getAxisNamesAttrName()) {
    auto grid = dyn_cast<shard::GridOp>(op);
    if (!grid)
      return op->emitError() << name << " belongs on a shard.grid";
    auto names = dyn_cast<ArrayAttr>(attr.getValue());
    if (!names || names.size() != grid.getShape().size() ||
        !llvm::all_of(names, [](Attribute a) {
          auto s = dyn_cast<StringAttr>(a);
          return s && !s.getValue().empty();
        }))
      return op->emitError() << name << " must name each of the grid's "
                             << grid.getShape().size() << " axes, got "
                             << attr.getValue();
    return success();
  }
  return op->emitError() << "unknown kiln attribute '" << name << "'";
}

//===----------------------------------------------------------------------===//
// Enum pass options
//===----------------------------------------------------------------------===//

std::string
kiln::detail::unknownEnumValue(const llvm::cl::generic_parser_base &parser,
                               const llvm::cl::Option &option,
                               StringRef value) {
  SmallVector<StringRef> names;
  for (unsigned i = 0, e = parser.getNumOptions(); i < e; ++i)
    names.push_back(parser.getOption(i));
  return ("unknown " + option.ArgStr + " '" + value + "' (expected " +
          orList(names) + ")")
      .str();
}

// llvm::cl::parser's matching, with kiln::detail::unknownEnumValue's message
// (see KilnEnums.h).
#define KILN_ENUM_OPTION_PARSER(E)                                             \
  template <>                                                                  \
  bool llvm::cl::parser<E>::parse(Option &option, StringRef argName,           \
                                  StringRef arg, E &value) {                   \
    StringRef name = Owner.hasArgStr() ? arg : argName;                        \
    for (const OptionInfo &info : Values)                                      \
      if (info.Name == name) {                                                 \
        value = info.V.getValue();                                             \
        return false;                                                          \
      }                                                                        \
    return option.error(kiln::detail::unknownEnumValue(*this, option, name));  \
  }

KILN_ENUM_OPTION_PARSER(ParamRole)
KILN_ENUM_OPTION_PARSER(ParamInit)
KILN_ENUM_OPTION_PARSER(LossKind)
KILN_ENUM_OPTION_PARSER(OptimizerKind)
KILN_ENUM_OPTION_PARSER(BNRunningVar)
KILN_ENUM_OPTION_PARSER(TargetKind)
KILN_ENUM_OPTION_PARSER(LRSchedule)
