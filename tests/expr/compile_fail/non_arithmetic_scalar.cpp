// ok: an arithmetic scalar mixes into an expression.  ko: a string does not.
#include <tenferro/expr.hpp>

#include <string>

void use() {
  using namespace tenferro::expr;
  auto [x] = placeholders<1>();
#ifdef TENFERRO_KO
  (void)(x * std::string("two"));
#else
  (void)(x * 2);
#endif
}
