// The buffer allocator (core/buffer_cache.hpp): alignment, reuse, limits, huge-page mappings,
// threads, and a training loop's resident set over 10^5 steps.
#include <tenferro/core/buffer_cache.hpp>
#include <tenferro/eager.hpp>
#include <tenferro/tensor/tensor.hpp>

#include <catch2/catch.hpp>

#include "../errors.hpp"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#include <unistd.h>

using namespace tenferro;

namespace {
std::uintptr_t address_of(const Tensor& t) {
  return detail::visit_dtype(
      t.dtype(), [&]<class T>(T) { return reinterpret_cast<std::uintptr_t>(t.array<T>().data()); });
}
// Restores the cache's limit when a test ends.
struct cache_limit_guard {
  std::size_t saved = buffer_cache_limit();
  ~cache_limit_guard() { set_buffer_cache_limit(saved); }
};
}  // namespace

TEST_CASE("element buffers are 64-byte aligned for every dtype and size") {
  for (const std::size_t n : {0, 1, 7, 8, 9, 100, 1000, 8191, 8192, 100003}) {
    for (const DType d :
         {DType::F32, DType::F64, DType::I32, DType::I64, DType::Bool, DType::C32, DType::C64}) {
      const Tensor t = Tensor::full({n}, 3.0, d);
      INFO("n = " << n << ", dtype = " << dtype_name(d));
      CHECK(address_of(t) % 64 == 0);
      CHECK(t.size() == n);
    }
    const Tensor t = Tensor::full({n}, 2.5, DType::F64);
    const auto s = t.as_slice<double>();
    CHECK(std::count(s.begin(), s.end(), 2.5) == static_cast<std::ptrdiff_t>(n));
  }
}

TEST_CASE("a released large buffer is reused by the next request of about its size") {
  cache_limit_guard guard;
  set_buffer_cache_limit(std::size_t{256} << 20);
  clear_buffer_cache();
  constexpr std::size_t n = 100000;  // 800 KB of f64
  std::uintptr_t first = 0;
  const std::size_t live = buffer_cache_stats().live_bytes;
  reset_buffer_peak();
  {
    const Tensor t = Tensor::full({n}, 1.0);
    first = address_of(t);
    // In use: counted live by capacity (whole pages), and in the peak.
    CHECK(buffer_cache_stats().live_bytes >= live + n * sizeof(double));
    CHECK(buffer_cache_stats().live_bytes < live + n * sizeof(double) + 4096);
  }
  CHECK(buffer_cache_stats().live_bytes == live);
  CHECK(buffer_cache_stats().peak_live_bytes >= live + n * sizeof(double));
  reset_buffer_peak();
  CHECK(buffer_cache_stats().peak_live_bytes == live);
  const BufferCacheStats released = buffer_cache_stats();
  CHECK(released.entries == 1);
  CHECK(released.retained_bytes >= n * sizeof(double));
  CHECK(released.retained_bytes < n * sizeof(double) + 4096);
  {
    // 780 KB: within a quarter of the kept buffer, so it is reused, and written afresh.
    const Tensor t = Tensor::full({97500}, 4.0);
    CHECK(address_of(t) == first);
    const auto s = t.as_slice<double>();
    CHECK(std::count(s.begin(), s.end(), 4.0) == 97500);
    const BufferCacheStats reused = buffer_cache_stats();
    CHECK(reused.hits == released.hits + 1);
    CHECK(reused.entries == 0);
    CHECK(reused.retained_bytes == 0);
    // In use by what it holds, not by what was asked.
    CHECK(reused.live_bytes == live + released.retained_bytes);
  }
  CHECK(buffer_cache_stats().live_bytes == live);
  {
    // Half the size: the kept buffer is too large for it; a fresh one is allocated.
    const Tensor t = Tensor::full({n / 2}, 1.0);
    CHECK(address_of(t) != first);
    CHECK(buffer_cache_stats().misses == released.misses + 1);
  }
  CHECK(buffer_cache_stats().entries == 2);
  clear_buffer_cache();
  const BufferCacheStats cleared = buffer_cache_stats();
  CHECK(cleared.entries == 0);
  CHECK(cleared.retained_bytes == 0);
  CHECK(cleared.evictions == released.evictions + 2);
}

