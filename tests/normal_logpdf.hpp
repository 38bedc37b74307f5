// The normal log-density sum_i (-0.5 ((x_i - mu) / sigma)^2 - log sigma) and its derivatives in mu
// and sigma, in plain double arithmetic: the reference of the broadcasting tests of both layers.
#pragma once

#include <cmath>

namespace tenferro::test {

struct normal_logpdf {
  double value = 0, dmu = 0, dsigma = 0;

  template <class Range>
  normal_logpdf(const Range& data, double mu, double sigma) {
    for (const double d : data) {
      const double u = (d - mu) / sigma;
      value += -0.5 * u * u - std::log(sigma);
      dmu += u / sigma;
      dsigma += u * u / sigma - 1.0 / sigma;
    }
  }
};

}  // namespace tenferro::test
