// Random eager programs for the differential tester (test_random_programs.cpp): a seeded generator
// of straight-line programs over every eager op and an interpreter that runs one on EagerTensors
// (their text as C++ and JSON: random_program_text.hpp).
//
// A program has leaves (trainable, shapes that broadcast to one base shape) and instructions, each
// making a new register from earlier ones; the last register is the output. Ops with a restricted
// domain get operands made safe by other ops (log(square(a) + 0.5), ...), so finite differences
// stay valid. In "batched" runs every leaf gets a trailing axis of `batch` elements (so elementwise
// ops are large enough to be deferred and fused); the instructions are the same.
#pragma once

#include <tenferro/eager.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace tenferro::test {

enum class op_code {
  add,
  sub,
  mul,
  div,
  pow,
  maximum,
  minimum,  // binary
  neg,
  abs,
  sign,
  exp,
  log,
  sin,
  cos,
  tanh,
  sqrt,
  rsqrt,
  expm1,
  log1p,
  square,
  sigmoid,  // unary
  scale,
  add_scalar,
  rsub_scalar,
  rdiv_scalar,  // with a number
  reduce_sum,
  reduce_prod,
  reduce_max,
  reduce_min,
  reduce_mean,  // over axes / all
  reshape_merge,
  reshape_split,
  transpose,
  matmul,
  broadcast_to,
  sum_to,
};

inline constexpr const char* op_names[] = {
    "add",           "sub",           "mul",         "div",        "pow",          "maximum",
    "minimum",       "neg",           "abs",         "sign",       "exp",          "log",
    "sin",           "cos",           "tanh",        "sqrt",       "rsqrt",        "expm1",
    "log1p",         "square",        "sigmoid",     "scale",      "add_scalar",   "rsub_scalar",
    "rdiv_scalar",   "reduce_sum",    "reduce_prod", "reduce_max", "reduce_min",   "reduce_mean",
    "reshape_merge", "reshape_split", "transpose",   "matmul",     "broadcast_to", "sum_to"};

struct instruction {
  op_code op;
  int a = 0, b = 0;               // operand registers
  double number = 0;              // scale, add_scalar, ...
  bool all_axes = false;          // reductions: every axis (rank-0 result) or `axes`
  std::vector<std::size_t> axes;  // reductions: axes; transpose: the permutation
  int leaf = 0;                   // sum_to: the leaf whose shape is the target
  std::vector<double> matrix;     // matmul: the right operand, [k, 2] column-major, a constant
};

struct program {
  std::uint64_t seed = 0;
  Shape base;  // every leaf's shape broadcasts to it
  std::vector<Shape> leaf_shapes;
  std::vector<std::vector<double>> leaf_values;
  std::vector<instruction> code;
  std::vector<double> weights;  // the loss is sum(output * weights), weights of the output's shape
  std::vector<Shape> shapes;    // of every register (unbatched)
  std::vector<bool> batched;    // whether a register carries the batch axis in batched runs
  bool batchable = true;        // false with a matmul (rank 2 only): no batched runs
};

// The shape a register has in a run with a trailing batch axis of `batch` (0: none).
inline Shape run_shape(const program& p, std::size_t reg, std::size_t batch) {
  Shape s = p.shapes[reg];
  if (batch != 0 && p.batched[reg]) s.push_back(batch);
  return s;
}

inline bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  for (std::size_t i = 0; i < from.size(); ++i) {
    const std::size_t f = from[from.size() - 1 - i], t = to[to.size() - 1 - i];
    if (f != t && f != 1) return false;
  }
  return true;
}

