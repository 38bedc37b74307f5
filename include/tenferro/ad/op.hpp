// The op table: every eager op is one entry (op_def), the one place that knows it — its name and
// arity, how it runs on plain Tensors, its derivative rules in both forms (kernels on Tensors,
// recorded ops on EagerTensors), and what deferred fusion may do with it. A tape node is an
// entry, the attributes of the call (OpAttributes: the numbers and integers that, with the
// inputs' dtypes and shapes, determine the result) and the inputs; its structural key (NodeKey)
// is hashable, comparable and printable.
//
// Entries are made by the op families (ad/ops/elementwise.hpp: every op of the compile-time layer
// over placeholders; ad/rules.hpp: reductions, layout, contractions, casts) and registered in
// op_table() under a unique name the first time they are used.
#pragma once

#include <tenferro/core/dtype.hpp>
#include <tenferro/core/shape.hpp>

#include <boost/container/small_vector.hpp>

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tenferro {

class Tensor;
class EagerTensor;

// What besides its inputs determines an op's result: numbers (the s of x * s, the constants of an
// applied expression) and integers (axes, a permutation, a target shape, a dtype). Numbers compare
// by their bits (so -0 and 0 differ and NaN equals itself), as a key must.
struct OpAttributes {
  boost::container::small_vector<double, 2> numbers;
  boost::container::small_vector<std::int64_t, 6> ints;

  friend bool operator==(const OpAttributes& a, const OpAttributes& b) noexcept {
    return a.numbers.size() == b.numbers.size() && a.ints == b.ints &&
           (a.numbers.empty() ||
            std::memcmp(a.numbers.data(), b.numbers.data(), a.numbers.size() * sizeof(double)) == 0);
  }
  std::size_t hash() const noexcept {
    std::size_t h = numbers.size() * 0x9e3779b97f4a7c15ULL + ints.size();
    auto mix = [&](std::uint64_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); };
    for (const double d : numbers) {
      std::uint64_t bits;
      std::memcpy(&bits, &d, sizeof bits);
      mix(bits);
    }
    for (const std::int64_t i : ints) mix(static_cast<std::uint64_t>(i));
    return h;
  }
  // "{numbers=[2.5], ints=[0, 2]}" (empty parts left out; "{}" when there are none).
  friend std::ostream& operator<<(std::ostream& os, const OpAttributes& a) {
    os << '{';
    if (!a.numbers.empty()) {
      os << "numbers=[";
      for (std::size_t i = 0; i < a.numbers.size(); ++i) os << (i ? ", " : "") << a.numbers[i];
      os << ']';
    }
    if (!a.ints.empty()) {
      os << (a.numbers.empty() ? "" : ", ") << "ints=[";
      for (std::size_t i = 0; i < a.ints.size(); ++i) os << (i ? ", " : "") << a.ints[i];
      os << ']';
    }
    return os << '}';
  }
};

namespace detail::ad {

class node;
struct tensor_state;
struct extension_entry;  // ad/extension.hpp

// What a pass of deferred fusion may treat specially (ad/deferred.hpp): the halves of a pair of ops
// (expr ops' `paired_with`: sin and cos of one input come out of one sincos); a product with a fill
// of 1 is its other factor.
enum class fusion_kind : std::uint8_t { other, sin, cos, mul, fill };

// out[i] = f(in[0][i], ...) for i < n over elements of one dtype; `numbers`: the op's attributes.
// Bit k of `broadcast`: input k is one element, in[k][0], read for every i.
using block_kernel = void (*)(void* out, const void* const* in, std::size_t n, const double* numbers,
                              std::uint32_t broadcast);

// One eager op. Rules receive the node (its inputs, attributes and saved values).
struct op_def {
  std::string name;   // unique in the op table
  std::string label;  // what nodes print and name() returns, when not the name (e.g. "apply")
  std::size_t arity = 0;

  // The dtype rule: the kernels take f32 and f64, also i32, i64 and bool (bool operands as
  // integers) when `integers`, and c32 and c64 when `complex`; the result's dtype is promote_types
  // of the inputs', or Bool for a `predicate` (comparisons, logical ops). Only floating and
  // complex results record nodes. (Set for the expression entries; structural entries check
  // dtypes in their kernels.)
  bool integers = false;
  bool complex = false;
  bool predicate = false;

  // Elementwise ops: the block kernel of deferred passes for a dtype (nullptr: none for it).
  block_kernel (*block)(DType) = nullptr;
  fusion_kind fusion = fusion_kind::other;

