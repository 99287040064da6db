//===- KilnDialect.td - the kiln tensor dialect -------------*- tablegen -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_KILN_IR_KILNDIALECT_TD
#define KILN_DIALECT_KILN_IR_KILNDIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/CommonTypeConstraints.td"
include "kiln/Dialect/Kiln/IR/KilnInterfaces.td"

def Kiln_Dialect : Dialect {
  let name = "kiln";
  let cppNamespace = "::kiln";
  let summary = "Kiln's value-semantics tensor graph dialect";
  let description = [{
    The hub of the compiler: a small core of tensor ops on ranked tensors of
    static shape, enough for MLPs, CNNs with BatchNorm and pooling, ResNets
    and decoder-only transformers, their losses and the shape ops exporters
    emit. Binary elementwise ops broadcast as NumPy (and ONNX) do. Result
    types are inferred from operands and attributes (`InferTypeOpInterface`),
    so a mistyped op fails verification; rules passes need (cost, and later
    differentiation and sharding) are op interfaces.
  }];
  let hasConstantMaterializer = 1;

  // The discardable `kiln.*` attributes the training contract puts on
  // functions, their arguments and results (docs/Training.md). Each name is
  // a constant below, KilnAttributes.h reads and writes them with their
  // types, and the verifier (KilnAttrs.cpp) refuses a wrong type or value, or
  // an unknown `kiln.*` name, with one line naming the attribute.
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Argument: the value is a model parameter (written into the plan with
    /// its data), not a per-step input. Unit.
    /// Argument: a parameter each rank holds a block of (ZeRO,
    /// --kiln-zero): the array<i64> shape of the whole tensor, which the
    /// executable gathers for checkpoints and slices on resume.
    static constexpr ::llvm::StringLiteral getShardedShapeAttrName() {
      return ::llvm::StringLiteral("kiln.sharded_shape");
    }
    /// Argument of a function: the model's shape of a parameter that a
    /// strategy retyped into a view of the same elements (--kiln-tp-megatron
    /// holds a fused QKV weight [3C, Cin] as [3, C, Cin]); checkpoints and
    /// the export keep the model's shape.
    static constexpr ::llvm::StringLiteral getModelShapeAttrName() {
      return ::llvm::StringLiteral("kiln.model_shape");
    }
    /// Module: the expert layers --kiln-expert-parallel split
    /// ({experts, params}).
    static constexpr ::llvm::StringLiteral getEpLayersAttrName() {
      return ::llvm::StringLiteral("kiln.ep_layers");
    }
    /// Module: the blocks --kiln-tp-megatron found ({kind, params, heads}).
    static constexpr ::llvm::StringLiteral getTpBlocksAttrName() {
      return ::llvm::StringLiteral("kiln.tp_blocks");
    }
    /// Argument or result of a function: how the value is sharded over
    /// the module's mesh (@kiln_mesh, shard.grid with kiln.axis_names), one
    /// array of mesh-axis names per dimension, outermost axis first; [] is
    /// whole. `[["dp"], []]`: rows split over dp, columns whole.
    static constexpr ::llvm::StringLiteral getShardingAttrName() {
      return ::llvm::StringLiteral("kiln.sharding");
    }
    /// On an op: the ONNX value name of each result ("" for none), kept when
    /// kiln-compile --shard may annotate activations by name.
    static constexpr ::llvm::StringLiteral getOnnxNamesAttrName() {
      return ::llvm::StringLiteral("kiln.onnx_names");
    }
    /// On an op (written by --kiln-shard-propagation): one sharding, as
    /// kiln.sharding, per result.
    static constexpr ::llvm::StringLiteral getShardingsAttrName() {
      return ::llvm::StringLiteral("kiln.shardings");
    }
    static constexpr ::llvm::StringLiteral getParamAttrName() {
      return ::llvm::StringLiteral("kiln.param");
    }
    /// Argument of a parameter: its ParamRole as a string ("weight", ...).
    static constexpr ::llvm::StringLiteral getRoleAttrName() {
      return ::llvm::StringLiteral("kiln.role");
    }
    /// Argument of a parameter: its ParamInit as a string ("zeros").
    static constexpr ::llvm::StringLiteral getInitAttrName() {
      return ::llvm::StringLiteral("kiln.init");
    }
    /// Argument: the labels input an appended loss added. Unit.
    static constexpr ::llvm::StringLiteral getLabelsAttrName() {
      return ::llvm::StringLiteral("kiln.labels");
    }
    /// Result: the scalar loss (result 0 of @forward and @train_step). Unit.
    static constexpr ::llvm::StringLiteral getLossAttrName() {
      return ::llvm::StringLiteral("kiln.loss");
    }
    /// Result: the gradient of the parameter argument it names. i64.
    static constexpr ::llvm::StringLiteral getGradOfAttrName() {
      return ::llvm::StringLiteral("kiln.grad_of");
    }
    /// Result: the new value of the parameter argument it names. i64.
    static constexpr ::llvm::StringLiteral getUpdateAttrName() {
      return ::llvm::StringLiteral("kiln.update");
    }
    /// Function: the OptimizerKind @train_step applies, as a string.
    static constexpr ::llvm::StringLiteral getOptimizerAttrName() {
      return ::llvm::StringLiteral("kiln.optimizer");
    }
    /// Module: the path of the ONNX model the parameters' values come from.
    static constexpr ::llvm::StringLiteral getWeightsAttrName() {
      return ::llvm::StringLiteral("kiln.weights");
    }
    /// Module: the sites --kiln-qat quantized, an array of dictionaries
    /// {node: i64, name, weight, observer: strings, axis: i64} for
    /// --export-onnx's QDQ model.
    static constexpr ::llvm::StringLiteral getQatSitesAttrName() {
      return ::llvm::StringLiteral("kiln.qat_sites");
    }
    /// Module: the classes of channels --kiln-prune-channels at=S found,
    /// for --kiln-mask-channels: an array of dictionaries {channels, keep:
    /// i64; producers, params: string arrays; producer_axes,
    /// producer_blocks, axes, blocks: i64 arrays}.
    static constexpr ::llvm::StringLiteral getChannelClassesAttrName() {
      return ::llvm::StringLiteral("kiln.channel_classes");
    }
    /// shard.grid: the names of the mesh's axes (["dp"]), one per dim of
    /// its shape; the runtime's collectives name their group by axis.
    static constexpr ::llvm::StringLiteral getAxisNamesAttrName() {
      return ::llvm::StringLiteral("kiln.axis_names");
    }
    /// shard.all_reduce (sum or average of f32): the wire format the
    /// runtime sends it in, "bf16", "fp16" or "int8", with error feedback.
    static constexpr ::llvm::StringLiteral getCompressionAttrName() {
      return ::llvm::StringLiteral("kiln.compression");
    }
    /// shard.all_gather (ZeRO-3): which reader of a split parameter this
    /// whole copy is for, i64; copies for different readers stay apart
    /// (CSE would otherwise keep one alive from forward to backward).
    static constexpr ::llvm::StringLiteral getZeroGatherAttrName() {
      return ::llvm::StringLiteral("kiln.zero_gather");
    }
    /// On an op (--kiln-pipeline-stages; the ops the gradient sweep builds
    /// for an op's VJP inherit it): the pipeline stage that runs it, i64.
    static constexpr ::llvm::StringLiteral getStageAttrName() {
      return ::llvm::StringLiteral("kiln.stage");
    }
    /// On an op (--kiln-microbatch): the microbatch whose copy of the step
    /// it computes, i64.
    static constexpr ::llvm::StringLiteral getMicrobatchAttrName() {
      return ::llvm::StringLiteral("kiln.microbatch");
    }
    /// On a step function (--kiln-recompute): {activations, flops,
    /// peak_before, peak_after}, i64 each: the recomputed saved activations,
    /// their copies' FLOPs and the estimated peak bytes of live
    /// intermediates before and after.
    static constexpr ::llvm::StringLiteral getRecomputeAttrName() {
      return ::llvm::StringLiteral("kiln.recompute");
    }
    /// On an op: built by the gradient sweep for a staged op's VJP (the
    /// backward part of its stage). Unit.
    static constexpr ::llvm::StringLiteral getBackwardAttrName() {
      return ::llvm::StringLiteral("kiln.backward");
    }
  }];
}