TEST_CASE("of kept buffers of one size, the most recently released is reused first") {
  cache_limit_guard guard;
  set_buffer_cache_limit(std::size_t{256} << 20);
  clear_buffer_cache();
  constexpr std::size_t n = 100000;  // 800 KB of f64
  std::uintptr_t older = 0, newer = 0;
  {
    const Tensor a = Tensor::full({n}, 1.0);
    {
      const Tensor b = Tensor::full({n}, 2.0);
      newer = address_of(b);
    }  // b released first: the older entry
    older = newer;
    newer = address_of(a);
  }  // then a: the newer
  REQUIRE(older != newer);
  CHECK(buffer_cache_stats().entries == 2);
  {
    const Tensor t = Tensor::full({n}, 3.0);
    CHECK(address_of(t) == newer);  // the one whose lines were written last
    const Tensor u = Tensor::full({n}, 4.0);
    CHECK(address_of(u) == older);
  }
  clear_buffer_cache();
}

TEST_CASE("buffers of 2 MiB or more are mapped on huge-page boundaries, cached and reused") {
  cache_limit_guard guard;
  set_buffer_cache_limit(std::size_t{256} << 20);
  clear_buffer_cache();
  // 8 MB (whole huge pages), 2.4 MB (a huge page and a tail of small pages), and 2 MB (below
  // 2 MiB with its header: from malloc).
  for (const std::size_t n : {std::size_t{1000000}, std::size_t{300000}, std::size_t{250000}}) {
    INFO("n = " << n);
    std::uintptr_t first = 0;
    {
      const Tensor t = Tensor::full({n}, 1.5);
      first = address_of(t);
      CHECK(first % 64 == 0);
#if TENFERRO_MMAP_BUFFERS
      // Mapped: the mapping starts on a 2 MiB boundary, the elements after their 64-byte header.
      if (n != 250000) CHECK((first - 64) % (std::size_t{2} << 20) == 0);
#endif
      const auto s = t.as_slice<double>();
      CHECK(std::count(s.begin(), s.end(), 1.5) == static_cast<std::ptrdiff_t>(n));
    }
    const BufferCacheStats released = buffer_cache_stats();
    CHECK(released.entries == 1);
    {
      // A tenth smaller: the same buffer, written afresh (and freed later by its own size).
      const Tensor t = Tensor::full({n - n / 10}, -2.0);
      CHECK(address_of(t) == first);
      const auto s = t.as_slice<double>();
      CHECK(std::count(s.begin(), s.end(), -2.0) == static_cast<std::ptrdiff_t>(n - n / 10));
      CHECK(buffer_cache_stats().hits == released.hits + 1);
    }
    clear_buffer_cache();  // unmaps (or frees) it
    CHECK(buffer_cache_stats().entries == 0);
    CHECK(buffer_cache_stats().retained_bytes == 0);
  }
}

TEST_CASE("a buffer larger than the address space is ResourceExhausted and the cache stays usable") {
  // 2^64 - 8000 bytes of f64: the size rule holds, the allocation cannot succeed. The error names
  // the op and the bytes, and nests the allocator's bad_alloc.
  try {
    (void)Tensor::full({(std::size_t{1} << 61) - 1000}, 1.0);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::ResourceExhausted);
    CHECK(std::string(e.what()) ==
          "ResourceExhausted in Tensor::full: allocating 18446744073709543616 bytes for shape "
          "[2305843009213692952] failed");
    REQUIRE(e.cause() != nullptr);
    CHECK_THROWS_AS(std::rethrow_exception(e.cause()), std::bad_alloc);
  }
  // More bytes than size_t holds: said so.
  CHECK_THAT(
      tenferro::test::message_of([] { (void)Tensor::for_overwrite<double>(Shape{std::size_t{1} << 62}); }),
      Catch::Matchers::Contains("more than size_t holds"));
  const Tensor t = Tensor::full({1000000}, 3.0);
  CHECK(t.as_slice<double>()[999999] == 3.0);
}

