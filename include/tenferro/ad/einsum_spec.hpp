// What an einsum computes, apart from tensors: its subscripts parsed into labels (einsum_spec),
// checked against the operands' shapes, and the order of its pairwise contractions, chosen
// greedily by a cost model (einsum_path).
//
// Labels are integers: the letters a-z, A-Z are 0-51; the axes an ellipsis stands for are 1000 +
// their position counted from the right of the broadcast ellipsis, so the same position of every
// operand's ellipsis is one label; labels from 2000 on are made by the derivative rules.
#pragma once

#include <tenferro/core/error.hpp>
#include <tenferro/core/shape.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tenferro::detail::einsum {

using labels = std::vector<std::int64_t>;

inline constexpr std::int64_t ellipsis_label = 1000;
inline constexpr std::int64_t fresh_label = 2000;
inline constexpr std::string_view op_name = "einsum";

struct einsum_spec {
  std::vector<labels> inputs;
  labels output;
  friend bool operator==(const einsum_spec&, const einsum_spec&) = default;
};

inline bool is_broadcastable(std::int64_t label) { return label >= ellipsis_label && label < fresh_label; }

// The text of a label, for messages: its letter, "...[k]", or "#n" for a rule's label.
inline std::string label_text(std::int64_t l) {
  if (l < 26) return std::string(1, static_cast<char>('a' + l));
  if (l < 52) return std::string(1, static_cast<char>('A' + (l - 26)));
  if (is_broadcastable(l)) return "...[" + std::to_string(l - ellipsis_label) + "]";
  return "#" + std::to_string(l);
}

[[noreturn]] inline void bad_subscripts(std::string_view subscripts, std::size_t position,
                                        std::string_view why) {
  throw_error(ErrorKind::Validation, op_name,
              {"subscripts '", subscripts, "': ", why, " at position ", position});
}

// The subscripts parsed for operands of these ranks (spaces ignored). The implicit output (no
// "->") is the ellipsis, then the letters used once, in alphabetical order (upper case first).
// Throws Validation naming the subscripts and the position of what is wrong.
inline einsum_spec parse(std::string_view subscripts, std::span<const std::size_t> ranks) {
  struct term {
    std::vector<std::int64_t> letters_before, letters_after;  // around the ellipsis
    bool ellipsis = false;
    std::size_t start = 0;
  };
  std::vector<term> terms(1);
  std::optional<term> out;
  term* cur = &terms.back();
  for (std::size_t i = 0; i < subscripts.size(); ++i) {
    const char c = subscripts[i];
    if (c == ' ') continue;
    if (c == ',') {
      if (out) bad_subscripts(subscripts, i, "a ',' in the output");
      terms.emplace_back().start = i + 1;
      cur = &terms.back();
    } else if (c == '-') {
      if (i + 1 >= subscripts.size() || subscripts[i + 1] != '>')
        bad_subscripts(subscripts, i, "a '-' without '>'");
      if (out) bad_subscripts(subscripts, i, "a second '->'");
      out.emplace().start = i + 2;
      cur = &*out;
      ++i;
    } else if (c == '.') {
      if (subscripts.substr(i, 3) != "...") bad_subscripts(subscripts, i, "a '.' outside an ellipsis '...'");
      if (cur->ellipsis) bad_subscripts(subscripts, i, "a second ellipsis in one term");
      cur->ellipsis = true;
      i += 2;
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      const std::int64_t l = c >= 'a' ? c - 'a' : 26 + (c - 'A');
      (cur->ellipsis ? cur->letters_after : cur->letters_before).push_back(l);
    } else {
      bad_subscripts(subscripts, i,
                     std::string("the character '") + c + "', which is not a letter, ',', '->' or '...'");
    }
  }
  if (terms.size() != ranks.size()) {
    throw_error(
        ErrorKind::Validation, op_name,
        {"subscripts '", subscripts, "' name ", terms.size(), " operands, ", ranks.size(), " were given"});
  }
  einsum_spec spec;
  std::size_t broadcast_rank = 0;
  for (std::size_t k = 0; k < terms.size(); ++k) {
    const term& t = terms[k];
    const std::size_t named = t.letters_before.size() + t.letters_after.size();
    if (named > ranks[k] || (!t.ellipsis && named != ranks[k])) {
      throw_error(ErrorKind::Validation, op_name,
                  {"subscripts '", subscripts, "': the term at position ", t.start, " names ", named,
                   " axes, operand ", k, " has rank ", ranks[k]});
    }
    const std::size_t r = t.ellipsis ? ranks[k] - named : 0;
    broadcast_rank = std::max(broadcast_rank, r);
    labels ls = t.letters_before;
    for (std::size_t d = 0; d < r; ++d) ls.push_back(ellipsis_label + static_cast<std::int64_t>(r - 1 - d));
    ls.insert(ls.end(), t.letters_after.begin(), t.letters_after.end());
    spec.inputs.push_back(std::move(ls));
  }
  auto ellipsis_labels = [&] {
    labels ls;
    for (std::size_t d = 0; d < broadcast_rank; ++d) {
      ls.push_back(ellipsis_label + static_cast<std::int64_t>(broadcast_rank - 1 - d));
    }
    return ls;
  };
  if (out) {
    spec.output = out->letters_before;
    if (out->ellipsis) {
      const labels e = ellipsis_labels();
      spec.output.insert(spec.output.end(), e.begin(), e.end());
    }
    spec.output.insert(spec.output.end(), out->letters_after.begin(), out->letters_after.end());
    for (std::size_t i = 0; i < spec.output.size(); ++i) {
      const std::int64_t l = spec.output[i];
      if (std::ranges::count(spec.output, l) > 1)
        bad_subscripts(subscripts, out->start, "a label repeated in the output");
      const bool used =
          std::ranges::any_of(spec.inputs, [&](const labels& in) { return std::ranges::count(in, l); });
      if (!used) {
        bad_subscripts(subscripts, out->start,
                       "the output label '" + label_text(l) + "', which no operand has,");
      }
    }
  } else {
    spec.output = ellipsis_labels();
    // Character order: 'A'-'Z' (labels 26-51) before 'a'-'z' (0-25).
    for (const std::int64_t l : {26, 0}) {
      for (std::int64_t c = l; c < l + 26; ++c) {
        std::size_t uses = 0;
        for (const labels& in : spec.inputs) uses += static_cast<std::size_t>(std::ranges::count(in, c));
        if (uses == 1) spec.output.push_back(c);
      }
    }
  }
  return spec;
}

