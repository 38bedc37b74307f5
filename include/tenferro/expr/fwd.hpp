// Forward declarations of the compile-time layer's node templates and the node protocol.
//
// An expression is a tree of small value types. Leaves hold no tensor data (placeholders name an
// input position; constants hold one number), so every node is stored by value: an expression
// built from temporaries, kept in `auto` and evaluated later, never dangles.
#pragma once

#include <concepts>
#include <cstddef>
#include <type_traits>

namespace tenferro::expr {

template <std::size_t I>
struct arg;        // placeholder for the I-th input
struct constant;   // a run-time scalar (2.0 in 2.0 * x)
struct zero;       // the compile-time 0 of simplification
struct one;        // the compile-time 1 of simplification
struct numel;      // the element count of the evaluation's broadcast shape (used by mean)

template <class Op, class E>
struct unary;
template <class Op, class L, class R>
struct binary;
template <class Op, class E>
struct reduction;  // a scalar reduction of an elementwise body over every element

// Every node derives from node_base; the concept below is the node protocol every operator and
// entry point is constrained by.
struct node_base {};

template <class E>
concept Expression = std::derived_from<std::remove_cvref_t<E>, node_base>;

// A C++ arithmetic value that mixes into expressions as a constant (2.0 * x, x / 3).
template <class S>
concept Scalar = std::is_arithmetic_v<std::remove_cvref_t<S>> && !std::is_same_v<std::remove_cvref_t<S>, bool>;

}  // namespace tenferro::expr
