//===- Elementwise.cpp - unary, binary, compare, select and cast kernels -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Unary ops run one contiguous loop; binary ops and select broadcast as in
// NumPy through a loops::Walk (size-1 dims dropped, compatible dims merged at
// factory time) whose innermost runs are specialised on the operands' inner
// strides (1 or 0) so the loops vectorise. Work over kParallelWork elements
// is split over the OpenMP threads. In-place use (the output is one of the
// inputs) is safe: element i of every input is read before element i of the
// output is written.
//
// Types: float ops take f32/f64/f16/bf16 (16-bit computed in float); neg,
// abs, sign, the arithmetic binary ops, max and min take floats and every
// integer type (integer arithmetic wraps; division truncates, x/0 is 0 and
// INT_MIN/-1 is INT_MIN; integer pow with a negative exponent is 0 unless the
// base is 1 or -1); compares take every type and give i1; not/and/or/xor
// take i1; select and cast take every type (cast: see loops::castValue).
//===----------------------------------------------------------------------===//
#include "FastMath.h"
#include "Convert16.h"
#include "Kernels.h"
#include "Loops.h"
#include "kiln/runtime/ShapeRules.h"

#include <memory>

namespace kiln::rt::cpu {
namespace {

using namespace loops;

//===----------------------------------------------------------------------===//
// Op functors: operator() on compute values
//===----------------------------------------------------------------------===//

enum class Accepts { Float, Numeric, Bool };

struct NegOp {
  static constexpr Accepts kAccepts = Accepts::Numeric;
  template <typename C> C operator()(C x) const {
    if constexpr (std::is_integral_v<C>)
      return wrapSub(C(0), x);
    else
      return -x;
  }
};
struct AbsOp {
  static constexpr Accepts kAccepts = Accepts::Numeric;
  template <typename C> C operator()(C x) const {
    if constexpr (std::is_unsigned_v<C>)
      return x;
    else if constexpr (std::is_integral_v<C>)
      return x < 0 ? wrapSub(C(0), x) : x;
    else
      return std::fabs(x);
  }
};
struct SignOp {
  static constexpr Accepts kAccepts = Accepts::Numeric;
  template <typename C> C operator()(C x) const {
    if constexpr (std::is_unsigned_v<C>)
      return x > 0 ? C(1) : C(0);
    else if constexpr (std::is_integral_v<C>)
      return x > 0 ? C(1) : (x < 0 ? C(-1) : C(0));
    else
      return x > 0 ? C(1) : (x < 0 ? C(-1) : x); // 0 and NaN stay
  }
};

#define KILN_FLOAT_UNARY(NAME, EXPR)                                           \
  struct NAME {                                                                \
    static constexpr Accepts kAccepts = Accepts::Float;                        \
    template <typename C> C operator()(C x) const { return EXPR; }             \
  };
// exp and erf: FastMath.h's vectorisable float forms (expAcc, erfAcc).
KILN_FLOAT_UNARY(ExpOp, expAcc(x))
KILN_FLOAT_UNARY(LogOp, std::log(x))
KILN_FLOAT_UNARY(TanhOp, std::tanh(x))
KILN_FLOAT_UNARY(SigmoidOp, C(1) / (C(1) + expAcc(-x)))
KILN_FLOAT_UNARY(ReluOp, x < C(0) ? C(0) : x)
KILN_FLOAT_UNARY(SqrtOp, std::sqrt(x))
KILN_FLOAT_UNARY(RsqrtOp, C(1) / std::sqrt(x))
KILN_FLOAT_UNARY(ReciprocalOp, C(1) / x)
KILN_FLOAT_UNARY(ErfOp, erfAcc(x))
KILN_FLOAT_UNARY(SoftplusOp, x > C(0) ? x + std::log1p(std::exp(-x))
                                      : std::log1p(std::exp(x)))
KILN_FLOAT_UNARY(FloorOp, std::floor(x))
// The default rounding mode: halves to even, as ONNX Round and torch.round.
KILN_FLOAT_UNARY(RoundOp, std::nearbyint(x))
KILN_FLOAT_UNARY(CeilOp, std::ceil(x))
KILN_FLOAT_UNARY(SinOp, std::sin(x))
KILN_FLOAT_UNARY(CosOp, std::cos(x))
#undef KILN_FLOAT_UNARY

struct NotOp {
  static constexpr Accepts kAccepts = Accepts::Bool;
  bool operator()(bool x) const { return !x; }
};

struct LeakyReluOp {
  static constexpr Accepts kAccepts = Accepts::Float;
  double alpha = 0.01;
  template <typename C> C operator()(C x) const {
    return x >= C(0) ? x : C(alpha) * x;
  }
};
struct EluOp {
  static constexpr Accepts kAccepts = Accepts::Float;
  double alpha = 1.0;
  template <typename C> C operator()(C x) const {
    return x > C(0) ? x : C(alpha) * std::expm1(x);
  }
};
struct GeluOp {
  static constexpr Accepts kAccepts = Accepts::Float;
  bool tanhForm = false;
  template <typename C> C operator()(C x) const {
    if (tanhForm) {
      const C k = C(0.7978845608028654); // sqrt(2/pi)
      return C(0.5) * x * (C(1) + std::tanh(k * (x + C(0.044715) * x * x * x)));
    }
    return C(0.5) * x * std::erfc(x * C(-0.7071067811865476)); // no cancellation
  }
};

struct AddOp {
  static constexpr Accepts kAccepts = Accepts::Numeric;
  template <typename C> C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>)
      return wrapAdd(a, b);
    else
      return a + b;
  }
};
struct SubOp {
  static constexpr Accepts kAccepts = Accepts::Numeric;
  template <typename C> C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>)
      return wrapSub(a, b);
    else
      return a - b;
  }
};
struct MulOp {
  static constexpr Accepts kAccepts = Accepts::Numeric;
  template <typename C> C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>)
      return wrapMul(a, b);
    else
      return a * b;
  }
};
struct DivOp {
  static constexpr Accepts kAccepts = Accepts::Numeric;
  template <typename C> C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) {
      if (b == 0)
        return C(0);
      if constexpr (std::is_signed_v<C>)
        if (b == C(-1))
          return wrapSub(C(0), a); // INT_MIN / -1 wraps to INT_MIN
      return C(a / b);
    } else {
      return a / b;
    }
  }
};
struct PowOp {
  static constexpr Accepts kAccepts = Accepts::Numeric;
  template <typename C> C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) {
      if constexpr (std::is_signed_v<C>) {
        if (b < 0) // 1/a^|b| truncated
          return a == 1 ? C(1) : (a == -1 ? ((b & 1) ? C(-1) : C(1)) : C(0));
      }
      C r = 1, base = a;
      for (auto e = b; e > 0; e >>= 1) {
        if (e & 1)
          r = wrapMul(r, base);
        base = wrapMul(base, base);
      }
      return r;
    } else {
      return std::pow(a, b);
    }
  }
};
struct MaxOp {
  static constexpr Accepts kAccepts = Accepts::Numeric;
  template <typename C> C operator()(C a, C b) const {
    return (a > b || a != a) ? a : b; // NaN propagates
  }
};
struct MinOp {
  static constexpr Accepts kAccepts = Accepts::Numeric;
  template <typename C> C operator()(C a, C b) const {
    return (a < b || a != a) ? a : b;
  }
};

