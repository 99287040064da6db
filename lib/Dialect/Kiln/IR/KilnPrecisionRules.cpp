//===- KilnPrecisionRules.cpp - every kiln op's precision class -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// PrecisionOpInterface for each op: where it computes when a model trains in
// bf16 or fp16 (--kiln-mixed-precision). The lists follow torch.autocast:
//
//  - low: what autocast's lower_precision_fp list runs low (mm, matmul,
//    linear, conv*, conv_transpose*), with their gradients;
//  - float32: what CUDA autocast's fp32 list keeps in float32 (softmax,
//    log_softmax, layer_norm, exp, log, pow, rsqrt, reciprocal, softplus,
//    sum, prod, the losses) plus BatchNorm and every reduction whose
//    rounding grows with its length (mean, sum of squares), and the
//    optimizer updates. CPU autocast in PyTorch 1.13 runs softmax, the norms
//    and reductions in bf16 when their input is bf16; Kiln keeps them in
//    float32 everywhere (docs/MixedPrecision.md lists the differences);
//  - follow: everything else computes in its activations' type, as autocast
//    leaves an op it does not list on its inputs' type;
//  - keep: constants, casts and the boolean ops are never retyped.
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Kiln/IR/KilnOps.h"

using namespace kiln;

#define KILN_PRECISION(Op, Class)                                              \
  PrecisionClass Op::getPrecisionClass() { return PrecisionClass::Class; }

// Tensor-unit work: GEMMs and convolutions, forward and backward.
KILN_PRECISION(MatmulOp, Low)
KILN_PRECISION(ConvOp, Low)
KILN_PRECISION(ConvTransposeOp, Low)
KILN_PRECISION(ConvInputGradOp, Low)
KILN_PRECISION(ConvWeightGradOp, Low)

// Range- and rounding-sensitive math.
KILN_PRECISION(ExpOp, Float32)
KILN_PRECISION(LogOp, Float32)
KILN_PRECISION(PowOp, Float32)
KILN_PRECISION(RsqrtOp, Float32)
KILN_PRECISION(ReciprocalOp, Float32)
KILN_PRECISION(SoftplusOp, Float32)
KILN_PRECISION(SoftmaxOp, Float32)
KILN_PRECISION(LogSoftmaxOp, Float32)
KILN_PRECISION(SoftmaxGradOp, Float32)
KILN_PRECISION(LogSoftmaxGradOp, Float32)
// Norms: statistics over many elements.
KILN_PRECISION(LayerNormOp, Float32)
KILN_PRECISION(LayerNormGradOp, Float32)
KILN_PRECISION(BatchNormOp, Float32)
KILN_PRECISION(BatchNormTrainOp, Float32)
KILN_PRECISION(BatchNormTrainGradOp, Float32)
// Accumulating reductions (max and min are exact in any type: follow).
KILN_PRECISION(ReduceSumOp, Float32)
KILN_PRECISION(ReduceMeanOp, Float32)
KILN_PRECISION(ReduceSumSquareOp, Float32)
KILN_PRECISION(ReduceProdOp, Float32)
// Losses and their gradients.
KILN_PRECISION(SoftmaxCrossEntropyOp, Float32)
KILN_PRECISION(SoftmaxCrossEntropyGradOp, Float32)
KILN_PRECISION(NllLossOp, Float32)
KILN_PRECISION(NllLossGradOp, Float32)
KILN_PRECISION(MseLossOp, Float32)
// Optimizer updates: master weights and their state are float32.
KILN_PRECISION(SgdUpdateOp, Float32)
KILN_PRECISION(MomentumUpdateOp, Float32)
KILN_PRECISION(AdamUpdateOp, Float32)
KILN_PRECISION(MagnitudePruneOp, Float32)
KILN_PRECISION(ChannelPruneOp, Float32)
// Quantization: scales and rounding in float32, as PyTorch computes them.
KILN_PRECISION(FakeQuantOp, Float32)
KILN_PRECISION(FakeQuantGradOp, Float32)
KILN_PRECISION(MinMaxObserveOp, Float32)
KILN_PRECISION(AbsMaxScaleOp, Float32)

// Elementwise, shape, pooling and indexing ops: their activations' type.
KILN_PRECISION(NegOp, Follow)
KILN_PRECISION(AbsOp, Follow)
KILN_PRECISION(SignOp, Follow)
KILN_PRECISION(TanhOp, Follow)
KILN_PRECISION(SigmoidOp, Follow)
KILN_PRECISION(ReluOp, Follow)
KILN_PRECISION(SqrtOp, Follow)
KILN_PRECISION(ErfOp, Follow)
KILN_PRECISION(FloorOp, Follow)
KILN_PRECISION(RoundOp, Follow)
KILN_PRECISION(CeilOp, Follow)
KILN_PRECISION(SinOp, Follow)
KILN_PRECISION(CosOp, Follow)
KILN_PRECISION(LeakyReluOp, Follow)
KILN_PRECISION(EluOp, Follow)
KILN_PRECISION(GeluOp, Follow)
KILN_PRECISION(AddOp, Follow)
KILN_PRECISION(SubOp, Follow)
KILN_PRECISION(MulOp, Follow)
KILN_PRECISION(DivOp, Follow)
KILN_PRECISION(MaxOp, Follow)
KILN_PRECISION(MinOp, Follow)
KILN_PRECISION(EqualOp, Follow)
KILN_PRECISION(LessOp, Follow)
KILN_PRECISION(LessEqualOp, Follow)
KILN_PRECISION(GreaterOp, Follow)
KILN_PRECISION(GreaterEqualOp, Follow)
KILN_PRECISION(SelectOp, Follow)
KILN_PRECISION(BroadcastOp, Follow)
KILN_PRECISION(ReshapeOp, Follow)
KILN_PRECISION(TransposeOp, Follow)
KILN_PRECISION(SliceOp, Follow)
KILN_PRECISION(SliceGradOp, Follow)
KILN_PRECISION(ConcatOp, Follow)
KILN_PRECISION(PadOp, Follow)
KILN_PRECISION(GatherOp, Follow)
KILN_PRECISION(GatherGradOp, Follow)
KILN_PRECISION(GatherElementsOp, Follow)
KILN_PRECISION(GatherElementsGradOp, Follow)
KILN_PRECISION(ScatterElementsOp, Follow)
KILN_PRECISION(ScatterNDOp, Follow)
KILN_PRECISION(TopKOp, Follow)
// A running sum accumulates like a reduction.
KILN_PRECISION(CumSumOp, Float32)
KILN_PRECISION(ReduceMaxOp, Follow)
KILN_PRECISION(ReduceMinOp, Follow)
KILN_PRECISION(ArgMaxOp, Follow)
KILN_PRECISION(ArgMinOp, Follow)
KILN_PRECISION(MaxPoolOp, Follow)
KILN_PRECISION(AvgPoolOp, Follow)
KILN_PRECISION(MaxPoolGradOp, Follow)
KILN_PRECISION(AvgPoolGradOp, Follow)
KILN_PRECISION(DropoutOp, Follow)
KILN_PRECISION(DropoutGradOp, Follow)
KILN_PRECISION(ReluGradOp, Follow)
KILN_PRECISION(GeluGradOp, Follow)

// Never retyped.
KILN_PRECISION(ConstantOp, Keep)
KILN_PRECISION(CastOp, Keep)
KILN_PRECISION(NotOp, Keep)
KILN_PRECISION(AndOp, Keep)
KILN_PRECISION(OrOp, Keep)
KILN_PRECISION(XorOp, Keep)
#undef KILN_PRECISION
