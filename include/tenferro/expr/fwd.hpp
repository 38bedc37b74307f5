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
struct arg;       // placeholder for the I-th input
struct constant;  // a run-time scalar (2.0 in 2.0 * x)
struct zero;      // the compile-time 0 of simplification
struct one;       // the compile-time 1 of simplification
struct numel;     // the element count of the evaluation's broadcast shape (used by mean)

template <class Op, class E>
struct unary;
template <class Op, class L, class R>
struct binary;
template <class Op, class E>
struct reduction;  // a scalar reduction of an elementwise body over every element

// The node protocol every operator and entry point is constrained by: exactly the node templates
// above (never "anything that is not a scalar"). A trait, not a base class, so nodes stay as small
// as their data: 2.0 * x is one double.
template <class E>
inline constexpr bool is_node = false;
template <std::size_t I>
inline constexpr bool is_node<arg<I>> = true;
template <>
inline constexpr bool is_node<constant> = true;
template <>
inline constexpr bool is_node<zero> = true;
template <>
inline constexpr bool is_node<one> = true;
template <>
inline constexpr bool is_node<numel> = true;
template <class Op, class E>
inline constexpr bool is_node<unary<Op, E>> = true;
template <class Op, class L, class R>
inline constexpr bool is_node<binary<Op, L, R>> = true;
template <class Op, class E>
inline constexpr bool is_node<reduction<Op, E>> = true;

template <class E>
concept Expression = is_node<std::remove_cvref_t<E>>;

// A C++ arithmetic value that mixes into expressions as a constant (2.0 * x, x / 3).
template <class S>
concept Scalar =
    std::is_arithmetic_v<std::remove_cvref_t<S>> && !std::is_same_v<std::remove_cvref_t<S>, bool>;

}  // namespace tenferro::expr