// A random program of about `length` instructions from `seed`.
inline program generate(std::uint64_t seed, std::size_t length) {
  std::mt19937_64 rng(seed);
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  std::uniform_real_distribution<double> value(-1.5, 1.5);
  program p;
  p.seed = seed;
  const std::size_t rank = pick(4);
  for (std::size_t d = 0; d < rank; ++d) p.base.push_back(1 + pick(3));
  const std::size_t leaves = 1 + pick(3);
  for (std::size_t k = 0; k < leaves; ++k) {
    Shape s = p.base;
    s.erase(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(pick(s.size() + 1)));  // drop leading axes
    for (auto& e : s) {
      if (pick(4) == 0) e = 1;
    }
    std::vector<double> v(checked_shape_size(s).value());
    for (auto& x : v) x = value(rng);
    p.leaf_shapes.push_back(s);
    p.leaf_values.push_back(std::move(v));
    p.shapes.push_back(s);
    p.batched.push_back(true);
  }
  auto any_register = [&] { return static_cast<int>(pick(p.shapes.size())); };
  auto recent = [&] {  // favour recent registers, so programs are deep rather than wide
    const std::size_t n = p.shapes.size();
    return static_cast<int>(n - 1 - std::min(n - 1, pick(3)));
  };
  while (p.code.size() < length) {
    instruction in;
    in.op = static_cast<op_code>(pick(static_cast<std::size_t>(op_code::sum_to) + 1));
    in.a = recent();
    in.b = any_register();
    const Shape& sa = p.shapes[in.a];
    const Shape& sb = p.shapes[in.b];
    Shape out = sa;
    bool batched = p.batched[in.a];
    switch (in.op) {
      case op_code::add:
      case op_code::sub:
      case op_code::mul:
      case op_code::div:
      case op_code::pow:
      case op_code::maximum:
      case op_code::minimum: {
        Shape r(std::max(sa.size(), sb.size()), 1);
        bool ok = true;
        for (std::size_t i = 0; i < r.size(); ++i) {
          const std::size_t ea = i < sa.size() ? sa[sa.size() - 1 - i] : 1;
          const std::size_t eb = i < sb.size() ? sb[sb.size() - 1 - i] : 1;
          if (ea != eb && ea != 1 && eb != 1) ok = false;
          r[r.size() - 1 - i] = std::max(ea, eb);
        }
        if (!ok) continue;
        out = r;
        batched = p.batched[in.a] || p.batched[in.b];
        break;
      }
      case op_code::scale:
      case op_code::add_scalar:
      case op_code::rsub_scalar:
      case op_code::rdiv_scalar:
        in.number = std::round(value(rng) * 8) / 4;  // short decimals in repros
        if (in.number == 0) in.number = 0.75;
        break;
      case op_code::reduce_sum:
      case op_code::reduce_prod:
      case op_code::reduce_max:
      case op_code::reduce_min:
      case op_code::reduce_mean:
        in.all_axes = sa.empty() || pick(3) == 0;
        if (in.all_axes) {
          out = {};
          batched = false;
        } else {
          out.clear();
          for (std::size_t d = 0; d < sa.size(); ++d) {
            if (pick(2) == 0) {
              in.axes.push_back(d);
            } else {
              out.push_back(sa[d]);
            }
          }
        }
        break;
      case op_code::reshape_merge:  // the last two axes into one
        if (sa.size() < 2) continue;
        out.pop_back();
        out.back() *= sa.back();
        break;
      case op_code::reshape_split:                         // a new axis of extent 1 in front
        if (sa.size() >= 4 || !p.batched[in.a]) continue;  // only rank 0 is ever unbatched
        out.insert(out.begin(), 1);
        break;
      case op_code::transpose:
        in.axes.resize(sa.size());
        for (std::size_t d = 0; d < sa.size(); ++d) in.axes[d] = d;
        std::shuffle(in.axes.begin(), in.axes.end(), rng);
        for (std::size_t d = 0; d < sa.size(); ++d) out[d] = sa[in.axes[d]];
        break;
      case op_code::matmul:  // [m, k] x a constant [k, 2]; the program is then never batched
        if (sa.size() != 2) continue;
        p.batchable = false;
        in.matrix.resize(sa[1] * 2);
        for (auto& x : in.matrix) x = value(rng);
        out = {sa[0], 2};
        break;
      case op_code::broadcast_to:
        if (!broadcasts_to(sa, p.base) || (!p.batched[in.a] && !sa.empty())) continue;
        out = p.base;
        batched = true;
        break;
      case op_code::sum_to:
        in.leaf = static_cast<int>(pick(p.leaf_shapes.size()));
        if (!broadcasts_to(p.leaf_shapes[in.leaf], sa) || !p.batched[in.a]) continue;
        out = p.leaf_shapes[in.leaf];
        break;
      default:  // unary
        break;
    }
    p.code.push_back(in);
    p.shapes.push_back(out);
    p.batched.push_back(batched);
  }
  const Shape& last = p.shapes.back();
  p.weights.resize(checked_shape_size(last).value());
  for (auto& w : p.weights) w = value(rng);
  return p;
}

