// The text of a random program (random_program.hpp): C++ for a repro, JSON for
// scripts/differential_torch.py.
#pragma once

#include "random_program.hpp"

#include <ostream>
#include <sstream>
#include <string>
#include <vector>

namespace tenferro::test {

// The program as a C++ function body: a repro that needs only <tenferro/eager.hpp>.
inline std::string to_cpp(const program& p) {
  std::ostringstream os;
  os.precision(17);
  auto shape = [](const Shape& s) {
    std::string out = "{";
    for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "}";
  };
  auto list = [&](const std::vector<double>& v) {
    std::ostringstream l;
    l.precision(17);
    l << "{";
    for (std::size_t i = 0; i < v.size(); ++i) l << (i ? ", " : "") << v[i];
    l << "}";
    return l.str();
  };
  os << "// random program, seed " << p.seed << "\n";
  os << "auto ctx = tenferro::EagerRuntime::create();\n";
  os << "auto positive = [](const tenferro::EagerTensor& t) { return t.square().add_scalar(0.5); };\n";
  const std::size_t L = p.leaf_shapes.size();
  for (std::size_t k = 0; k < L; ++k) {
    os << "auto r" << k << " = ctx->variable_from(tenferro::Tensor::from_vec_col_major<double>("
       << shape(p.leaf_shapes[k]) << ", " << list(p.leaf_values[k]) << "));\n";
  }
  for (std::size_t i = 0; i < p.code.size(); ++i) {
    const instruction& in = p.code[i];
    const std::string a = "r" + std::to_string(in.a), b = "r" + std::to_string(in.b);
    const std::string name = op_names[static_cast<int>(in.op)];
    os << "auto r" << L + i << " = ";
    switch (in.op) {
      case op_code::div:
        os << a << ".div(positive(" << b << "))";
        break;
      case op_code::pow:
        os << "positive(" << a << ").pow(" << b << ")";
        break;
      case op_code::add:
      case op_code::sub:
      case op_code::mul:
      case op_code::maximum:
      case op_code::minimum:
        os << a << "." << name << "(" << b << ")";
        break;
      case op_code::log:
      case op_code::sqrt:
      case op_code::rsqrt:
      case op_code::log1p:
        os << "positive(" << a << ")." << name << "()";
        break;
      case op_code::scale:
      case op_code::add_scalar:
      case op_code::rsub_scalar:
        os << a << "." << name << "(" << in.number << ")";
        break;
      case op_code::rdiv_scalar:
        os << "positive(" << a << ").rdiv_scalar(" << in.number << ")";
        break;
      case op_code::reduce_sum:
      case op_code::reduce_prod:
      case op_code::reduce_max:
      case op_code::reduce_min:
      case op_code::reduce_mean: {
        os << a << "." << name << "(";
        if (!in.all_axes) os << shape(in.axes);
        os << ")";
        break;
      }
      case op_code::reshape_merge:
      case op_code::reshape_split:
        os << a << ".reshape(" << shape(p.shapes[L + i]) << ")";
        break;
      case op_code::transpose:
        os << a << ".transpose(" << shape(in.axes) << ")";
        break;
      case op_code::matmul:
        os << a << ".matmul(ctx->constant_from(tenferro::Tensor::from_vec_col_major<double>("
           << shape({p.shapes[in.a][1], 2}) << ", " << list(in.matrix) << ")))";
        break;
      case op_code::broadcast_to:
        os << a << ".broadcast_to(" << shape(p.base) << ")";
        break;
      case op_code::sum_to:
        os << a << ".sum_to(" << shape(p.leaf_shapes[in.leaf]) << ")";
        break;
      default:
        os << a << "." << name << "()";
        break;
    }
    os << ";\n";
  }
  os << "auto loss = r" << L + p.code.size() - 1
     << ".mul(ctx->constant_from(tenferro::Tensor::from_vec_col_major<double>(" << shape(p.shapes.back())
     << ", " << list(p.weights) << "))).reduce_sum();\n";
  os << "loss.backward();\n";
  return os.str();
}

// One JSON line: the program, with the loss and the leaves' gradients tenferro computed.
inline void write_json(std::ostream& os, const program& p, double loss,
                       const std::vector<std::vector<double>>& grads) {
  os.precision(17);
  auto list = [&](const auto& v) {
    os << "[";
    for (std::size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
    os << "]";
  };
  os << "{\"seed\":" << p.seed << ",\"base\":";
  list(p.base);
  os << ",\"leaves\":[";
  for (std::size_t k = 0; k < p.leaf_shapes.size(); ++k) {
    os << (k ? "," : "") << "{\"shape\":";
    list(p.leaf_shapes[k]);
    os << ",\"values\":";
    list(p.leaf_values[k]);
    os << "}";
  }
  os << "],\"code\":[";
  for (std::size_t i = 0; i < p.code.size(); ++i) {
    const auto& in = p.code[i];
    os << (i ? "," : "") << "{\"op\":\"" << op_names[static_cast<int>(in.op)] << "\",\"a\":" << in.a
       << ",\"b\":" << in.b << ",\"number\":" << in.number
       << ",\"all_axes\":" << (in.all_axes ? "true" : "false") << ",\"axes\":";
    list(in.axes);
    os << ",\"leaf\":" << in.leaf << ",\"matrix\":";
    list(in.matrix);
    os << ",\"shape\":";
    list(p.shapes[p.leaf_shapes.size() + i]);
    os << "}";
  }
  os << "],\"weights\":";
  list(p.weights);
  os << ",\"loss\":" << loss << ",\"grads\":[";
  for (std::size_t k = 0; k < grads.size(); ++k) {
    os << (k ? "," : "");
    list(grads[k]);
  }
  os << "]}\n";
}

}  // namespace tenferro::test
