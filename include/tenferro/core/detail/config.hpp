// Compiler attributes used by the hot paths.
#pragma once

// The fused loops rely on the whole expression tree being inlined into one loop body; deep
// trees exceed the compiler's default inlining budget without this.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
// Sanitizer builds check behaviour, not speed: flattening whole fused loops under instrumentation
// multiplies their compile time and memory several times over.
#define TENFERRO_ALWAYS_INLINE inline
#define TENFERRO_FLATTEN
#elif defined(__GNUC__) || defined(__clang__)
#define TENFERRO_ALWAYS_INLINE [[gnu::always_inline]] inline
// Inline every call inside the function, recursively.
#define TENFERRO_FLATTEN [[gnu::flatten]]
#else
#define TENFERRO_ALWAYS_INLINE inline
#define TENFERRO_FLATTEN
#endif
