#include "demo_workers.hpp"

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>
#include <fairsem/fairsem.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <new>
#include <random>
#include <string_view>
#include <system_error>
#include <thread>

namespace fairsem::cli::demo {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Two waiters promoted by releases a moment apart may start their critical sections in either
// order: each first wakes up and runs one script call, which on a loaded machine can take
// tens of ms. Grants closer than a quarter of the lease (at least this) are not compared.
constexpr auto kMinOrderSlack = milliseconds(20);

/// `id` into `slot`, cut to fit, '\0'-ended.
void store_id(std::array<char, kIdBytes>& slot, std::string_view id) {
  const std::size_t n = std::min(id.size(), slot.size() - 1);
  std::copy_n(id.begin(), n, slot.begin());
  slot[n] = '\0';
}

}  // namespace

long long now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

Shared* map_shared() {
  void* p =
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "mmap");
  return new (p) Shared{};  // zeroed by the kernel; placement-new gives the atomics their life
}

std::string worker_label(int index) { return fmt::format("worker-{}", index + 1); }

[[noreturn]] void worker_main(const Setup& setup, Shared& shared, int index) {
  int code = 0;
  try {
    SemaphoreOptions o;
    o.limit = setup.limit;
    o.lease = setup.lease;
    o.key_prefix = setup.prefix;
    o.owner_info = fmt::format("{} (pid {})", worker_label(index), static_cast<long>(getpid()));
    o.logger = [](LogLevel, std::string_view) {};  // the view shows what matters
    FairSemaphore sem(ConnectionOptions::from_url(setup.url), setup.name, o);
    std::mt19937 rng(static_cast<unsigned>(getpid()));
    std::uniform_int_distribution<int> think(30, 250);
    std::uniform_int_distribution<int> hold(150, 600);
    WorkerSlot& slot = shared.workers[index];
    while (!shared.stop.load()) {
      std::this_thread::sleep_for(milliseconds(think(rng)));
      slot.state.store(waiting);
      Permit p = sem.acquire();
      if (shared.stop.load()) break;  // granted after the end: pass it straight on
      store_id(slot.permit_id, p.id());
      slot.token.store(p.fencing_token());
      const int inside = shared.inside.fetch_add(1) + 1;
      slot.in_section.store(1);
      int seen = shared.max_inside.load();
      while (inside > seen && !shared.max_inside.compare_exchange_weak(seen, inside)) {
      }
      const int n = shared.grant_count.fetch_add(1);
      if (n < kMaxGrants) shared.grants[n] = Grant{p.fencing_token(), now_ns(), index};
      slot.grants.fetch_add(1);
      slot.state.store(holding);
      std::this_thread::sleep_for(milliseconds(hold(rng)));  // the critical section
      slot.state.store(idle);
      if (slot.in_section.exchange(0) == 1) shared.inside.fetch_sub(1);
      (void)p.release();
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}: {}: {}\n", kCommand, worker_label(index), e.what());
    code = 1;
  }
  shared.workers[index].state.store(idle);
  if (std::fflush(nullptr) != 0) code = 1;  // its output is lost: a failure too
  _exit(code);
}

int count_order_violations(std::vector<Grant> grants, milliseconds lease) {
  std::sort(grants.begin(), grants.end(),
            [](const Grant& a, const Grant& b) { return a.token < b.token; });
  const long long slack =
      std::chrono::nanoseconds(std::max<milliseconds>(kMinOrderSlack, lease / 4)).count();
  int violations = 0;
  long long latest_earlier = 0;  // the latest entry among lower tickets
  for (const Grant& g : grants) {
    if (latest_earlier - g.enter_ns > slack) ++violations;
    latest_earlier = std::max(latest_earlier, g.enter_ns);
  }
  return violations;
}

}  // namespace fairsem::cli::demo
