// Compiler attributes used by the hot paths.
#pragma once

// Whether this translation unit is built with AddressSanitizer (g++ and clang spell it apart).
#if defined(__SANITIZE_ADDRESS__)
#define TENFERRO_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TENFERRO_ASAN 1
#endif
#endif
#if !defined(TENFERRO_ASAN)
#define TENFERRO_ASAN 0
#endif

// Whether this translation unit is built with ThreadSanitizer (core/detail/handoff.hpp).
#if defined(__SANITIZE_THREAD__)
#define TENFERRO_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TENFERRO_TSAN 1
#endif
#endif
#if !defined(TENFERRO_TSAN)
#define TENFERRO_TSAN 0
#endif

// Whether a sanitizer that follows every heap block is on (AddressSanitizer, or ThreadSanitizer,
// which must see a block freed before another thread reuses it). The allocators step aside for
// malloc under it: oneTBB's scalable allocator is not instrumented, and the block pool and the
// mapped buffers would hide reuse.
#define TENFERRO_SANITIZED_HEAP (TENFERRO_ASAN || TENFERRO_TSAN)

// The fused loops rely on the whole expression tree being inlined into one loop body; deep
// trees exceed the compiler's default inlining budget without this.
#if TENFERRO_ASAN || TENFERRO_TSAN
// Sanitizer builds check behaviour, not speed: flattening whole fused loops under instrumentation
// multiplies their compile time and memory several times over.
#define TENFERRO_ALWAYS_INLINE inline
#define TENFERRO_FLATTEN
#define TENFERRO_NOINLINE [[gnu::noinline]]
#elif defined(__GNUC__) || defined(__clang__)
#define TENFERRO_ALWAYS_INLINE [[gnu::always_inline]] inline
// Inline every call inside the function, recursively.
#define TENFERRO_FLATTEN [[gnu::flatten]]
// Kept out of a flattened loop body (a cold path).
#define TENFERRO_NOINLINE [[gnu::noinline]]
#else
#define TENFERRO_ALWAYS_INLINE inline
#define TENFERRO_FLATTEN
#define TENFERRO_NOINLINE
#endif

// A function whose machine code exists once: neither inlined into its callers nor, with GCC,
// cloned for a caller's constant arguments (interprocedural constant propagation would otherwise
// compile a specialised second copy of a fused loop for its padded tail call).
#if defined(__GNUC__) && !defined(__clang__)
#define TENFERRO_ONE_COPY [[gnu::noinline, gnu::noclone]]
#elif defined(__clang__)
#define TENFERRO_ONE_COPY [[gnu::noinline]]
#else
#define TENFERRO_ONE_COPY
#endif

// Separate compilation of the eager runtime. By default tenferro is header-only: every function
// is inline and each translation unit compiles what it uses. With TENFERRO_SEPARATE_COMPILATION
// defined in every translation unit of a program, the eager runtime's functions and the eager
// ops' kernels are only declared, and ONE source file defines them all by including
// <tenferro/separate_compilation.hpp> (the CMake target tenferro::eager does both). A header
// keeps what it only needs for those definitions, and their includes, under TENFERRO_HEADER_ONLY,
// which says which of the two it sees; TENFERRO_INLINE marks the definitions that move.
#if defined(TENFERRO_SEPARATE_COMPILATION) && !defined(TENFERRO_BUILDING_IMPLEMENTATION)
#define TENFERRO_HEADER_ONLY 0
#else
#define TENFERRO_HEADER_ONLY 1
#endif
#if defined(TENFERRO_SEPARATE_COMPILATION)
#define TENFERRO_INLINE
#else
#define TENFERRO_INLINE inline
#endif
