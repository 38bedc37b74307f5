// einsum on eager tensors: the first extension family (ad/extension.hpp), installed into a runtime
// the first time it is used there.
//
//   auto c = tenferro::einsum("ij,jk->ik", {a, b});    // a matrix product
//   auto t = tenferro::einsum("ii", {a});              // the trace (implicit output: none left)
//   auto d = tenferro::einsum("...ij,...j->...i", {m, v});  // batched, broadcasting the ellipsis
//
// Subscripts are NumPy's: a term of letters per operand, "..." for the axes not named (axes of
// extent 1 broadcast), a label repeated within a term takes that term's diagonal, labels used in no
// other term and not in the output are summed first, and without "->" the output is the ellipsis
// and then the letters used once, in alphabetical order (upper case first). Dtypes are promoted.
// The contractions run as dot_general in the order the greedy cost model of ad/einsum_spec.hpp
// picks, cached per runtime by subscripts and shapes (cache_stats().extensions). The vjp for an
// operand and the jvp are einsums again (so they differentiate again). Errors name the subscripts
// and the position (Validation), or the label, operands and extents (ShapeMismatch).
#pragma once

#include <tenferro/ad/tensor.hpp>

#include <initializer_list>
#include <memory>
#include <span>
#include <string_view>

namespace tenferro {

inline constexpr std::string_view einsum_family = "tenferro.einsum";

EagerTensor einsum(std::string_view subscripts, std::span<const EagerTensor> operands);
inline EagerTensor einsum(std::string_view subscripts, std::initializer_list<EagerTensor> operands) {
  return einsum(subscripts, std::span<const EagerTensor>(operands.begin(), operands.size()));
}

// The module einsum installs (one per process): the op "einsum" of family "tenferro.einsum" and
// its cache "paths".
std::shared_ptr<ExtensionModule> einsum_module();

}  // namespace tenferro
