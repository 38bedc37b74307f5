// The general path for inputs the fused loop cannot read as they lie (another shape that
// broadcasts, a strided view, another element type): read chunk by chunk, each chunk gathered
// into a chunk of scratch (in the first-level cache) just before the loop reads it, so no copy of
// the broadcast shape is ever made; and the sum of gradient fields back over broadcast axes.
#pragma once

#include <tenferro/core/detail/array.hpp>
#include <tenferro/core/detail/xtensor.hpp>
#include <tenferro/core/shape.hpp>
#include <tenferro/expr/eval/fused_loop.hpp>
#include <tenferro/expr/eval/kernel.hpp>
#include <tenferro/expr/ops/binary.hpp>
#include <tenferro/expr/ops/reduce.hpp>

#include <algorithm>
#include <type_traits>
#include <vector>

namespace tenferro::expr::detail {

using tenferro::column_major_strides;

// Strides of an array of `shape` (right-aligned inside `target`, NumPy style) seen from `target`:
// 0 on axes it lacks or where its extent is 1.
inline std::vector<std::ptrdiff_t> broadcast_strides(const Shape& shape,
                                                     const std::vector<std::ptrdiff_t>& own,
                                                     const Shape& target) {
  std::vector<std::ptrdiff_t> s(target.size(), 0);
  const std::size_t lead = target.size() - shape.size();
  for (std::size_t d = 0; d < shape.size(); ++d) s[lead + d] = shape[d] == 1 ? 0 : own[d];
  return s;
}

// Axes of an element walk: `extents` (column-major) and the `strides` of what is walked, with
// axes of extent 1 dropped and neighbours walked contiguously merged, so the innermost run is as
// long as the layout allows (a transposed matrix: one column; a row broadcast down: the row).
struct merged_axes {
  Shape extents;
  std::vector<std::ptrdiff_t> strides;

  merged_axes() = default;
  merged_axes(const Shape& shape, const std::vector<std::ptrdiff_t>& walked) {
    for (std::size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] == 1) continue;
      if (!extents.empty() && walked[d] == strides.back() * static_cast<std::ptrdiff_t>(extents.back())) {
        extents.back() *= shape[d];  // contiguous with the axis before (or both broadcast)
      } else {
        extents.push_back(shape[d]);
        strides.push_back(walked[d]);
      }
    }
    if (extents.empty()) {
      extents.push_back(1);
      strides.push_back(0);
    }
  }

  // f(k, offset, run) for each run along the innermost axis among elements [begin, begin +
  // count): elements k .. k + run - 1 lie at offset, offset + strides[0], ...
  template <class F>
  void for_each_run(std::size_t begin, std::size_t count, F&& f) const {
    if (count == 0) return;  // (an extent may be 0)
    const std::size_t rank = extents.size();
    std::size_t inline_index[8];  // the merged rank is rarely above 3
    std::vector<std::size_t> more(rank > 8 ? rank : 0);
    std::size_t* const index = rank > 8 ? more.data() : inline_index;
    std::ptrdiff_t offset = 0;
    std::size_t rest = begin;
    for (std::size_t d = 0; d < rank; ++d) {
      index[d] = rest % extents[d];
      rest /= extents[d];
      offset += static_cast<std::ptrdiff_t>(index[d]) * strides[d];
    }
    for (std::size_t k = 0; k < count;) {
      const std::size_t run = std::min(extents[0] - index[0], count - k);
      f(begin + k, offset, run);
      k += run;
      index[0] += run;
      offset += static_cast<std::ptrdiff_t>(run) * strides[0];
      for (std::size_t d = 0; d + 1 < rank && index[d] == extents[d]; ++d) {  // carry
        offset -= static_cast<std::ptrdiff_t>(extents[d]) * strides[d];
        index[d] = 0;
        ++index[d + 1];
        offset += strides[d + 1];
      }
    }
  }
};

// An input read through a gather: element i (column-major over the evaluation's shape) of it is
// data[offset of i along `axes`], converted to T.
template <class T>
struct gather_source {
  const void* data = nullptr;
  merged_axes axes;
  void (*fill)(const gather_source&, T* out, std::size_t begin, std::size_t count) = nullptr;
};