// Every kiln op states its sharding rule (KilnShardingRules.cpp) and its
// precision class (KilnPrecisionRules.cpp).
// `shardingMethods`: the optional ShardingRuleOpInterface methods the op
// implements (localizeAttributes).
class Kiln_Op<string mnemonic, list<Trait> traits = [],
              list<string> shardingMethods = []>
    : Op<Kiln_Dialect, mnemonic,
         !listconcat([DeclareOpInterfaceMethods<Kiln_ShardingRuleOpInterface,
                                                shardingMethods>,
                      DeclareOpInterfaceMethods<Kiln_PrecisionOpInterface>],
                     traits)>;

// An elementwise op whose kernel reads element `i` of every operand before
// writing element `i` of its result, so the result may take the bytes of an
// operand of the same type (buffer assignment's in-place reuse).
def Kiln_InPlaceElementwise : NativeOpTrait<"InPlaceElementwise"> {
  let cppNamespace = "::kiln::trait";
}

def Kiln_Tensor : StaticShapeTensorOf<[AnyType]>;
def Kiln_FloatTensor : StaticShapeTensorOf<[AnyFloat]>;
def Kiln_BoolTensor : StaticShapeTensorOf<[I1]>;
def Kiln_IndexTensor : StaticShapeTensorOf<[I32, I64]>;

#endif // KILN_DIALECT_KILN_IR_KILNDIALECT_TD