TEST_CASE("small buffers are not cached and the cache keeps at most its limit") {
  cache_limit_guard guard;
  clear_buffer_cache();
  const BufferCacheStats before = buffer_cache_stats();
  { const Tensor small = Tensor::full({buffer_cache_min_bytes / sizeof(double) - 1}, 1.0); }
  CHECK(buffer_cache_stats().entries == 0);
  CHECK(buffer_cache_stats().misses == before.misses);

  set_buffer_cache_limit(std::size_t{1} << 20);  // room for one 800 KB buffer, not two
  {
    const Tensor a = Tensor::full({100000}, 1.0);
    const Tensor b = Tensor::full({100000}, 2.0);
  }
  BufferCacheStats s = buffer_cache_stats();
  CHECK(s.entries == 1);
  CHECK(s.retained_bytes <= buffer_cache_limit());
  CHECK(s.evictions == before.evictions + 1);

  { const Tensor huge = Tensor::full({200000}, 1.0); }  // 1.6 MB: larger than the limit, never kept
  CHECK(buffer_cache_stats().entries == 1);

  set_buffer_cache_limit(0);  // lowering the limit frees what no longer fits
  s = buffer_cache_stats();
  CHECK(s.entries == 0);
  CHECK(s.retained_bytes == 0);
  { const Tensor a = Tensor::full({100000}, 1.0); }
  CHECK(buffer_cache_stats().entries == 0);
}

TEST_CASE("the buffer cache is safe across threads") {
  cache_limit_guard guard;
  set_buffer_cache_limit(std::size_t{8} << 20);
  clear_buffer_cache();
  // Each thread makes tensors of several large sizes and releases some on the other thread.
  std::vector<Tensor> handed_over[2];
  std::mutex m;
  auto work = [&](int id) {
    double checksum = 0;
    for (int i = 0; i < 200; ++i) {
      const std::size_t n = 10000 + static_cast<std::size_t>((i * 7919 + id * 104729) % 50000);
      Tensor t = Tensor::full({n}, static_cast<double>(i));
      const auto s = t.as_slice<double>();
      checksum += s[0] + s[n - 1];
      std::lock_guard lock(m);
      handed_over[1 - id].push_back(std::move(t));
      if (handed_over[id].size() > 4) handed_over[id].erase(handed_over[id].begin());
    }
    return checksum;
  };
  double sums[2] = {0, 0};
  std::thread other([&] { sums[1] = work(1); });
  sums[0] = work(0);
  other.join();
  CHECK(sums[0] == 2 * 199 * 200 / 2);
  CHECK(sums[1] == 2 * 199 * 200 / 2);
  handed_over[0].clear();
  handed_over[1].clear();
  const BufferCacheStats s = buffer_cache_stats();
  CHECK(s.retained_bytes <= std::size_t{8} << 20);
  CHECK(s.hits > 0);
  clear_buffer_cache();
  CHECK(buffer_cache_stats().retained_bytes == 0);
}

namespace {
// The process's resident set in bytes (Linux).
std::size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}
}  // namespace

TEST_CASE("threads keep buffers in their own shards and take from the others when theirs is empty") {
  cache_limit_guard guard;
  set_buffer_cache_limit(std::size_t{64} << 20);
  clear_buffer_cache();
  constexpr std::size_t n = 50000;  // 400 KB
  // Made and released on another thread: kept in that thread's shard.
  std::uintptr_t there = 0;
  std::thread([&] {
    const Tensor t = Tensor::full({n}, 1.0);
    there = address_of(t);
  }).join();
  const BufferCacheStats before = buffer_cache_stats();
  CHECK(before.entries == 1);
  // This thread's shard has nothing that fits: the other shard's buffer is taken.
  const Tensor t = Tensor::full({n}, 2.0);
  CHECK(address_of(t) == there);
  CHECK(buffer_cache_stats().hits == before.hits + 1);
  CHECK(buffer_cache_stats().entries == 0);
  CHECK(t.as_slice<double>()[n - 1] == 2.0);
}