// The extent of every label over the operands' shapes: equal wherever a label appears, except
// that an ellipsis axis of extent 1 broadcasts. Throws ShapeMismatch naming the label, both
// operands and axes, and both extents.
inline std::vector<std::pair<std::int64_t, std::size_t>> label_extents(const einsum_spec& spec,
                                                                       std::span<const Shape> shapes) {
  std::vector<std::pair<std::int64_t, std::size_t>> ext;   // label -> extent
  std::vector<std::pair<std::size_t, std::size_t>> where;  // where each extent was read: operand, axis
  for (std::size_t k = 0; k < spec.inputs.size(); ++k) {
    for (std::size_t a = 0; a < spec.inputs[k].size(); ++a) {
      const std::int64_t l = spec.inputs[k][a];
      const std::size_t n = shapes[k][a];
      auto it = std::ranges::find(ext, l, &std::pair<std::int64_t, std::size_t>::first);
      if (it == ext.end()) {
        ext.emplace_back(l, n);
        where.emplace_back(k, a);
        continue;
      }
      if (it->second == n || (is_broadcastable(l) && n == 1)) continue;
      auto& [k0, a0] = where[static_cast<std::size_t>(it - ext.begin())];
      if (is_broadcastable(l) && it->second == 1) {
        it->second = n, k0 = k, a0 = a;
        continue;
      }
      throw_error(ErrorKind::ShapeMismatch, op_name,
                  {"label '", label_text(l), "' has extent ", it->second, " at axis ", a0, " of operand ", k0,
                   " (shape ", shapes[k0], ") and ", n, " at axis ", a, " of operand ", k, " (shape ",
                   shapes[k], ")"});
    }
  }
  return ext;
}

// The extent of label l; throws Validation when no operand has it.
inline std::size_t extent_of(const std::vector<std::pair<std::int64_t, std::size_t>>& ext, std::int64_t l) {
  auto it = std::ranges::find(ext, l, &std::pair<std::int64_t, std::size_t>::first);
  if (it == ext.end())
    throw_error(ErrorKind::Validation, op_name, {"no operand has the label '", label_text(l), "'"});
  return it->second;
}

// The pairwise contractions, in order: each takes two operands of the current list (positions)
// off it and appends their product. Greedy, as opt_einsum's greedy strategy: at each step the
// pair whose product is smallest against its operands (size of the product minus theirs), ties
// broken by the multiply-adds it takes. `inputs`: each operand's distinct labels.
using einsum_path = std::vector<std::pair<std::size_t, std::size_t>>;

inline labels kept_labels(const std::vector<labels>& ops, std::size_t i, std::size_t j,
                          const labels& output) {
  labels kept;
  auto needed = [&](std::int64_t l) {
    if (std::ranges::count(output, l)) return true;
    for (std::size_t k = 0; k < ops.size(); ++k) {
      if (k != i && k != j && std::ranges::count(ops[k], l)) return true;
    }
    return false;
  };
  for (const labels* side : {&ops[i], &ops[j]}) {
    for (const std::int64_t l : *side) {
      if (!std::ranges::count(kept, l) && needed(l)) kept.push_back(l);
    }
  }
  return kept;
}

inline einsum_path greedy_path(std::vector<labels> ops, const labels& output,
                               const std::vector<std::pair<std::int64_t, std::size_t>>& ext) {
  auto size = [&](const labels& ls) {
    double n = 1;
    for (const std::int64_t l : ls) n *= static_cast<double>(extent_of(ext, l));
    return n;
  };
  einsum_path path;
  while (ops.size() > 1) {
    std::pair<double, double> best{std::numeric_limits<double>::infinity(), 0};
    std::pair<std::size_t, std::size_t> pick{0, 1};
    for (std::size_t i = 0; i < ops.size(); ++i) {
      for (std::size_t j = i + 1; j < ops.size(); ++j) {
        labels all = ops[i];
        for (const std::int64_t l : ops[j]) {
          if (!std::ranges::count(all, l)) all.push_back(l);
        }
        const labels kept = kept_labels(ops, i, j, output);
        const std::pair<double, double> cost{size(kept) - size(ops[i]) - size(ops[j]), size(all)};
        if (cost < best) best = cost, pick = {i, j};
      }
    }
    labels kept = kept_labels(ops, pick.first, pick.second, output);
    ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(pick.second));
    ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(pick.first));
    ops.push_back(std::move(kept));
    path.push_back(pick);
  }
  return path;
}

}  // namespace tenferro::detail::einsum
