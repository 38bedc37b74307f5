// cpu/placement.hpp and the backends on it: CpuPlacement, TENFERRO_NUM_THREADS, execution_info,
// shared arenas, NUMA nodes, EagerRuntime::on_cpu, re-entry, and results that do not depend on
// the threads or the placement.
#include <tenferro/eager.hpp>
#include <tenferro/expr.hpp>

#include <tbb/task_arena.h>
#include <tbb/task_group.h>
#include <tenferro/core/detail/parallel.hpp>  // parallel_ranges: the parallel loop, seen by ThreadSanitizer

#include <catch2/catch.hpp>

#include "../errors.hpp"
#include "../settings.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <vector>

using namespace tenferro;
using Catch::Matchers::Contains;
using tenferro::test::message_of;

namespace {

std::size_t affinity_count() {
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(sched_getaffinity(0, sizeof(set), &set) == 0);
  return static_cast<std::size_t>(CPU_COUNT(&set));
}

// Sets TENFERRO_NUM_THREADS for its lifetime (unset: nullptr).
struct environment : tenferro::test::environment {
  explicit environment(const char* value) : tenferro::test::environment("TENFERRO_NUM_THREADS", value) {}
};

std::string printed(const auto& v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

TEST_CASE("placements: kinds, nodes, equality, printing") {
  CHECK(CpuPlacement::automatic().kind() == CpuPlacement::Kind::automatic);
  CHECK(CpuPlacement{} == CpuPlacement::automatic());
  CHECK(CpuPlacement::all_allowed().kind() == CpuPlacement::Kind::all_allowed);
  CHECK(CpuPlacement::numa_node(3).node() == std::optional<std::size_t>(3));
  CHECK_FALSE(CpuPlacement::automatic().node().has_value());
  CHECK(CpuPlacement::numa_node(1) == CpuPlacement::numa_node(1));
  CHECK(CpuPlacement::numa_node(1) != CpuPlacement::numa_node(0));
  CHECK(CpuPlacement::automatic() != CpuPlacement::all_allowed());
  CHECK(printed(CpuPlacement::automatic()) == "CpuPlacement::automatic()");
  CHECK(printed(CpuPlacement::all_allowed()) == "CpuPlacement::all_allowed()");
  CHECK(printed(CpuPlacement::numa_node(2)) == "CpuPlacement::numa_node(2)");
}

TEST_CASE("TENFERRO_NUM_THREADS: read by CpuBackend::create, malformed values throw naming it") {
  const std::size_t cpus = affinity_count();
  {
    const environment unset(nullptr);
    CHECK(CpuBackend::create().threads() == cpus);
    CHECK(EagerRuntime::create()->backend().threads() == cpus);
  }
  {
    const environment one("1");
    CHECK(CpuBackend::create().threads() == 1);
    CHECK(CpuBackend::for_placement(CpuPlacement::automatic()).threads() == 1);
    CHECK(CpuBackend::for_placement(CpuPlacement::all_allowed()).threads() == cpus);  // not read
    CHECK(EagerRuntime::create()->backend().threads() == 1);
  }
  {
    const environment three("3");
    CHECK(CpuBackend::create().threads() == 3);
  }
  for (const char* bad : {"0", "", "abc", "2x", "-1", " 2", "1.5", "99999999999999999999", "65537"}) {
    INFO("TENFERRO_NUM_THREADS='" << bad << "'");
    const environment malformed(bad);
    const std::string m = message_of([] { (void)CpuBackend::create(); }, ErrorKind::InvalidArgument);
    CHECK_THAT(
        m, Contains("CpuBackend::create") && Contains("TENFERRO_NUM_THREADS is '" + std::string(bad) + "'"));
    CHECK(tenferro::test::kind_of([] { (void)EagerRuntime::create(); }) == ErrorKind::InvalidArgument);
  }
  const environment restored(nullptr);
  CHECK(CpuBackend::create().threads() == cpus);  // a failed call changed nothing
}

TEST_CASE("execution_info: threads, placement and CPUs, and kernels run on exactly those threads") {
  const std::size_t cpus = affinity_count();
  const auto two = CpuBackend::with_threads(2);
  CHECK(two.execution_info().threads == 2);
  CHECK(two.placement() == CpuPlacement::automatic());
  CHECK(two.execution_info().cpus.size() == cpus);
  const auto all = CpuBackend::for_placement(CpuPlacement::all_allowed());
  CHECK(all.threads() == cpus);
  CHECK(all.execution_info().cpus == two.execution_info().cpus);
  CHECK_THAT(printed(two.execution_info()),
             Contains("threads=2, placement=CpuPlacement::automatic(), cpus=["));
  for (std::size_t n = 1; n <= 2; ++n) {
    const auto b = CpuBackend::with_threads(n);
    CHECK(b.execute([] { return tbb::this_task_arena::max_concurrency(); }) == static_cast<int>(n));
  }
}

TEST_CASE("arenas: one per placement and thread count, shared by the backends resolving to it") {
  CHECK(message_of([] { (void)CpuBackend::with_threads(65537); }, ErrorKind::InvalidArgument) ==
        "InvalidArgument in CpuBackend::with_threads: argument 'threads' is 65537; at most 65536 are "
        "supported");
  auto a = CpuBackend::with_threads(2);
  const auto b = std::move(a);  // copies: a backend stays whole
  CHECK(a.threads() == 2);      // NOLINT(bugprone-use-after-move)
  CHECK(a == b);
  CHECK(CpuBackend::with_threads(2) == CpuBackend::with_threads(2));
  CHECK(CpuBackend::with_threads(1) != CpuBackend::with_threads(2));
  CHECK(CpuBackend::with_threads(2) != CpuBackend::with_threads(2).with_fusion(false));
  // all_allowed and automatic may share an arena, but stay different placements.
  CHECK(CpuBackend::for_placement(CpuPlacement::all_allowed()) !=
        CpuBackend::with_threads(CpuBackend::for_placement(CpuPlacement::all_allowed()).threads()));
}

// Whether oneTBB reads the NUMA topology: on this machine kind (one node, libtbbbind installed)
// in every build but the sanitizers' (cpu/placement.hpp), where numa_node throws Unsupported and
// automatic() and all_allowed() still work.
bool numa() { return !detail::cpu_topology::numa_nodes().empty(); }

TEST_CASE("NUMA nodes: node 0 runs pinned to its CPUs, a node the machine lacks throws a placement error") {
  const auto nodes = detail::cpu_topology::numa_nodes();
  INFO("NUMA nodes oneTBB reads: " << nodes.size());
  if (nodes.empty()) {  // the topology cannot be read
    const std::string m = message_of([] { (void)CpuBackend::for_placement(CpuPlacement::numa_node(0)); },
                                     ErrorKind::Unsupported);
    CHECK_THAT(m, Contains("CpuBackend::for_placement") &&
                      Contains("cannot resolve CpuPlacement::numa_node(0)") &&
                      Contains("cannot read this machine's NUMA topology"));
    CHECK(CpuBackend::for_placement(CpuPlacement::all_allowed()).threads() == affinity_count());
    return;
  }
  REQUIRE(nodes.front() == 0);
  const auto b = CpuBackend::for_placement(CpuPlacement::numa_node(0));
  CHECK(b.placement() == CpuPlacement::numa_node(0));
  CHECK(b.threads() == b.execution_info().cpus.size());
  if (nodes.size() == 1) CHECK(b.execution_info().cpus == detail::cpu_topology::allowed_cpus());
  std::atomic<int> outside{0};
  const auto& cpus = b.execution_info().cpus;
  b.execute([&] {
    auto task = [&](std::size_t begin, std::size_t end) {
      for (std::size_t k = begin; k < end; ++k) {
        const int c = sched_getcpu();
        if (std::find(cpus.begin(), cpus.end(), static_cast<std::size_t>(c)) == cpus.end()) ++outside;
      }
    };
    detail::parallel_ranges(64, 1, detail::split::even, task);
  });
  CHECK(outside == 0);

  const std::size_t missing = *std::max_element(nodes.begin(), nodes.end()) + 1;  // 1 on one node
  try {
    (void)CpuBackend::for_placement(CpuPlacement::numa_node(missing));
    FAIL("a NUMA node the machine lacks resolved");
  } catch (const CpuPlacementError& e) {
    CHECK(e.kind() == ErrorKind::InvalidArgument);
    CHECK(e.placement() == CpuPlacement::numa_node(missing));
    CHECK_THAT(std::string(e.what()), Contains("CpuBackend::for_placement") &&
                                          Contains("NUMA node " + std::to_string(missing) +
                                                   " does not exist; this machine has node(s) 0"));
  }
}

TEST_CASE("on_cpu: runtime id, placement, sessions, errors with their cause, movable only") {
  static_assert(!std::is_copy_constructible_v<CpuPlacementBoundEager>);
  static_assert(!std::is_copy_assignable_v<CpuPlacementBoundEager>);
  static_assert(std::is_nothrow_move_constructible_v<CpuPlacementBoundEager>);
  auto rt = EagerRuntime::with_cpu_backend(CpuBackend::with_threads(2));
  const auto x = Tensor::from_vec_col_major<double>({3}, {1, 2, 3});
  std::vector<CpuPlacement> placements{CpuPlacement::automatic(), CpuPlacement::all_allowed()};
  if (numa()) placements.push_back(CpuPlacement::numa_node(0));
  for (const CpuPlacement p : placements) {
    INFO(p);
    CpuPlacementBoundEager cpu = rt->on_cpu(p);
    CHECK(cpu.runtime_id() == rt->id());
    CHECK(cpu.placement() == p);
    const Tensor y = cpu.with_eager_session([&](BackendSession& s) { return s.exp(s.add(x, x)); });
    CHECK(y.as_slice<double>()[2] == std::exp(6.0));
    // An exception from f comes out unchanged, and the view stays usable.
    CHECK_THROWS_WITH(cpu.with_eager_session([](BackendSession&) -> int { throw std::logic_error("mine"); }),
                      "mine");
    CpuPlacementBoundEager moved = std::move(cpu);
    CHECK(
        moved.with_eager_session([&](BackendSession& s) { return s.reduce_sum(x); }).as_slice<double>()[0] ==
        6.0);
  }
  CHECK(rt->on_cpu(CpuPlacement::automatic()).execution_info().threads == 2);  // the runtime's own

  try {
    (void)rt->on_cpu(CpuPlacement::numa_node(7));
    FAIL("numa_node(7) resolved");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::RuntimeState);
    CHECK_THAT(std::string(e.what()),
               Contains("EagerRuntime::on_cpu") && Contains("CpuPlacement::numa_node(7)"));
    REQUIRE(e.cause());
    try {
      std::rethrow_exception(e.cause());
    } catch (const CpuPlacementError& cause) {
      CHECK(cause.kind() == (numa() ? ErrorKind::InvalidArgument : ErrorKind::Unsupported));
      CHECK(cause.placement() == CpuPlacement::numa_node(7));
    }
  }
  // The runtime stays usable.
  CHECK(rt->on_cpu(placements.back()).with_eager_session([&](BackendSession& s) {
    return s.reduce_sum(x).as_slice<double>()[0];
  }) == 6.0);
}

TEST_CASE("re-entry: a session or kernel of a backend may enter the same backend again") {
  auto rt = EagerRuntime::with_cpu_backend(CpuBackend::with_threads(2));
  const auto x = Tensor::from_vec_col_major<double>({2}, {1, 2});
  const auto cpu = rt->on_cpu(CpuPlacement::automatic());
  const double nested = cpu.with_eager_session([&](BackendSession& outer) {
    const Tensor a = outer.add(x, x);
    const Tensor b = cpu.with_eager_session([&](BackendSession& inner) { return inner.mul(a, a); });
    return rt->with_execution_session([&](BackendSession& s) { return s.reduce_sum(b); })
        .as_slice<double>()[0];
  });
  CHECK(nested == 4.0 + 16.0);
  std::vector<double> sums(16);
  rt->backend().execute([&] {
    auto task = [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) {
        auto v = EagerTensor::requires_grad_in(
            Tensor::from_vec_col_major<double>({40000}, std::vector<double>(40000, static_cast<double>(i))),
            rt);
        (v * v).reduce_sum().backward();
        sums[i] = cpu.with_eager_session([&](BackendSession& s) { return s.reduce_sum(*v.grad()); })
                      .as_slice<double>()[0];
      }
    };
    detail::parallel_ranges(16, 1, detail::split::even, task);
  });
  for (int i = 0; i < 16; ++i) CHECK(sums[static_cast<std::size_t>(i)] == 2.0 * i * 40000);
}