  // The derivative rules: cotangents of the inputs flagged in `needed` given the output's value
  // and cotangent; the output's tangent (tangents[k] nullptr: input k does not move). Each in
  // kernel form (Tensors, nothing recorded) and traced form (EagerTensors, recorded while
  // recording is on, so results can be differentiated again).
  std::vector<std::optional<Tensor>> (*vjp)(const node&, const Tensor& output, const Tensor& cotangent,
                                            const std::vector<bool>& needed) = nullptr;
  std::vector<std::optional<EagerTensor>> (*vjp_traced)(const node&, const EagerTensor& output,
                                                        const EagerTensor& cotangent,
                                                        const std::vector<bool>& needed) = nullptr;
  Tensor (*jvp)(const node&, const Tensor& output, std::span<const Tensor* const> tangents) = nullptr;
  EagerTensor (*jvp_traced)(const node&, const EagerTensor& output,
                            std::span<const EagerTensor* const> tangents) = nullptr;
  // True when backward() should run vjp_traced with recording off (large elementwise ops: their
  // rules are then deferred too and fuse across the sweep); nullptr: never.
  bool (*defers_vjp)(const node&, const tensor_state& output, const EagerTensor& cotangent) = nullptr;
  // An extension op's definition (its rules dispatch to it); nullptr for the built-in ops.
  const extension_entry* extension = nullptr;
};

// An entry's derivative rules: the static functions vjp, vjp_traced, jvp, jvp_traced and
// defers_vjp of R.
template <class R>
void set_rules(op_def& d) {
  d.vjp = &R::vjp;
  d.vjp_traced = &R::vjp_traced;
  d.jvp = &R::jvp;
  d.jvp_traced = &R::jvp_traced;
  d.defers_vjp = &R::defers_vjp;
}

// Every op_def, by name. An entry's name is unique: a second entry under a taken name is refused
// (families that make entries on demand look theirs up first).
class op_registry {
 public:
  // The entry `def` names, registered; the entry already registered under that name when there is
  // one and `existing_ok`, else nullptr.
  const op_def* add(std::unique_ptr<op_def> def, bool existing_ok) {
    const std::lock_guard lock(mutex_);
    auto [it, fresh] = by_name_.try_emplace(def->name);
    if (!fresh) return existing_ok ? it->second.get() : nullptr;
    it->second = std::move(def);
    return it->second.get();
  }
  const op_def* find(std::string_view name) const {
    const std::lock_guard lock(mutex_);
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : it->second.get();
  }
  std::vector<std::string> names() const {
    const std::lock_guard lock(mutex_);
    std::vector<std::string> out;
    for (const auto& [name, def] : by_name_) out.push_back(name);
    return out;
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::unique_ptr<op_def>, std::less<>> by_name_;
};

inline op_registry& op_table() {
  static op_registry table;
  return table;
}

// An entry made once per (family, name): make() the first time, registered; the same entry after.
template <class Make>
const op_def& entry(std::string_view name, Make&& make) {
  if (const op_def* def = op_table().find(name)) return *def;
  std::unique_ptr<op_def> def = std::forward<Make>(make)();
  def->name = std::string(name);
  return *op_table().add(std::move(def), true);
}

}  // namespace detail::ad

// The structural key of a recorded op: the op, its attributes, and its inputs' dtypes and shapes.
// Two nodes with equal keys compute the same function of their inputs' values (what the caches of
// derivative programs key on).
struct NodeKey {
  std::string_view op;     // the entry's unique name (entries live as long as the process)
  std::string_view label;  // what it prints as: the name, or e.g. "apply" for an applied expression
  OpAttributes attributes;
  boost::container::small_vector<DType, 2> dtypes;
  boost::container::small_vector<Shape, 2> shapes;

  friend bool operator==(const NodeKey&, const NodeKey&) = default;
  std::size_t hash() const noexcept {
    std::size_t h = std::hash<std::string_view>{}(op) ^ (attributes.hash() << 1);
    for (const DType d : dtypes) h = h * 31 + static_cast<std::size_t>(d);
    for (const Shape& s : shapes) {
      for (const std::size_t e : s) h = h * 1000003 + e;
      h = h * 31 + s.size();
    }
    return h;
  }
  // "mul{}(f64[3], f64[])", "reduce_sum{ints=[0]}(f32[2, 3])".
  friend std::ostream& operator<<(std::ostream& os, const NodeKey& k) {
    os << k.label << k.attributes << '(';
    for (std::size_t i = 0; i < k.dtypes.size(); ++i) {
      os << (i ? ", " : "") << dtype_name(k.dtypes[i]) << format_shape(k.shapes[i]);
    }
    return os << ')';
  }
};

}  // namespace tenferro

template <>
struct std::hash<tenferro::NodeKey> {
  std::size_t operator()(const tenferro::NodeKey& k) const noexcept { return k.hash(); }
};
