// The runtime layer: EagerRuntime, EagerTensor and its ops, backward, grad / vjp / jvp, apply.
#pragma once

#include <tenferro/ad/apply.hpp>
#include <tenferro/ad/transforms.hpp>
