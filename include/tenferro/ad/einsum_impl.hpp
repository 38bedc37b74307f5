// einsum's definitions (ad/einsum.hpp), compiled once with the runtime: the op's attributes (its
// parsed subscripts), its forward kernel on Tensors, its rules, and its module.
#pragma once

#include <tenferro/ad/einsum.hpp>
#include <tenferro/ad/einsum_spec.hpp>
#include <tenferro/ad/record.hpp>
#include <tenferro/core/detail/config.hpp>
#include <tenferro/cpu/assemble.hpp>
#include <tenferro/cpu/contract.hpp>
#include <tenferro/cpu/layout.hpp>
#include <tenferro/cpu/reduce.hpp>

#include <algorithm>
#include <charconv>
#include <string>

namespace tenferro {

namespace detail::einsum {

inline constexpr std::string_view path_cache = "paths";

inline bool contains(const labels& ls, std::int64_t l) { return std::ranges::find(ls, l) != ls.end(); }

// ints: the number of operands, then each operand's labels and the output's, each after its length.
inline OpAttributes encode(const einsum_spec& spec) {
  OpAttributes a;
  a.ints.push_back(static_cast<std::int64_t>(spec.inputs.size()));
  for (const labels* ls : [&] {
         std::vector<const labels*> all;
         for (const labels& in : spec.inputs) all.push_back(&in);
         all.push_back(&spec.output);
         return all;
       }()) {
    a.ints.push_back(static_cast<std::int64_t>(ls->size()));
    a.ints.insert(a.ints.end(), ls->begin(), ls->end());
  }
  return a;
}

inline einsum_spec decode(const OpAttributes& a) {
  auto bad = [] {
    throw_error(ErrorKind::Validation, op_name, {"malformed attributes (not made by einsum)"});
  };
  std::size_t at = 0;
  auto take = [&]() -> std::int64_t {
    if (at >= a.ints.size()) bad();
    return a.ints[at++];
  };
  auto take_labels = [&] {
    const std::int64_t n = take();
    if (n < 0) bad();
    labels ls;
    for (std::int64_t i = 0; i < n; ++i) ls.push_back(take());
    return ls;
  };
  einsum_spec spec;
  const std::int64_t operands = take();
  if (operands < 1) bad();
  for (std::int64_t k = 0; k < operands; ++k) spec.inputs.push_back(take_labels());
  spec.output = take_labels();
  if (at != a.ints.size()) bad();
  for (const std::int64_t l : spec.output) {  // what parse guarantees, for attributes made elsewhere
    const bool used = std::ranges::any_of(spec.inputs, [&](const labels& in) { return contains(in, l); });
    if (!used || std::ranges::count(spec.output, l) != 1) {
      throw_error(ErrorKind::Validation, op_name,
                  {"the output label '", label_text(l), "' is ", used ? "repeated" : "in no operand"});
    }
  }
  return spec;
}

// What the path cache is keyed by: the labels and the shapes.
inline std::string discriminator(const OpAttributes& a, std::span<const Shape> shapes) {
  std::string out;
  char digits[24];
  auto put = [&](auto v, char separator) {
    out.append(digits, std::to_chars(digits, digits + sizeof digits, v).ptr);
    out += separator;
  };
  for (const std::int64_t i : a.ints) put(i, ' ');
  for (const Shape& s : shapes) {
    out += '|';
    for (const std::size_t e : s) put(e, ',');
  }
  return out;
}

// The forward kernel: each operand with its diagonals taken, its broadcast axes dropped and its
// lone labels summed; then the pairwise contractions of the path; then the output's axis order.
inline Tensor forward(ExtensionExecutionContext& ctx, std::span<const Tensor> in,
                      const OpAttributes& attributes) {
  const einsum_spec spec = decode(attributes);
  std::vector<Shape> shapes;
  for (const Tensor& t : in) shapes.push_back(t.shape());
  if (spec.inputs.size() != in.size()) {
    throw_error(ErrorKind::Validation, op_name,
                {"the attributes name ", spec.inputs.size(), " operands, ", in.size(), " were given"});
  }
  for (std::size_t k = 0; k < in.size(); ++k) {
    if (spec.inputs[k].size() != shapes[k].size()) {
      throw_error(ErrorKind::Validation, op_name,
                  {"operand ", k, " (shape ", shapes[k], ") has rank ", shapes[k].size(),
                   ", its labels name ", spec.inputs[k].size(), " axes"});
    }
  }
  const auto ext = label_extents(spec, shapes);
  DType dtype = in[0].dtype();
  for (const Tensor& t : in) dtype = promote_types(dtype, t.dtype());

  std::vector<Tensor> ops;
  std::vector<labels> ls(in.size());
  for (std::size_t k = 0; k < in.size(); ++k) {  // diagonals and broadcast axes: one strided view
    const Tensor x = cpu::cast(in[k], dtype);
    const Strides st = x.strides();
    Shape shape;
    Strides strides;
    for (std::size_t a = 0; a < shapes[k].size(); ++a) {
      const std::int64_t l = spec.inputs[k][a];
      if (shapes[k][a] == 1 && extent_of(ext, l) != 1) continue;
      auto at = std::ranges::find(ls[k], l);
      if (at != ls[k].end()) {
        strides[static_cast<std::size_t>(at - ls[k].begin())] += st[a];
        continue;
      }
      ls[k].push_back(l);
      shape.push_back(shapes[k][a]);
      strides.push_back(st[a]);
    }
    ops.push_back(shape == shapes[k] ? x : x.as_strided(shape, strides, x.offset()));
  }
  for (std::size_t k = 0; k < ops.size(); ++k) {  // lone labels summed
    std::vector<bool> mask(ls[k].size(), false);
    labels kept;
    for (std::size_t a = 0; a < ls[k].size(); ++a) {
      const std::int64_t l = ls[k][a];
      bool lone = !contains(spec.output, l);
      for (std::size_t j = 0; lone && j < ops.size(); ++j) lone = j == k || !contains(ls[j], l);
      mask[a] = lone;
      if (!lone) kept.push_back(l);
    }
    if (kept.size() != ls[k].size()) {
      ops[k] = cpu::reduce(cpu::Reduce::sum, ops[k], mask, op_name);
      ls[k] = std::move(kept);
    }
  }

  const auto path = ctx.caches().get_or_insert<einsum_path>(
      ExtensionCacheKey{std::string(einsum_family), std::string(path_cache),
                        discriminator(attributes, shapes)},
      [&] { return greedy_path(ls, spec.output, ext); },
      sizeof(einsum_path) + (ops.size() * sizeof(std::pair<std::size_t, std::size_t>)));
  for (const auto& [i, j] : *path) {
    const labels kept = kept_labels(ls, i, j, spec.output);
    DotGeneralConfig c;
    labels batch, free_a, free_b;
    for (std::size_t a = 0; a < ls[i].size(); ++a) {
      const std::int64_t l = ls[i][a];
      auto b = std::ranges::find(ls[j], l);
      if (b == ls[j].end()) {
        free_a.push_back(l);
        continue;
      }
      const auto bi = static_cast<std::size_t>(b - ls[j].begin());
      (contains(kept, l) ? c.lhs_batch : c.lhs_contracting).push_back(a);
      (contains(kept, l) ? c.rhs_batch : c.rhs_contracting).push_back(bi);
      if (contains(kept, l)) batch.push_back(l);
    }
    for (const std::int64_t l : ls[j]) {
      if (!contains(ls[i], l)) free_b.push_back(l);
    }
    Tensor product = cpu::dot_general(ops[i], ops[j], c, false, false, op_name);
    batch.insert(batch.end(), free_a.begin(), free_a.end());
    batch.insert(batch.end(), free_b.begin(), free_b.end());
    for (const std::size_t k : {j, i}) {
      ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(k));
      ls.erase(ls.begin() + static_cast<std::ptrdiff_t>(k));
    }
    ops.push_back(std::move(product));
    ls.push_back(std::move(batch));
  }
  Axes perm;
  for (const std::int64_t l : spec.output) {
    perm.push_back(static_cast<std::size_t>(std::ranges::find(ls[0], l) - ls[0].begin()));
  }
  return cpu::transpose(ops[0], perm, op_name);
}

// einsum of a parsed spec, through the runtime's extension (installed on first use).
inline EagerTensor run(const einsum_spec& spec, std::span<const EagerTensor> operands) {
  const auto& rt = ad::common_runtime(op_name, operands);
  rt->install_extension_module(einsum_module());
  return rt->call_extension(einsum_family, "einsum", operands, encode(spec));
}

// The cotangent of operand k: the einsum of the output's cotangent with the other operands
// (conjugated, PyTorch's convention) into k's labels. Where k's labels do not come out of that
// einsum as they are, constants are multiplied in: the identity over a repeated label's two axes
// (the cotangent of a diagonal sits on the diagonal), ones over a label summed alone or broadcast.
inline std::vector<std::optional<EagerTensor>> vjp(const ExtensionCall& call, const EagerTensor& cotangent,
                                                   const std::vector<bool>& needed) {
  const einsum_spec spec = decode(call.attributes);
  std::vector<Shape> shapes;
  for (const EagerTensor& t : call.inputs) shapes.push_back(t.shape());
  const auto ext = label_extents(spec, shapes);
  const auto& rt = call.output.context();
  std::vector<std::optional<EagerTensor>> out(call.inputs.size());
  for (std::size_t k = 0; k < call.inputs.size(); ++k) {
    if (!needed[k]) continue;
    const EagerTensor& x = call.inputs[k];
    einsum_spec g;
    std::vector<EagerTensor> ops;
    g.inputs.push_back(spec.output);
    ops.push_back(cotangent);
    for (std::size_t j = 0; j < call.inputs.size(); ++j) {
      if (j == k) continue;
      g.inputs.push_back(spec.inputs[j]);
      ops.push_back(is_complex(call.inputs[j].dtype()) ? call.inputs[j].conj() : call.inputs[j]);
    }
    auto constant = [&](Tensor t, labels l) {
      ops.push_back(EagerTensor::from_tensor_in(cpu::cast(std::move(t), x.dtype()), rt));
      g.inputs.push_back(std::move(l));
    };
    // New labels above every label in use (a vjp of a vjp has labels from fresh_label on already).
    std::int64_t fresh = fresh_label;
    for (const std::int64_t l : spec.output) fresh = std::max(fresh, l + 1);
    for (const labels& ls : spec.inputs) {
      for (const std::int64_t l : ls) fresh = std::max(fresh, l + 1);
    }
    labels seen;
    for (std::size_t a = 0; a < shapes[k].size(); ++a) {
      const std::int64_t l = spec.inputs[k][a];
      const std::size_t n = shapes[k][a];
      if (contains(seen, l)) {  // a repeat: on the diagonal with its first axis
        constant(cpu::embed_diag(Tensor::ones({n}), n, n, op_name), {l, fresh});
        g.output.push_back(fresh++);
        continue;
      }
      seen.push_back(l);
      if (n == 1 && extent_of(ext, l) != 1) {  // broadcast: summed, then an axis of extent 1
        constant(Tensor::ones({1}), {fresh});
        g.output.push_back(fresh++);
        continue;
      }
      bool present = contains(spec.output, l);
      for (std::size_t j = 0; !present && j < shapes.size(); ++j) {
        for (std::size_t b = 0; j != k && b < shapes[j].size(); ++b)
          present |= spec.inputs[j][b] == l && shapes[j][b] == n;
      }
      if (!present) constant(Tensor::ones({n}), {l});  // summed alone: the cotangent spreads over it
      g.output.push_back(l);
    }
    EagerTensor r = run(g, ops);
    out[k] = r.dtype() == x.dtype() ? r : r.cast(x.dtype());
  }
  return out;
}

// The output's tangent: the sum over the moving operands of the einsum with its tangent in its place.
inline EagerTensor jvp(const ExtensionCall& call, std::span<const EagerTensor* const> tangents) {
  const einsum_spec spec = decode(call.attributes);
  std::optional<EagerTensor> sum;
  for (std::size_t k = 0; k < tangents.size(); ++k) {
    if (!tangents[k]) continue;
    std::vector<EagerTensor> ops(call.inputs.begin(), call.inputs.end());
    ops[k] = *tangents[k];
    EagerTensor term = run(spec, ops);
    sum = sum ? sum->add(term) : term;
  }
  if (!sum)
    return EagerTensor::from_tensor_in(Tensor::zeros(call.output.shape(), call.output.dtype()),
                                       call.output.context());
  return sum->dtype() == call.output.dtype() ? *sum : sum->cast(call.output.dtype());
}

class einsum_extension final : public ExtensionModule {
 public:
  std::string module_id() const override { return std::string(einsum_family); }
  void configure(ExtensionRegistrar& r) const override {
    r.add_op(ExtensionOp{std::string(einsum_family), "einsum", 0, &forward, ExtensionRules{&vjp, &jvp}});
    r.add_cache(std::string(einsum_family), std::string(path_cache));
  }
};

}  // namespace detail::einsum

TENFERRO_INLINE std::shared_ptr<ExtensionModule> einsum_module() {
  static const std::shared_ptr<ExtensionModule> module = std::make_shared<detail::einsum::einsum_extension>();
  return module;
}

TENFERRO_INLINE EagerTensor einsum(std::string_view subscripts, std::span<const EagerTensor> operands) {
  if (operands.empty()) throw_error(ErrorKind::InvalidArgument, "einsum", {"no operands were given"});
  std::vector<std::size_t> ranks;
  for (const EagerTensor& t : operands) ranks.push_back(t.shape().size());
  return detail::einsum::run(detail::einsum::parse(subscripts, ranks), operands);
}

}  // namespace tenferro