TEST_CASE("a training loop's resident set stays flat over 10^5 steps, and clearing hands memory back") {
  cache_limit_guard guard;
  set_buffer_cache_limit(detail::buffer_cache::default_limit);
  // Least squares by gradient descent on 16384 points (128 KiB per f64 tensor: cached buffers),
  // one thread: the same shapes every step.
  constexpr std::size_t n = 16384;
  std::vector<double> xs(n), ys(n);
  for (std::size_t i = 0; i < n; ++i) {
    xs[i] = static_cast<double>(i) / n;
    ys[i] = 3.0 * xs[i] - 1.0;
  }
  auto ctx = EagerRuntime::with_cpu_backend(CpuBackend::with_threads(1));
  const auto x = EagerTensor::from_tensor_in(Tensor::from_vec_col_major<double>({n}, xs), ctx);
  const auto y = EagerTensor::from_tensor_in(Tensor::from_vec_col_major<double>({n}, ys), ctx);
  double a = 0, b = 0;
  auto step = [&] {
    auto wa = EagerTensor::requires_grad_in(Tensor::full({}, a), ctx);
    auto wb = EagerTensor::requires_grad_in(Tensor::full({}, b), ctx);
    (x * wa + wb - y).square().reduce_mean().backward();
    a -= 0.5 * wa.grad()->as_slice<double>()[0];
    b -= 0.5 * wb.grad()->as_slice<double>()[0];
  };
  // Under AddressSanitizer freed memory waits in its quarantine: the resident set says nothing
  // there, and the loop runs 2000 steps (the counters of the cache are checked all the same).
#if TENFERRO_MMAP_BUFFERS
  constexpr int steps = 100000;
#else
  constexpr int steps = 2000;
#endif
  for (int k = 0; k < 1000; ++k) step();
  const std::size_t rss = resident_bytes();
  const BufferCacheStats warm = buffer_cache_stats();
  for (int k = 0; k < steps; ++k) step();
  const BufferCacheStats after = buffer_cache_stats();
  INFO("resident set grew by " << (resident_bytes() - std::min(rss, resident_bytes())) << " bytes");
  // The same buffers every step: nothing new is allocated, nothing more is kept.
  CHECK(after.misses == warm.misses);
  CHECK(after.retained_bytes == warm.retained_bytes);
  CHECK(after.live_bytes == warm.live_bytes);
#if TENFERRO_MMAP_BUFFERS
  CHECK(resident_bytes() <= rss + (std::size_t{1} << 20));
#endif
  // It converged (the loop computed what it should).
  CHECK(a == Approx(3.0).margin(1e-6));
  CHECK(b == Approx(-1.0).margin(1e-6));

  // 64 MB of mapped buffers kept by the cache, then handed back by clear_buffer_cache().
  clear_buffer_cache();
  [[maybe_unused]] const std::size_t base = resident_bytes();  // unused without mapped buffers
  {
    std::vector<Tensor> big;
    for (int k = 0; k < 8; ++k) big.push_back(Tensor::full({1000000}, 1.0));
  }
  CHECK(buffer_cache_stats().retained_bytes >= 64000000);
#if TENFERRO_MMAP_BUFFERS
  CHECK(resident_bytes() >= base + 60000000);
  clear_buffer_cache();
  CHECK(resident_bytes() <= base + (std::size_t{4} << 20));
#else
  clear_buffer_cache();
#endif
  CHECK(buffer_cache_stats().retained_bytes == 0);
}
