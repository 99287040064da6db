//===- KilnEnums.td - kiln's closed sets of names -----------*- tablegen -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Every closed set of names the compiler writes or accepts: the values of the
// `kiln.role` and `kiln.init` argument attributes, and the choices of the
// training passes' options. Each becomes a C++ enum with
// stringify/symbolize functions (KilnEnums.h), the dialect verifier checks
// the attributes against it, and `Kiln_EnumOption` builds a pass option's
// `llvm::cl::values` from the same list, so a name is spelled once.
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_KILN_IR_KILNENUMS_TD
#define KILN_DIALECT_KILN_IR_KILNENUMS_TD

include "mlir/IR/EnumAttr.td"
include "mlir/Pass/PassBase.td"

class Kiln_Enum<string name, string summary, list<EnumCase> cases>
    : I32Enum<name, summary, cases> {
  let cppNamespace = "::kiln";
}

//===----------------------------------------------------------------------===//
// Attribute values (kept as strings in the IR and in the plan)
//===----------------------------------------------------------------------===//

// `kiln.role`: what a parameter is to the trainer. The plan carries it as
// the input's "role" (docs/PlanFormat.md), which the runtime checks.
def Kiln_ParamRole : Kiln_Enum<"ParamRole", "parameter role", [
    I32EnumCase<"Weight", 0, "weight">,
    I32EnumCase<"State", 1, "state">,
    I32EnumCase<"Frozen", 2, "frozen">,
    I32EnumCase<"Optimizer", 3, "optimizer">]>;

// `kiln.init`: a parameter's initial value when the model has none.
def Kiln_ParamInit : Kiln_Enum<"ParamInit", "parameter initialiser", [
    I32EnumCase<"Zeros", 0, "zeros">]>;

//===----------------------------------------------------------------------===//
// Pass and driver options
//===----------------------------------------------------------------------===//

def Kiln_LossKind : Kiln_Enum<"LossKind", "training loss", [
    I32EnumCase<"CrossEntropy", 0, "cross-entropy">,
    I32EnumCase<"MSE", 1, "mse">,
    I32EnumCase<"Output", 2, "output">]>;

// Also the function attribute `kiln.optimizer` on @train_step.
def Kiln_OptimizerKind : Kiln_Enum<"OptimizerKind", "optimizer", [
    I32EnumCase<"SGD", 0, "sgd">,
    I32EnumCase<"Momentum", 1, "momentum">,
    I32EnumCase<"Adam", 2, "adam">,
    I32EnumCase<"AdamW", 3, "adamw">]>;

def Kiln_BNRunningVar : Kiln_Enum<"BNRunningVar",
                                  "BatchNorm running-variance rule", [
    I32EnumCase<"Unbiased", 0, "unbiased">,
    I32EnumCase<"Biased", 1, "biased">]>;

// The devices a plan can be lowered for.
def Kiln_TargetKind : Kiln_Enum<"TargetKind", "target device", [
    I32EnumCase<"CPU", 0, "cpu">]>;

// An op's precision class under mixed precision (PrecisionOpInterface,
// --kiln-mixed-precision): where it computes when the model trains in a
// 16-bit float type.
def Kiln_PrecisionClass : Kiln_Enum<"PrecisionClass", "precision class", [
    // In the low-precision type: its float operands are cast down (GEMMs,
    // convolutions: the work tensor units and AVX-512 BF16 speed up).
    I32EnumCase<"Low", 0, "low">,
    // In float32: operands cast up (softmax, norms, reductions, losses,
    // exp/log, optimizer updates: where 8 bits of mantissa lose the answer).
    I32EnumCase<"Float32", 1, "float32">,
    // In the widest type of its activation operands (values computed from
    // the inputs); weights and constants follow them (elementwise and shape
    // ops, pooling, dropout, gather).
    I32EnumCase<"Follow", 2, "follow">,
    // Never retyped: casts, constants, ops without float operands.
    I32EnumCase<"Keep", 3, "keep">]>;

// Low-precision types --kiln-mixed-precision trains in.
def Kiln_LowPrecision : Kiln_Enum<"LowPrecision", "low-precision type", [
    I32EnumCase<"BF16", 0, "bf16">,
    I32EnumCase<"FP16", 1, "fp16">]>;

// The learning-rate schedules the trainer runs (the config's schedule.kind).
def Kiln_LRSchedule : Kiln_Enum<"LRSchedule", "learning-rate schedule", [
    I32EnumCase<"Constant", 0, "constant">,
    I32EnumCase<"LinearWarmup", 1, "linear-warmup">,
    I32EnumCase<"Cosine", 2, "cosine">]>;

//===----------------------------------------------------------------------===//
// Enum pass options
//===----------------------------------------------------------------------===//

// A pass option whose value is one of `enumInfo`'s cases, parsed by name:
// `llvm::cl::values` lists every case, so an unknown name is refused by the
// option parser (with the valid names, see KilnEnums.h) and `--help` shows
// them. `defaultCase` is the C++ symbol of the default.
class Kiln_EnumOption<string varName, string arg, EnumInfo enumInfo,
                      string defaultCase, string desc>
    : Option<varName, arg, enumInfo.cppType,
             enumInfo.cppType # "::" # defaultCase, desc,
             "::llvm::cl::values(" #
                 !interleave(!foreach(c, enumInfo.enumerants,
                     "clEnumValN(" # enumInfo.cppType # "::" # c.symbol #
                     ", \"" # c.str # "\", \"" # c.str # "\")"), ", ") #
             ")">;

#endif // KILN_DIALECT_KILN_IR_KILNENUMS_TD