struct AndOp {
  static constexpr Accepts kAccepts = Accepts::Bool;
  bool operator()(bool a, bool b) const { return a && b; }
};
struct OrOp {
  static constexpr Accepts kAccepts = Accepts::Bool;
  bool operator()(bool a, bool b) const { return a || b; }
};
struct XorOp {
  static constexpr Accepts kAccepts = Accepts::Bool;
  bool operator()(bool a, bool b) const { return a != b; }
};

#define KILN_COMPARE(NAME, EXPR)                                               \
  struct NAME {                                                                \
    template <typename C> bool operator()(C a, C b) const { return EXPR; }     \
  };
KILN_COMPARE(EqualOp, a == b)
KILN_COMPARE(LessOp, a < b)
KILN_COMPARE(LessEqualOp, a <= b)
KILN_COMPARE(GreaterOp, a > b)
KILN_COMPARE(GreaterEqualOp, a >= b)
#undef KILN_COMPARE

template <typename T> bool accepts(Accepts a) {
  switch (a) {
  case Accepts::Float: return kIsFloat<T>;
  case Accepts::Numeric: return !kIsBool<T>;
  case Accepts::Bool: return kIsBool<T>;
  }
  return false;
}

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

// A leaf function, not a lambda, so KILN_DISPATCH can clone it: under the
// x86-64-v3 baseline GCC leaves exp/erf (FastMath.h) scalar, and only the
// AVX-512 clone vectorizes them (GPT's exp and erf: 7x and 5x).
template <typename T, typename Op>
KILN_DISPATCH void unaryRun(const T *x, T *y, int64_t b, int64_t e, Op op) {
  for (int64_t i = b; i < e; ++i)
    store(y, i, op(load(x, i)));
}