// Runs the program on `leaves` (one per leaf, in the program's runtime), returning every register.
// `batch`: the trailing axis the leaves carry (0: none).
inline std::vector<EagerTensor> run(const program& p, const std::vector<EagerTensor>& leaves,
                                    std::size_t batch) {
  std::vector<EagerTensor> r(leaves);
  const auto& ctx = leaves[0].context();
  auto positive = [](const EagerTensor& t) { return t.square().add_scalar(0.5); };
  for (std::size_t i = 0; i < p.code.size(); ++i) {
    const instruction& in = p.code[i];
    const EagerTensor& a = r[in.a];
    const EagerTensor& b = r[in.b];
    const Shape out_shape = run_shape(p, leaves.size() + i, batch);
    EagerTensor v = a;
    switch (in.op) {
      case op_code::add:
        v = a.add(b);
        break;
      case op_code::sub:
        v = a.sub(b);
        break;
      case op_code::mul:
        v = a.mul(b);
        break;
      case op_code::div:
        v = a.div(positive(b));
        break;
      case op_code::pow:
        v = positive(a).pow(b);
        break;
      case op_code::maximum:
        v = a.maximum(b);
        break;
      case op_code::minimum:
        v = a.minimum(b);
        break;
      case op_code::neg:
        v = a.neg();
        break;
      case op_code::abs:
        v = a.abs();
        break;
      case op_code::sign:
        v = a.sign();
        break;
      case op_code::exp:
        v = a.exp();
        break;
      case op_code::log:
        v = positive(a).log();
        break;
      case op_code::sin:
        v = a.sin();
        break;
      case op_code::cos:
        v = a.cos();
        break;
      case op_code::tanh:
        v = a.tanh();
        break;
      case op_code::sqrt:
        v = positive(a).sqrt();
        break;
      case op_code::rsqrt:
        v = positive(a).rsqrt();
        break;
      case op_code::expm1:
        v = a.expm1();
        break;
      case op_code::log1p:
        v = positive(a).log1p();
        break;
      case op_code::square:
        v = a.square();
        break;
      case op_code::sigmoid:
        v = a.sigmoid();
        break;
      case op_code::scale:
        v = a.scale(in.number);
        break;
      case op_code::add_scalar:
        v = a.add_scalar(in.number);
        break;
      case op_code::rsub_scalar:
        v = a.rsub_scalar(in.number);
        break;
      case op_code::rdiv_scalar:
        v = positive(a).rdiv_scalar(in.number);
        break;
      case op_code::reduce_sum:
        v = in.all_axes ? a.reduce_sum() : a.reduce_sum(in.axes);
        break;
      case op_code::reduce_prod:
        v = in.all_axes ? a.reduce_prod() : a.reduce_prod(in.axes);
        break;
      case op_code::reduce_max:
        v = in.all_axes ? a.reduce_max() : a.reduce_max(in.axes);
        break;
      case op_code::reduce_min:
        v = in.all_axes ? a.reduce_min() : a.reduce_min(in.axes);
        break;
      case op_code::reduce_mean:
        v = in.all_axes ? a.reduce_mean() : a.reduce_mean(in.axes);
        break;
      case op_code::reshape_merge:
      case op_code::reshape_split:
        v = a.reshape(out_shape);
        break;
      case op_code::transpose: {
        Axes perm = in.axes;
        if (batch != 0 && p.batched[in.a]) perm.push_back(perm.size());  // the batch axis stays last
        v = a.transpose(perm);
        break;
      }
      case op_code::matmul: {
        const std::size_t k = p.shapes[in.a][1];
        v = a.matmul(ctx->constant_from(Tensor::from_vec_col_major<double>({k, 2}, in.matrix)));
        break;
      }
      case op_code::broadcast_to:
        v = a.broadcast_to(out_shape);
        break;
      case op_code::sum_to:
        v = a.sum_to(out_shape);
        break;
    }
    r.push_back(v);
  }
  return r;
}

// The loss sum(output * weights) (the weights broadcast along the batch axis).
inline EagerTensor loss_of(const program& p, const EagerTensor& output, std::size_t batch) {
  const auto& ctx = output.context();
  const EagerTensor w = ctx->constant_from(Tensor::from_vec_col_major<double>(p.shapes.back(), p.weights));
  if (batch != 0 && p.batched.back()) {
    Shape with_axis = p.shapes.back();
    with_axis.push_back(1);
    return output.mul(w.reshape(with_axis)).reduce_sum();
  }
  return output.mul(w).reduce_sum();
}

// Which registers the output depends on (the output included).
inline std::vector<bool> used_registers(const program& p) {
  const std::size_t L = p.leaf_shapes.size();
  std::vector<bool> used(L + p.code.size(), false);
  used.back() = true;
  for (std::size_t i = p.code.size(); i-- > 0;) {
    if (!used[L + i]) continue;
    const instruction& in = p.code[i];
    used[in.a] = true;
    const bool binary = in.op <= op_code::minimum;
    if (binary) used[in.b] = true;
  }
  return used;
}

// The program's first `n` instructions, output = the last of them, with the weights fitted
// (deterministically) to its shape.
inline program prefix(const program& p, std::size_t n) {
  program q = p;
  q.code.resize(n);
  q.shapes.resize(p.leaf_shapes.size() + n);
  q.batched.resize(p.leaf_shapes.size() + n);
  q.weights.assign(checked_shape_size(q.shapes.back()).value(), 0.0);
  for (std::size_t i = 0; i < q.weights.size(); ++i) q.weights[i] = 0.25 + 0.125 * static_cast<double>(i % 7);
  return q;
}

}  // namespace tenferro::test
