// DotGeneralConfig: which axes of two tensors a contraction sums over and which it batches, as in
// XLA's DotGeneral; and its plan, the shapes and axis orders every contraction kernel and rule
// works from (cpu/contract.hpp, ad/rules.hpp).
//
// The result's axes are the batch axes (in the order the config lists them), then the left
// operand's other axes, then the right operand's other axes (each in increasing order).
#pragma once

#include <tenferro/core/error.hpp>
#include <tenferro/core/shape.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace tenferro {

struct DotGeneralConfig {
  Axes lhs_contracting;  // summed, pairwise with rhs_contracting (equal extents)
  Axes rhs_contracting;
  Axes lhs_batch;  // kept, pairwise with rhs_batch (equal extents), first in the result
  Axes rhs_batch;

  friend bool operator==(const DotGeneralConfig&, const DotGeneralConfig&) = default;
};

namespace detail {

// A validated contraction: a = lhs, b = rhs.
struct contraction_plan {
  Shape result;
  Axes lhs_free, rhs_free;  // the axes neither contracted nor batched, increasing
  // The lhs as [free..., contracting..., batch...] and the rhs as [contracting..., free...,
  // batch...]: per batch index, an m x k and a k x n matrix.
  Axes lhs_order, rhs_order;
  std::size_t batch = 1, m = 1, n = 1, k = 1;
};

inline std::string format_axes(const Axes& axes) {
  std::string list = "[";
  for (std::size_t i = 0; i < axes.size(); ++i) list += (i ? ", " : "") + std::to_string(axes[i]);
  return list + "]";
}

// Throws Validation (an axis out of range or listed twice, lists of different lengths) or
// ShapeMismatch (paired axes of different extents), naming the op, the config's list and both
// shapes.
inline contraction_plan plan_contraction(std::string_view op, const Shape& a, const Shape& b,
                                         const DotGeneralConfig& c) {
  auto fail = [&](ErrorKind kind, const std::string& what) {
    throw Error(kind, std::string(op),
                what + " (lhs shape " + format_shape(a) + ", rhs shape " + format_shape(b) + ")");
  };
  if (c.lhs_contracting.size() != c.rhs_contracting.size()) {
    fail(ErrorKind::Validation, "lhs_contracting " + format_axes(c.lhs_contracting) +
                                    " and rhs_contracting " + format_axes(c.rhs_contracting) +
                                    " differ in length");
  }
  if (c.lhs_batch.size() != c.rhs_batch.size()) {
    fail(ErrorKind::Validation, "lhs_batch " + format_axes(c.lhs_batch) + " and rhs_batch " +
                                    format_axes(c.rhs_batch) + " differ in length");
  }
  // Marks each listed axis of one operand; the unmarked ones are its free axes.
  auto mark = [&](const Shape& s, const Axes& contracting, const Axes& batch, std::string_view side) {
    std::vector<bool> used(s.size(), false);
    for (const Axes* list : {&contracting, &batch}) {
      auto name = [&] {  // only when failing: no strings on the way of a valid config
        return std::string(side) + (list == &batch ? "_batch " : "_contracting ") + format_axes(*list);
      };
      for (const std::size_t axis : *list) {
        if (axis >= s.size()) {
          fail(ErrorKind::Validation, name() + ": axis " + std::to_string(axis) +
                                          " is out of range for rank " + std::to_string(s.size()));
        }
        if (used[axis])
          fail(ErrorKind::Validation, name() + ": axis " + std::to_string(axis) + " is used twice");
        used[axis] = true;
      }
    }
    Axes free;
    for (std::size_t d = 0; d < s.size(); ++d) {
      if (!used[d]) free.push_back(d);
    }
    return free;
  };
  contraction_plan p;
  p.lhs_free = mark(a, c.lhs_contracting, c.lhs_batch, "lhs");
  p.rhs_free = mark(b, c.rhs_contracting, c.rhs_batch, "rhs");
  auto pair = [&](const Axes& la, const Axes& ra, std::string_view what, std::size_t& product) {
    for (std::size_t i = 0; i < la.size(); ++i) {
      if (a[la[i]] != b[ra[i]]) {
        fail(ErrorKind::ShapeMismatch, std::string(what) + " axes lhs " + std::to_string(la[i]) +
                                           " (extent " + std::to_string(a[la[i]]) + ") and rhs " +
                                           std::to_string(ra[i]) + " (extent " + std::to_string(b[ra[i]]) +
                                           ") differ");
      }
      product *= a[la[i]];
    }
  };
  pair(c.lhs_contracting, c.rhs_contracting, "contracting", p.k);
  pair(c.lhs_batch, c.rhs_batch, "batch", p.batch);
  for (const std::size_t d : c.lhs_batch) p.result.push_back(a[d]);
  for (const std::size_t d : p.lhs_free) p.result.push_back(a[d]), p.m *= a[d];
  for (const std::size_t d : p.rhs_free) p.result.push_back(b[d]), p.n *= b[d];
  if (!checked_shape_size(p.result)) throw_shape_too_large(op, p.result);
  p.lhs_order = p.lhs_free;
  p.lhs_order.insert(p.lhs_order.end(), c.lhs_contracting.begin(), c.lhs_contracting.end());
  p.lhs_order.insert(p.lhs_order.end(), c.lhs_batch.begin(), c.lhs_batch.end());
  p.rhs_order = c.rhs_contracting;
  p.rhs_order.insert(p.rhs_order.end(), p.rhs_free.begin(), p.rhs_free.end());
  p.rhs_order.insert(p.rhs_order.end(), c.rhs_batch.begin(), c.rhs_batch.end());
  return p;
}

// NumPy's matmul as a contraction: each operand reshaped (a vector gains a unit axis: [k] is
// [1, k] on the left, [k, 1] on the right), broadcast over the batch axes (all but the last two,
// NumPy-style), contracted, and the result reshaped (the vectors' unit axes dropped).
struct matmul_plan {
  Shape lhs_reshape, lhs, rhs_reshape, rhs;
  DotGeneralConfig config;
  Shape result;
};

// Throws ShapeMismatch naming the op and both shapes: a rank-0 operand, inner extents that differ,
// batch axes that do not broadcast.
inline matmul_plan plan_matmul(std::string_view op, const Shape& a, const Shape& b) {
  auto fail = [&](const std::string& what) {
    throw Error(ErrorKind::ShapeMismatch, std::string(op),
                what + " (lhs shape " + format_shape(a) + ", rhs shape " + format_shape(b) + ")");
  };
  if (a.empty() || b.empty()) fail("needs operands of rank 1 or more");
  matmul_plan p;
  if (a.size() == 1 && b.size() == 1) {
    if (a[0] != b[0]) fail("the vectors' lengths differ");
    p.lhs_reshape = p.lhs = a, p.rhs_reshape = p.rhs = b;
    p.config = {{0}, {0}, {}, {}};
    return p;
  }
  p.lhs_reshape = a.size() == 1 ? Shape{1, a[0]} : a;
  p.rhs_reshape = b.size() == 1 ? Shape{b[0], 1} : b;
  const Shape& la = p.lhs_reshape;
  const Shape& lb = p.rhs_reshape;
  const std::size_t m = la[la.size() - 2], k = la.back(), n = lb.back();
  if (lb[lb.size() - 2] != k) {
    fail("the lhs's last extent " + std::to_string(k) + " differs from the rhs's second-to-last extent " +
         std::to_string(lb[lb.size() - 2]));
  }
  const auto batch = broadcast_shapes(std::span(la).first(la.size() - 2), std::span(lb).first(lb.size() - 2));
  if (!batch) fail("the batch axes (all but the last two) do not broadcast");
  const std::size_t nb = batch->size();
  p.lhs = p.rhs = *batch;
  p.lhs.insert(p.lhs.end(), {m, k});
  p.rhs.insert(p.rhs.end(), {k, n});
  for (std::size_t d = 0; d < nb; ++d) p.config.lhs_batch.push_back(d), p.config.rhs_batch.push_back(d);
  p.config.lhs_contracting = {nb + 1};
  p.config.rhs_contracting = {nb};
  p.result = *batch;
  if (a.size() > 1) p.result.push_back(m);
  if (b.size() > 1) p.result.push_back(n);
  return p;
}

}  // namespace detail
}  // namespace tenferro