template <typename T, typename Op> class UnaryKernel final : public Kernel {
public:
  UnaryKernel(int64_t n, Op op) : n_(n), op_(op) {}
  void run(ExecContext &, const void *const *in, void *const *out) override {
    const T *x = static_cast<const T *>(in[0]);
    T *y = static_cast<T *>(out[0]);
    Op op = op_;
    parallelRange(n_, n_,
                  [&](int64_t b, int64_t e) { unaryRun<T, Op>(x, y, b, e, op); });
  }

private:
  int64_t n_;
  Op op_;
};

void expectUnary(const KernelSpec &spec) {
  expectArity(spec, 1, 1);
  if (!spec.inputs[0] || !spec.outputs[0])
    throw Error("kernel '" + spec.kernel + "' is missing its operand");
  if (*spec.inputs[0] != *spec.outputs[0])
    throw Error("kernel '" + spec.kernel + "' result " +
                spec.outputs[0]->str() + " differs from its input " +
                spec.inputs[0]->str());
}

template <typename Op> KernelFactory unaryFactory(Op proto = Op{}) {
  return [proto](const KernelSpec &spec) -> std::unique_ptr<Kernel> {
    expectUnary(spec);
    Op op = proto;
    if constexpr (std::is_same_v<Op, LeakyReluOp> || std::is_same_v<Op, EluOp>)
      op.alpha = spec.attrs.getFloat("alpha", op.alpha);
    if constexpr (std::is_same_v<Op, GeluOp>) {
      std::string a = spec.attrs.getString("approximate", "none");
      if (a != "none" && a != "tanh")
        throw Error("gelu approximate must be \"none\" or \"tanh\", got \"" +
                    a + "\"");
      op.tanhForm = a == "tanh";
    }
    const TensorDesc &d = *spec.inputs[0];
    return dispatchType(d.dtype, [&](auto tag) -> std::unique_ptr<Kernel> {
      using T = decltype(tag);
      if constexpr (Op::kAccepts == Accepts::Bool) {
        if constexpr (kIsBool<T>)
          return std::make_unique<UnaryKernel<T, Op>>(d.numel(), op);
      } else if constexpr (Op::kAccepts == Accepts::Float) {
        if constexpr (kIsFloat<T>)
          return std::make_unique<UnaryKernel<T, Op>>(d.numel(), op);
      } else {
        if constexpr (!kIsBool<T>)
          return std::make_unique<UnaryKernel<T, Op>>(d.numel(), op);
      }
      unsupportedType(spec, d.dtype);
    });
  };
}

//===----------------------------------------------------------------------===//
// Cast
//===----------------------------------------------------------------------===//

