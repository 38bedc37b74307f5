// gradcheck: a function of eager tensors' derivatives (the vjp and the jvp the runtime computes for
// it) against central finite differences, Jacobian entry by Jacobian entry.
//
//   auto report = tenferro::gradcheck(
//       [](const std::vector<EagerTensor>& x) { return (x[0] * x[1].sin()).reduce_sum(); }, {a, b});
//   if (!report) std::cerr << report << '\n';  // names the worst entry
//
// Convention (PyTorch's, as the runtime's): a complex input moves along its real and its imaginary
// part, and a complex output is read as its two parts, so every entry is a real number; the vjp
// of a real loss L is dL/dRe z + i dL/dIm z.
#pragma once

#include <tenferro/ad/tensor.hpp>

#include <cstddef>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace tenferro {

struct GradcheckOptions {
  // The central difference's step, (f(x + step e) - f(x - step e)) / (2 step).
  double step = 1e-6;
  // An entry passes when |analytic - numeric| <= atol + rtol |numeric| (an infinite one when both
  // are the same infinity, a NaN when both are NaN). 0 or less: by dtype, 1e-6 when
  // every differentiated input and the output are f64 or c64, 2e-3 when one is f32 or c32.
  double atol = 0;
  double rtol = 0;
  // Take the differences at the inputs converted to f64 / c64 (the function must accept them), so
  // an f32 function is checked against accurate numbers; false: in the inputs' own dtypes.
  bool wide_differences = true;
  bool check_vjp = true;
  bool check_jvp = true;
  // Also run vjp and jvp with recording off, where the runtime uses its rules' kernel form (the
  // recorded form runs while recording is on, as for grad of grad).
  bool kernel_rules = true;
};

// One Jacobian entry: d output[output_index] / d inputs[input][index], each side's real or
// imaginary part, as the transform computed it (analytic) and by differences (numeric).
struct GradcheckEntry {
  std::string transform;  // "vjp", "jvp", "vjp (kernel rules)", "jvp (kernel rules)"
  std::size_t input = 0;
  std::vector<std::size_t> index;
  bool input_imag = false;
  std::vector<std::size_t> output_index;
  bool output_imag = false;
  double analytic = 0;
  double numeric = 0;
  double excess = 0;  // |analytic - numeric| / (atol + rtol |numeric|); the entry passes at <= 1
  // Not empty when the transform gave a tensor of the wrong shape or dtype (then nothing of it is
  // compared): what it gave and what was expected.
  std::string malformed;
};

struct GradcheckReport {
  bool passed = true;       // (vacuously with 0 entries: no floating input element, or no check asked)
  std::size_t entries = 0;  // entries compared (over both transforms and both rule forms)
  GradcheckEntry worst;     // the entry with the largest excess
  explicit operator bool() const noexcept { return passed; }
  friend std::ostream& operator<<(std::ostream& os, const GradcheckReport& r) {
    os << "gradcheck " << (r.passed ? "passed" : "FAILED") << ": " << r.entries << " entries";
    if (r.entries == 0) return os;
    const GradcheckEntry& w = r.worst;
    if (!w.malformed.empty())
      return os << "; " << w.transform << " of input " << w.input << " " << w.malformed;
    auto part = [](bool imag) { return imag ? " (imaginary part)" : ""; };
    return os << "; worst: " << w.transform << ", input " << w.input << " element " << format_shape(w.index)
              << part(w.input_imag) << ", output element " << format_shape(w.output_index)
              << part(w.output_imag) << ": analytic " << w.analytic << ", numeric " << w.numeric << " ("
              << w.excess << " of the tolerance)";
  }
};

using GradcheckFn = std::function<EagerTensor(const std::vector<EagerTensor>&)>;

// Checks fn's derivatives at `inputs` (their values: gradcheck makes its own leaves; integer and
// bool inputs are passed as they are and not differentiated). fn must give a floating or complex
// output. A derivative of the wrong shape or dtype fails the check (GradcheckEntry::malformed).
// Throws InvalidArgument for no inputs, an integer output, a step that is not finite and > 0, a
// function whose output changes shape when an input moves, or recording off (inside a no_grad
// guard); ContextMismatch for inputs of different runtimes.
GradcheckReport gradcheck(const GradcheckFn& fn, const std::vector<EagerTensor>& inputs,
                          const GradcheckOptions& options = {});

}  // namespace tenferro

#if TENFERRO_HEADER_ONLY  // else compiled once by <tenferro/separate_compilation.hpp>
#include <tenferro/ad/gradcheck_impl.hpp>
#endif