TEST_CASE("parallel loops: every index once, ranges as the split says, both threads, errors stop the loop") {
  const auto cpu = CpuBackend::with_threads(2);
  cpu.execute([&] {
    for (const auto how : {detail::split::even, detail::split::adaptive}) {
      for (const std::size_t count : {0, 1, 7, 64, 1000, 100003}) {
        for (const std::size_t grain : {1, 3, 4096}) {
          INFO("split " << static_cast<int>(how) << ", count " << count << ", grain " << grain);
          std::vector<std::atomic<int>> hits(count);
          std::atomic<std::size_t> calls{0}, short_ranges{0}, uneven{0};
          auto body = [&](std::size_t begin, std::size_t end) {
            ++calls;
            if (end - begin < grain && end != count) ++short_ranges;
            if (how == detail::split::even && end - begin != grain && end != count) ++uneven;
            for (std::size_t i = begin; i < end; ++i) ++hits[i];
          };
          detail::parallel_ranges(count, grain, how, body);
          CHECK(std::all_of(hits.begin(), hits.end(), [](const auto& h) { return h == 1; }));
          CHECK(short_ranges == 0);
          CHECK(uneven == 0);
          if (how == detail::split::even && count > grain) CHECK(calls == (count + grain - 1) / grain);
          if (how == detail::split::adaptive && count > 0) CHECK(calls <= (count + grain - 1) / grain);
        }
      }
    }

    // Ranges that take a while are shared by both threads of the arena.
    std::mutex m;
    std::vector<std::thread::id> ids;
    auto slow = [&](std::size_t, std::size_t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      const std::lock_guard<std::mutex> lock(m);
      if (std::find(ids.begin(), ids.end(), std::this_thread::get_id()) == ids.end())
        ids.push_back(std::this_thread::get_id());
    };
    detail::parallel_ranges(32, 1, detail::split::even, slow);
    CHECK(ids.size() == 2);

    // An exception in one range reaches the caller, and the threads start no range after it: the
    // first range throws once the other thread is inside its share, which then finishes at most the
    // range it is in (1 ms each; without the stop it would run the rest of its share, 12 ranges or
    // more).
    std::atomic<std::size_t> ran{0};
    auto failing = [&](std::size_t begin, std::size_t) {
      ++ran;
      if (begin == 0) {
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2);
        while (ran < 2 && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
        throw std::runtime_error("range 0 failed");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    };
    CHECK_THROWS_WITH(detail::parallel_ranges(64, 1, detail::split::even, failing), "range 0 failed");
    CHECK(ran <= 4);
    std::atomic<std::size_t> after{0};
    auto count_all = [&](std::size_t begin, std::size_t end) { after += end - begin; };
    detail::parallel_ranges(1000, 1, detail::split::even, count_all);
    CHECK(after == 1000);

    // A loop run by a task whose group was cancelled still covers every index.
    tbb::task_group outer;
    std::atomic<std::size_t> covered{0};
    auto count_covered = [&](std::size_t begin, std::size_t end) { covered += end - begin; };
    const auto status = outer.run_and_wait([&] {
      outer.cancel();
      detail::parallel_ranges(1000, 1, detail::split::even, count_covered);
    });
    CHECK(status == tbb::canceled);
    CHECK(covered == 1000);
  });
}

TEST_CASE("results are bit for bit the same on 1 and 2 threads and on every placement") {
  constexpr std::size_t n = 1'000'003;
  std::vector<double> xs(n), ys(n);
  for (std::size_t i = 0; i < n; ++i) {
    xs[i] = std::sin(0.001 * static_cast<double>(i));
    ys[i] = 0.5 + 0.25 * std::cos(0.003 * static_cast<double>(i));
  }
  struct result {
    double eager_value, compiled_value;
    std::vector<double> eager_dx, compiled_dx;
  };
  auto run = [&](const CpuBackend& backend) {
    auto rt = EagerRuntime::with_cpu_backend(backend);
    auto x = EagerTensor::requires_grad_in(Tensor::from_vec_col_major<double>({n}, xs), rt);
    auto y = EagerTensor::requires_grad_in(Tensor::from_vec_col_major<double>({n}, ys), rt);
    const auto loss = (x.sin() * y + (x * y).exp()).reduce_sum();
    loss.backward();
    result r{loss.materialized().as_slice<double>()[0], 0, {}, {}};
    const auto g = x.grad()->as_slice<double>();
    r.eager_dx.assign(g.begin(), g.end());
    auto [a, b] = expr::placeholders<2>();
    const auto f = expr::sum(sin(a) * b + exp(a * b));
    const column_major_array<double> X = xt::adapt(xs, {n}), Y = xt::adapt(ys, {n});
    backend.execute([&] {
      auto [v, grads] = expr::value_and_grad(f, X, Y);
      r.compiled_value = v;
      r.compiled_dx.assign(std::get<0>(grads).begin(), std::get<0>(grads).end());
    });
    return r;
  };
  const result one = run(CpuBackend::with_threads(1));
  std::vector<CpuBackend> backends{CpuBackend::with_threads(2),
                                   CpuBackend::for_placement(CpuPlacement::all_allowed())};
  if (numa()) backends.push_back(CpuBackend::for_placement(CpuPlacement::numa_node(0)));
  for (const auto& backend : backends) {
    INFO(backend);
    const result other = run(backend);
    CHECK(std::memcmp(&other.eager_value, &one.eager_value, sizeof(double)) == 0);
    CHECK(std::memcmp(&other.compiled_value, &one.compiled_value, sizeof(double)) == 0);
    CHECK(other.eager_dx == one.eager_dx);
    CHECK(other.compiled_dx == one.compiled_dx);
  }
  CHECK(one.eager_value == Approx(one.compiled_value).epsilon(1e-12));
}