template <typename From, typename To> class CastKernel final : public Kernel {
public:
  explicit CastKernel(int64_t n) : n_(n) {}
  void run(ExecContext &, const void *const *in, void *const *out) override {
    const From *x = static_cast<const From *>(in[0]);
    To *y = static_cast<To *>(out[0]);
    if constexpr (std::is_same_v<From, To>) {
      if ((const void *)x != (void *)y)
        std::memcpy(y, x, (size_t)n_ * sizeof(To));
      return;
    } else if constexpr (std::is_same_v<From, float> && std::is_same_v<To, BF16>) {
      // Mixed precision's casts: vectorized (Convert16.h).
      parallelRange(n_, n_, [&](int64_t b, int64_t e) {
        bf16FromF32(x, reinterpret_cast<uint16_t *>(y), b, e);
      });
      return;
    } else if constexpr (std::is_same_v<From, BF16> && std::is_same_v<To, float>) {
      parallelRange(n_, n_, [&](int64_t b, int64_t e) {
        f32FromBf16(reinterpret_cast<const uint16_t *>(x), y, b, e);
      });
      return;
    }
    parallelRange(n_, n_, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        store(y, i, castValue<To>(load(x, i)));
    });
  }

private:
  int64_t n_;
};

std::unique_ptr<Kernel> makeCast(const KernelSpec &spec) {
  expectArity(spec, 1, 1);
  const TensorDesc *x = spec.inputs[0], *y = spec.outputs[0];
  if (!x || !y)
    throw Error("kernel 'cast' is missing its operand");
  if (x->shape != y->shape)
    throw Error("cast result " + y->str() + " has another shape than its input " +
                x->str());
  int64_t n = x->numel();
  return dispatchType(x->dtype, [&](auto from) -> std::unique_ptr<Kernel> {
    return dispatchType(y->dtype, [&](auto to) -> std::unique_ptr<Kernel> {
      return std::make_unique<CastKernel<decltype(from), decltype(to)>>(n);
    });
  });
}

//===----------------------------------------------------------------------===//
// Binary and select
//===----------------------------------------------------------------------===//

/// Operand 0 of the walk is the output, 1.. the inputs.
Walk broadcastWalk(const KernelSpec &spec) {
  const TensorDesc &out = *spec.outputs[0];
  std::vector<int64_t> shape;
  for (const TensorDesc *d : spec.inputs) {
    std::vector<int64_t> next;
    // ShapeRules.h's broadcast, the rule the ops' type inference applies.
    if (!shape::broadcastShapes(shape, d->shape, next).empty())
      throw Error("kernel '" + spec.kernel + "' operands do not broadcast: " +
                  shapeStr(shape) + " and " + shapeStr(d->shape));
    shape = next;
  }
  if (shape != out.shape)
    throw Error("kernel '" + spec.kernel + "' result shape " + shapeStr(out.shape) +
                " is not the broadcast shape " + shapeStr(shape) +
                " of its operands");
  std::vector<std::vector<int64_t>> strides{contiguousStrides(out.shape)};
  for (const TensorDesc *d : spec.inputs)
    strides.push_back(broadcastStrides(d->shape, out.shape));
  return Walk(out.shape, strides);
}

template <typename T, typename R, typename Op, bool SA, bool SB>
KILN_DISPATCH void binaryRun(const T *a, const T *b, R *o, int64_t n, Op op) {
  for (int64_t i = 0; i < n; ++i)
    store(o, i, castValue<R>(op(load(a, SA ? i : 0), load(b, SB ? i : 0))));
}

template <typename T, typename R, typename Op>
class BinaryKernel final : public Kernel {
public:
  BinaryKernel(Walk w, Op op) : w_(std::move(w)), op_(op) {}
  void run(ExecContext &, const void *const *in, void *const *out) override {
    const T *a = static_cast<const T *>(in[0]), *b = static_cast<const T *>(in[1]);
    R *o = static_cast<R *>(out[0]);
    const int64_t sa = w_.inner(1), sb = w_.inner(2);
    Op op = op_;
    w_.parallelRuns([&](const int64_t *off, int64_t n) {
      const T *pa = a + off[1], *pb = b + off[2];
      R *po = o + off[0];
      if (sa == 1 && sb == 1)
        binaryRun<T, R, Op, true, true>(pa, pb, po, n, op);
      else if (sa == 1 && sb == 0)
        binaryRun<T, R, Op, true, false>(pa, pb, po, n, op);
      else if (sa == 0 && sb == 1)
        binaryRun<T, R, Op, false, true>(pa, pb, po, n, op);
      else
        binaryRun<T, R, Op, false, false>(pa, pb, po, n, op);
    });
  }

private:
  Walk w_;
  Op op_;
};

