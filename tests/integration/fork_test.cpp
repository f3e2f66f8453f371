// fork(): a child process made while its parent holds permits, waits and runs fairsem's threads.
// The child gets a clear error from every use of its parent's Client, semaphore or permit, exits
// without hanging (its destructors and the exit handler leave its parent's objects alone), and
// may open a Client of its own; the parent keeps its permit, its threads and its connections.

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "child_process.hpp"
#include "fairsem/fairsem.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "test_env.hpp"
#include "wait.hpp"

namespace {

using namespace std::chrono_literals;
using fairsem::Client;
using fairsem::FairSemaphore;
using fairsem::ForkedProcessError;
using fairsem::Permit;
using fairsem::ReleaseResult;
using fairsem::SemaphoreOptions;
using fairsem::test::describe_wait_status;
using fairsem::test::redis_options;
using fairsem::test::stacks_of;
using fairsem::test::unique_options;
using fairsem::test::wait_until;

/// Runs `f` and says whether it threw ForkedProcessError (anything else is a failure too).
template <typename F>
bool refused(F&& f) {
  try {
    f();
  } catch (const ForkedProcessError& e) {
    return std::string(e.what()).find("fork()") != std::string::npos;
  } catch (...) {
    return false;
  }
  return false;
}

/// Waits for the child `pid` to exit (up to `limit`; one that hangs is killed) and says whether
/// it exited 0.
::testing::AssertionResult child_exits_cleanly(pid_t pid, std::chrono::seconds limit) {
  int status = 0;
  if (!wait_until([&] { return ::waitpid(pid, &status, WNOHANG) == pid; }, limit)) {
    const std::string stacks = stacks_of(pid);
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return ::testing::AssertionFailure() << "the child did not exit; " << stacks;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << describe_wait_status(status);
}

/// What the child checks, one bit each in its exit status (0: all held): each use of its
/// parent's objects is refused, and a Client of its own (its own threads and connections) works.
/// Built without sanitizers only (tests/CMakeLists.txt): GCC 12's AddressSanitizer and
/// ThreadSanitizer take none of their allocators' locks around fork(), and a child that
/// allocates can wait for ever on one a parent's thread held at the fork.
int child_checks(FairSemaphore& parents, Permit& parents_permit, const std::string& own_name) {
  int failed = 0;
  if (!refused([&] { (void)parents.try_acquire(); })) failed |= 1;
  if (!refused([&] { (void)parents.acquire_async(); })) failed |= 2;
  if (!refused([&] { (void)parents.status(); })) failed |= 4;
  if (!refused([&] { (void)parents_permit.release(); })) failed |= 8;
  try {
    Client own(redis_options());
    FairSemaphore sem(own, own_name, unique_options(1, 2s));
    Permit p = sem.acquire();
    if (p.release() != ReleaseResult::released) failed |= 16;
  } catch (...) {
    failed |= 32;
  }
  return failed;
}

TEST(ForkTest, AChildGetsAClearErrorFromItsParentsClientAndTheParentKeepsEverything) {
  std::optional<Client> client(std::in_place, redis_options());
  std::optional<FairSemaphore> sem(std::in_place, *client, "forked", unique_options(1, 2s));
  std::optional<Permit> held = sem->acquire();
  // A waiter queued behind it: the waker and the worker threads are running.
  std::optional<std::future<Permit>> waiter = sem->acquire_async();
  ASSERT_TRUE(wait_until([&] { return sem->status().waiters.size() == 1; }));

  const pid_t pid = ::fork();
  ASSERT_NE(pid, -1);
  if (pid == 0) {
    const int failed = child_checks(*sem, *held, "forked-child-own");
    // The copies of the parent's objects destroyed: abandoned, untouched.
    waiter.reset();
    held.reset();
    sem.reset();
    client.reset();
    std::exit(failed);  // with the exit handlers (the thread reaper's among them)
  }

  // The child exits, without hanging, every check held. (One that hangs is killed.)
  int status = 0;
  bool reaped = false;
  struct KillUnlessReaped {
    pid_t pid;
    const bool& reaped;
    ~KillUnlessReaped() {
      if (reaped) return;
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  } kill_unless_reaped{pid, reaped};
  reaped = wait_until([&] { return ::waitpid(pid, &status, WNOHANG) == pid; }, 30s);
  ASSERT_TRUE(reaped) << "the child did not exit; " << stacks_of(pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << describe_wait_status(status);

  // The parent's permit is still its own, renewed by its watchdog past the lease; its waiter
  // is served when it lets go.
  const std::uint64_t renewals = sem->metrics().renewals;
  ASSERT_TRUE(wait_until([&] { return sem->metrics().renewals >= renewals + 2; }));
  EXPECT_FALSE(held->lost());
  EXPECT_EQ(sem->status().holders.size(), 1u);
  EXPECT_EQ(held->release(), ReleaseResult::released);
  ASSERT_EQ(waiter->wait_for(30s), std::future_status::ready);
  Permit next = waiter->get();
  EXPECT_EQ(next.release(), ReleaseResult::released);
}

// A child forked while its parent's request holds the semaphore's admission turn (its first
// call under way, here held up by CLIENT PAUSE) is refused at once: it never waits in a line no
// thread of its own will ever move. (It once waited there for ever, about 1 fork in 30 under
// load, when the turn happened to be taken at the fork.)
TEST(ForkTest, AChildIsRefusedAtOnceWhileItsParentsRequestHoldsTheAdmissionTurn) {
  Client client(redis_options());
  FairSemaphore sem(client, "turn", unique_options(1, 2s));
  fairsem::detail::Connection admin(redis_options());
  admin.command({"CLIENT", "PAUSE", "20000", "WRITE"});
  struct Unpause {
    fairsem::detail::Connection& admin;
    ~Unpause() { admin.command({"CLIENT", "UNPAUSE"}); }
  } unpause{admin};
  std::future<Permit> parents = sem.acquire_async();
  // Its first call is held at the server (a blocked client): the turn is taken.
  ASSERT_TRUE(wait_until([&] {
    return admin.command({"CLIENT", "LIST"}).str.find("flags=b ") != std::string::npos;
  }));

  const pid_t pid = ::fork();
  ASSERT_NE(pid, -1);
  if (pid == 0) {
    const bool ok = refused([&] { (void)sem.try_acquire(); }) &&
                    refused([&] { (void)sem.try_acquire_for(std::chrono::seconds(1)); });
    std::exit(ok ? 0 : 1);
  }
  EXPECT_TRUE(child_exits_cleanly(pid, 10s));

  // The parent's request goes on once the server does.
  admin.command({"CLIENT", "UNPAUSE"});
  ASSERT_EQ(parents.wait_for(30s), std::future_status::ready);
  EXPECT_EQ(parents.get().release(), ReleaseResult::released);
}

}  // namespace
