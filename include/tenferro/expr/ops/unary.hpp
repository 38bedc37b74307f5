// Elementwise unary ops. Each op is a small struct:
//   cost                  rough price of one evaluation in multiplies (>= 4: worth computing once
//                         when the value and the gradients both need it; see eval/cse.hpp)
//   name                  printed name (to_string; neg prints as -x) and name in the eager op table
//   scalar(x)             value of one element (std math)
//   batch(x)              value of an xsimd batch (xsimd math; exp, sin, cos from math.hpp)
//   derivative(a)         f'(a) as an expression of the operand `a`
// The reverse rule of unary<Op, A> is  vjp(a, Op::derivative(a) * cotangent)  and the forward
// rule  tangent(f(a)) = Op::derivative(a) * tangent(a)  (see derivative.hpp).
// Domains are where the math is real; outside them the value is NaN or inf as IEEE gives it and
// no error is raised.
#pragma once

#include <tenferro/core/detail/config.hpp>
#include <tenferro/core/detail/xtensor.hpp>
#include <tenferro/expr/nodes.hpp>
#include <tenferro/expr/ops/integer.hpp>
#include <tenferro/expr/ops/math.hpp>

#include <cmath>
#include <string_view>
#include <utility>

namespace tenferro::expr::ops {

// f(x) = -x;  f'(x) = -1
struct neg {
  static constexpr bool complex = true;
  static constexpr bool integral = true;
  static constexpr int cost = 1;
  static constexpr std::string_view name = "neg";  // printed as -x
  template <class T>
  static T scalar(T x) {
    if constexpr (std::is_integral_v<T>) {
      return integer::neg(x);
    } else {
      return -x;
    }
  }
  template <class B>
  static B batch(const B& x) {
    return -x;
  }
  template <class A>
  static auto derivative(const A&);
};

// f(x) = e^x;  f'(x) = e^x
struct exp {
  static constexpr bool complex = true;
  static constexpr int cost = 10;
  static constexpr std::string_view name = "exp";
  template <class T>
  static T scalar(T x) {
    return std::exp(x);
  }
  template <class B>
  TENFERRO_ALWAYS_INLINE static B batch(const B& x) {
    return math::exp(x);
  }
  template <class A>
  static auto derivative(const A& a);
};

// f(x) = ln x;  f'(x) = 1/x;  domain x > 0 (log 0 = -inf)
struct log {
  static constexpr bool complex = true;
  static constexpr int cost = 10;
  static constexpr std::string_view name = "log";
  template <class T>
  static T scalar(T x) {
    return std::log(x);
  }
  template <class B>
  static B batch(const B& x) {
    return xsimd::log(x);
  }
  template <class A>
  static auto derivative(const A& a);
};

// f(x) = sqrt(x);  f'(x) = 0.5 / sqrt(x);  domain x >= 0 (f'(0) = inf)
struct sqrt {
  static constexpr bool complex = true;
  static constexpr int cost = 4;
  static constexpr std::string_view name = "sqrt";
  template <class T>
  static T scalar(T x) {
    return std::sqrt(x);
  }
  template <class B>
  static B batch(const B& x) {
    return xsimd::sqrt(x);
  }
  template <class A>
  static auto derivative(const A& a);
};

// f(x) = 1 / sqrt(x) (exact, not the hardware estimate);  f'(x) = -0.5 * rsqrt(x) / x;  domain x > 0
struct rsqrt {
  static constexpr int cost = 5;
  static constexpr std::string_view name = "rsqrt";
  template <class T>
  static T scalar(T x) {
    return T(1) / std::sqrt(x);
  }
  template <class B>
  static B batch(const B& x) {
    return B(typename B::value_type(1)) / xsimd::sqrt(x);
  }
  template <class A>
  static auto derivative(const A& a);
};

// f(x) = sin x;  f'(x) = cos x
struct cos;
struct sin {
  static constexpr bool complex = true;
  static constexpr int cost = 15;
  static constexpr std::string_view name = "sin";
  // sin(x) and cos(x) of one x come out of one math::sincos, which costs what either does: the
  // evaluator's shared-subtree pass (eval/cse.hpp) and the eager runtime's deferred passes
  // (ad/deferred.hpp) compute a pair of them together. `pair_slot`: which half of the pair.
  using paired_with = cos;
  static constexpr int pair_slot = 0;
  template <class B>
  TENFERRO_ALWAYS_INLINE static std::pair<B, B> pair_batch(const B& x) {  // {sin(x), cos(x)}
    return math::sincos(x);
  }
  template <class T>
  static T scalar(T x) {
    return std::sin(x);
  }
  template <class B>
  TENFERRO_ALWAYS_INLINE static B batch(const B& x) {
    return math::sin(x);
  }
  template <class A>
  static auto derivative(const A& a);
};

// f(x) = cos x;  f'(x) = -sin x
struct cos {
  static constexpr bool complex = true;
  static constexpr int cost = 15;
  static constexpr std::string_view name = "cos";
  using paired_with = sin;  // see sin
  static constexpr int pair_slot = 1;
  template <class T>
  static T scalar(T x) {
    return std::cos(x);
  }
  template <class B>
  TENFERRO_ALWAYS_INLINE static B batch(const B& x) {
    return math::cos(x);
  }
  template <class A>
  static auto derivative(const A& a);
};

// f(x) = tan x;  f'(x) = 1 + tan² x;  poles at pi/2 + k pi
struct tan {
  static constexpr int cost = 20;
  static constexpr std::string_view name = "tan";
  template <class T>
  static T scalar(T x) {
    return std::tan(x);
  }
  template <class B>
  static B batch(const B& x) {
    return xsimd::tan(x);
  }
  template <class A>
  static auto derivative(const A& a);
};

// f(x) = tanh x;  f'(x) = 1 - tanh² x
struct tanh {
  static constexpr bool complex = true;
  static constexpr int cost = 15;
  static constexpr std::string_view name = "tanh";
  template <class T>
  static T scalar(T x) {
    return std::tanh(x);
  }
  template <class B>
  static B batch(const B& x) {
    return xsimd::tanh(x);
  }
  template <class A>
  static auto derivative(const A& a);
};

// f(x) = sinh x;  f'(x) = cosh x
struct sinh {
  static constexpr int cost = 15;
  static constexpr std::string_view name = "sinh";
  template <class T>
  static T scalar(T x) {
    return std::sinh(x);
  }
  template <class B>
  static B batch(const B& x) {
    return xsimd::sinh(x);
  }
  template <class A>
  static auto derivative(const A& a);
};

// f(x) = cosh x;  f'(x) = sinh x
struct cosh {
  static constexpr int cost = 15;
  static constexpr std::string_view name = "cosh";
  template <class T>
  static T scalar(T x) {
    return std::cosh(x);
  }
  template <class B>
  static B batch(const B& x) {
    return xsimd::cosh(x);
  }
  template <class A>
  static auto derivative(const A& a);
};

// f(x) = |x|;  f'(x) = sign(x); at the kink x = 0 the subgradient 0 is used.
struct abs {
  static constexpr bool integral = true;
  static constexpr int cost = 1;
  static constexpr std::string_view name = "abs";
  template <class T>
  static T scalar(T x) {
    if constexpr (std::is_integral_v<T>) {
      return integer::abs(x);
    } else {
      return std::abs(x);
    }
  }
  template <class B>
  static B batch(const B& x) {
    return xsimd::abs(x);
  }
  template <class A>
  static auto derivative(const A& a);
};

// f(x) = sign(x) in {-1, 0, 1} (NaN stays NaN);  f'(x) = 0 (the jump at 0 has subgradient 0)
struct sign {
  static constexpr bool integral = true;
  static constexpr int cost = 2;
  static constexpr std::string_view name = "sign";
  template <class T>
  static T scalar(T x) {
    return x > T(0) ? T(1) : x < T(0) ? T(-1) : x * T(0);
  }
  template <class B>
  static B batch(const B& x) {
    using T = typename B::value_type;
    return xsimd::select(x > B(T(0)), B(T(1)), xsimd::select(x < B(T(0)), B(T(-1)), x * B(T(0))));
  }
  template <class A>
  static auto derivative(const A&);
};

// f(x) = x²;  f'(x) = 2x
struct square {
  static constexpr bool complex = true;
  static constexpr bool integral = true;
  static constexpr int cost = 1;
  static constexpr std::string_view name = "square";
  template <class T>
  static T scalar(T x) {
    if constexpr (std::is_integral_v<T>) {
      return integer::mul(x, x);
    } else {
      return x * x;
    }
  }
  template <class B>
  static B batch(const B& x) {
    return integer::mul_lanes(x, x);
  }
  template <class A>
  static auto derivative(const A& a);
};

// f(x) = ln(1 + x), accurate near 0;  f'(x) = 1 / (1 + x);  domain x > -1
struct log1p {
  static constexpr int cost = 12;
  static constexpr std::string_view name = "log1p";
  template <class T>
  static T scalar(T x) {
    return std::log1p(x);
  }
  template <class B>
  static B batch(const B& x) {
    return xsimd::log1p(x);
  }
  template <class A>
  static auto derivative(const A& a);
};

// f(x) = e^x - 1, accurate near 0;  f'(x) = e^x
struct expm1 {
  static constexpr int cost = 12;
  static constexpr std::string_view name = "expm1";
  template <class T>
  static T scalar(T x) {
    return std::expm1(x);
  }
  template <class B>
  static B batch(const B& x) {
    return xsimd::expm1(x);
  }
  template <class A>
  static auto derivative(const A& a);
};

// f(x) = 1 / (1 + e^-x);  f'(x) = f(x) (1 - f(x))
struct sigmoid {
  static constexpr int cost = 12;
  static constexpr std::string_view name = "sigmoid";
  template <class T>
  static T scalar(T x) {
    return T(1) / (T(1) + std::exp(-x));
  }
  template <class B>
  static B batch(const B& x) {
    using T = typename B::value_type;
    return B(T(1)) / (B(T(1)) + math::exp(-x));
  }
  template <class A>
  static auto derivative(const A& a);
};

// f(x) = x, with derivative 0: the value flows, the gradient does not (log_sum_exp uses it for
// its shift by the maximum, whose exact gradient contribution is 0).
struct stop_gradient {
  static constexpr bool complex = true;
  static constexpr bool integral = true;
  static constexpr int cost = 0;
  static constexpr std::string_view name = "stop_gradient";
  template <class T>
  static T scalar(T x) {
    return x;
  }
  template <class B>
  static B batch(const B& x) {
    return x;
  }
  template <class A>
  static auto derivative(const A&);
};

}  // namespace tenferro::expr::ops