void expectBinary(const KernelSpec &spec, size_t nin) {
  expectArity(spec, nin, 1);
  for (size_t i = 0; i < nin; ++i)
    if (!spec.inputs[i])
      throw Error("kernel '" + spec.kernel + "' is missing operand " +
                  std::to_string(i));
  if (!spec.outputs[0])
    throw Error("kernel '" + spec.kernel + "' is missing its result");
}

/// Arithmetic (result type = operand type) or logical binary op.
template <typename Op> KernelFactory binaryFactory() {
  return [](const KernelSpec &spec) -> std::unique_ptr<Kernel> {
    expectBinary(spec, 2);
    DType t = spec.inputs[0]->dtype;
    if (spec.inputs[1]->dtype != t || spec.outputs[0]->dtype != t)
      throw Error("kernel '" + spec.kernel + "' needs one element type, got " +
                  spec.inputs[0]->str() + ", " + spec.inputs[1]->str() + " -> " +
                  spec.outputs[0]->str());
    Walk w = broadcastWalk(spec);
    return dispatchType(t, [&](auto tag) -> std::unique_ptr<Kernel> {
      using T = decltype(tag);
      if constexpr (Op::kAccepts == Accepts::Bool) {
        if constexpr (kIsBool<T>)
          return std::make_unique<BinaryKernel<T, T, Op>>(std::move(w), Op{});
      } else {
        if constexpr (!kIsBool<T>)
          return std::make_unique<BinaryKernel<T, T, Op>>(std::move(w), Op{});
      }
      unsupportedType(spec, t);
    });
  };
}

template <typename Op> KernelFactory compareFactory() {
  return [](const KernelSpec &spec) -> std::unique_ptr<Kernel> {
    expectBinary(spec, 2);
    DType t = spec.inputs[0]->dtype;
    if (spec.inputs[1]->dtype != t)
      throw Error("kernel '" + spec.kernel + "' operands differ in element type: " +
                  spec.inputs[0]->str() + " and " + spec.inputs[1]->str());
    if (spec.outputs[0]->dtype != DType::Bool)
      throw Error("kernel '" + spec.kernel + "' result must be i1, got " +
                  spec.outputs[0]->str());
    Walk w = broadcastWalk(spec);
    return dispatchType(t, [&](auto tag) -> std::unique_ptr<Kernel> {
      using T = decltype(tag);
      return std::make_unique<BinaryKernel<T, Bool8, Op>>(std::move(w), Op{});
    });
  };
}

template <typename U, bool SC, bool ST, bool SF>
inline void selectRun(const uint8_t *c, const U *t, const U *f, U *o, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    o[i] = c[SC ? i : 0] ? t[ST ? i : 0] : f[SF ? i : 0];
}