// Elements [begin, begin + count) of a gather into out, run by run: a copy (stride 1, same
// type: memmove) or a strided loop (a fill for stride 0).
template <class T, class S>
void gather_range(const gather_source<T>& g, T* out, std::size_t begin, std::size_t count) {
  const S* src = static_cast<const S*>(g.data);
  const std::ptrdiff_t step = g.axes.strides[0];
  g.axes.for_each_run(begin, count, [&](std::size_t k, std::ptrdiff_t offset, std::size_t run) {
    const S* p = src + offset;
    T* o = out + (k - begin);
    if (step == 1) {
      if constexpr (std::is_same_v<S, T>) {
        std::copy(p, p + run, o);
      } else {
        for (std::size_t j = 0; j < run; ++j) o[j] = static_cast<T>(p[j]);
      }
    } else {  // a fill (stride 0) or a strided walk
      for (std::size_t j = 0; j < run; ++j) o[j] = static_cast<T>(p[static_cast<std::ptrdiff_t>(j) * step]);
    }
  });
}

// The gather of container c (element type S) broadcast to `target`.
template <class T, class C>
gather_source<T> make_gather(const C& c, const Shape& target) {
  using S = typename std::remove_cvref_t<C>::value_type;
  const Shape shape(c.shape().begin(), c.shape().end());
  const std::vector<std::ptrdiff_t> own(c.strides().begin(), c.strides().end());
  return {c.data(), merged_axes(target, broadcast_strides(shape, own, target)), &gather_range<T, S>};
}

template <class Leaf>
bool gathered(const Leaf& leaf) {
  if constexpr (requires { leaf.gather; }) {
    return leaf.gather != nullptr;
  } else {
    return false;
  }
}

// A leaf for the chunk of `count` elements from element `base`, whose element 0 is the chunk's
// first: a gathered leaf is filled into `buffer` (room for a chunk), an array leaf is moved on, a
// broadcast or scalar leaf is as it is.
template <class Leaf, class T>
Leaf chunk_of(const Leaf& leaf, std::size_t base, std::size_t count, T* buffer) {
  if constexpr (std::is_same_v<Leaf, array_leaf<T>>) {
    if (leaf.gather != nullptr) {
      leaf.gather->fill(*leaf.gather, buffer, base, count);
      return array_leaf<T>{buffer};
    }
    if (leaf.broadcast()) return leaf;
    return array_leaf<T>{leaf.data + base};
  } else {
    (void)base, (void)count, (void)buffer;
    return leaf;
  }
}

// The sum of n contiguous elements, in an order fixed by n alone.
template <class T>
T chunk_sum(const T* p, std::size_t n) {
  using B = xsimd::batch<T>;
  constexpr std::size_t W = B::size;
  B a(T(0)), b(T(0));
  std::size_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    a += B::load_unaligned(p + i);
    b += B::load_unaligned(p + i + W);
  }
  T total = horizontal<ops::sum>(a + b);
  for (; i < n; ++i) total = ops::add::scalar(total, p[i]);
  return total;
}

// The adjoint of broadcasting: sums a field of the broadcast shape back to `shape`, run by run
// (a run along a broadcast axis is summed, then added; otherwise added elementwise).
template <class T>
column_major_array<T> reduce_to_shape(const column_major_array<T>& field, const Shape& shape) {
  const Shape target(field.shape().begin(), field.shape().end());
  auto out = tenferro::detail::new_array<T>("sum over broadcast axes", shape);
  std::fill(out.storage().begin(), out.storage().end(), T(0));
  const T* src = field.data();
  T* dst = out.data();
  const merged_axes axes(target, broadcast_strides(shape, column_major_strides(shape), target));
  const std::ptrdiff_t step = axes.strides[0];
  axes.for_each_run(0, field.size(), [&](std::size_t k, std::ptrdiff_t offset, std::size_t run) {
    if (step == 0) {
      dst[offset] = ops::add::scalar(dst[offset], chunk_sum(src + k, run));
    } else {
      for (std::size_t j = 0; j < run; ++j) {
        T& d = dst[offset + static_cast<std::ptrdiff_t>(j) * step];
        d = ops::add::scalar(d, src[k + j]);
      }
    }
  });
  return out;
}

}  // namespace tenferro::expr::detail