template <typename U> class SelectKernel final : public Kernel {
public:
  explicit SelectKernel(Walk w) : w_(std::move(w)) {}
  void run(ExecContext &, const void *const *in, void *const *out) override {
    const uint8_t *c = static_cast<const uint8_t *>(in[0]);
    const U *t = static_cast<const U *>(in[1]), *f = static_cast<const U *>(in[2]);
    U *o = static_cast<U *>(out[0]);
    const int pat = (w_.inner(1) == 1 ? 4 : 0) | (w_.inner(2) == 1 ? 2 : 0) |
                    (w_.inner(3) == 1 ? 1 : 0);
    w_.parallelRuns([&](const int64_t *off, int64_t n) {
      const uint8_t *pc = c + off[1];
      const U *pt = t + off[2], *pf = f + off[3];
      U *po = o + off[0];
      switch (pat) {
      case 7: selectRun<U, true, true, true>(pc, pt, pf, po, n); break;
      case 6: selectRun<U, true, true, false>(pc, pt, pf, po, n); break;
      case 5: selectRun<U, true, false, true>(pc, pt, pf, po, n); break;
      case 4: selectRun<U, true, false, false>(pc, pt, pf, po, n); break;
      case 3: selectRun<U, false, true, true>(pc, pt, pf, po, n); break;
      case 2: selectRun<U, false, true, false>(pc, pt, pf, po, n); break;
      case 1: selectRun<U, false, false, true>(pc, pt, pf, po, n); break;
      default: selectRun<U, false, false, false>(pc, pt, pf, po, n); break;
      }
    });
  }

private:
  Walk w_;
};

std::unique_ptr<Kernel> makeSelect(const KernelSpec &spec) {
  expectBinary(spec, 3);
  if (spec.inputs[0]->dtype != DType::Bool)
    throw Error("select condition must be i1, got " + spec.inputs[0]->str());
  DType t = spec.inputs[1]->dtype;
  if (spec.inputs[2]->dtype != t || spec.outputs[0]->dtype != t)
    throw Error("select needs one element type for its values and result, got " +
                spec.inputs[1]->str() + ", " + spec.inputs[2]->str() + " -> " +
                spec.outputs[0]->str());
  Walk w = broadcastWalk(spec);
  return dispatchSize(t, [&](auto tag) -> std::unique_ptr<Kernel> {
    return std::make_unique<SelectKernel<decltype(tag)>>(std::move(w));
  });
}

} // namespace

void registerElementwiseKernels(KernelRegistry &r) {
  r.add("neg", unaryFactory<NegOp>());
  r.add("abs", unaryFactory<AbsOp>());
  r.add("sign", unaryFactory<SignOp>());
  r.add("exp", unaryFactory<ExpOp>());
  r.add("log", unaryFactory<LogOp>());
  r.add("tanh", unaryFactory<TanhOp>());
  r.add("sigmoid", unaryFactory<SigmoidOp>());
  r.add("relu", unaryFactory<ReluOp>());
  r.add("sqrt", unaryFactory<SqrtOp>());
  r.add("rsqrt", unaryFactory<RsqrtOp>());
  r.add("reciprocal", unaryFactory<ReciprocalOp>());
  r.add("erf", unaryFactory<ErfOp>());
  r.add("softplus", unaryFactory<SoftplusOp>());
  r.add("floor", unaryFactory<FloorOp>());
  r.add("round", unaryFactory<RoundOp>());
  r.add("ceil", unaryFactory<CeilOp>());
  r.add("sin", unaryFactory<SinOp>());
  r.add("cos", unaryFactory<CosOp>());
  r.add("not", unaryFactory<NotOp>());
  r.add("leaky_relu", unaryFactory<LeakyReluOp>());
  r.add("elu", unaryFactory<EluOp>());
  r.add("gelu", unaryFactory<GeluOp>());
  r.add("cast", makeCast);

  r.add("add", binaryFactory<AddOp>());
  r.add("sub", binaryFactory<SubOp>());
  r.add("mul", binaryFactory<MulOp>());
  r.add("div", binaryFactory<DivOp>());
  r.add("pow", binaryFactory<PowOp>());
  r.add("max", binaryFactory<MaxOp>());
  r.add("min", binaryFactory<MinOp>());
  r.add("and", binaryFactory<AndOp>());
  r.add("or", binaryFactory<OrOp>());
  r.add("xor", binaryFactory<XorOp>());
  r.add("equal", compareFactory<EqualOp>());
  r.add("less", compareFactory<LessOp>());
  r.add("less_equal", compareFactory<LessEqualOp>());
  r.add("greater", compareFactory<GreaterOp>());
  r.add("greater_equal", compareFactory<GreaterEqualOp>());
  r.add("select", makeSelect);
}

} // namespace kiln::rt::cpu
