// MovedFromTest: every movable public class is safe after a move. A moved-from FairSemaphore,
// SemaphoreAdmin, Client or SemaphoreLock throws UsedAfterMoveError from every call (name() is
// empty) and sends nothing; a moved-from Permit is an empty one, and a moved-from
// AcquireRequest has nothing to cancel; and a SemaphoreLock follows its semaphore to the handle
// it moved to (a std::vector<FairSemaphore> that grows).

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fairsem/fairsem.hpp"
#include "semaphore_fixture.hpp"
#include "test_env.hpp"

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using test::redis_options;

class MovedFromTest : public test::SemaphoreFixture {};

TEST_F(MovedFromTest, AMovedFromFairSemaphoreThrowsUsedAfterMoveFromEveryCallAndHasNoName) {
  FairSemaphore sem(redis_options(), "moved", options(2));
  FairSemaphore taker(std::move(sem));
  EXPECT_EQ(sem.name(), "");  // NOLINT(bugprone-use-after-move): what the test is about
  EXPECT_THROW((void)sem.options(), UsedAfterMoveError);
  EXPECT_THROW((void)sem.try_acquire(), UsedAfterMoveError);
  EXPECT_THROW((void)sem.acquire(), UsedAfterMoveError);
  EXPECT_THROW((void)sem.try_acquire_for(10ms), UsedAfterMoveError);
  EXPECT_THROW((void)sem.try_acquire_until(std::chrono::system_clock::now() + 10ms),
               UsedAfterMoveError);
  EXPECT_THROW((void)sem.acquire_async(), UsedAfterMoveError);
  EXPECT_THROW((void)sem.try_acquire_for_async(10ms), UsedAfterMoveError);
  EXPECT_THROW((void)sem.acquire_async([](std::exception_ptr, std::optional<Permit>) {}),
               UsedAfterMoveError);
  EXPECT_THROW((void)sem.acquire_async_until(std::chrono::steady_clock::now() + 10ms,
                                             [](std::exception_ptr, std::optional<Permit>) {}),
               UsedAfterMoveError);
  EXPECT_THROW((void)sem.renew_all(), UsedAfterMoveError);
  EXPECT_THROW((void)sem.status(), UsedAfterMoveError);
  EXPECT_THROW((void)sem.evict("someone"), UsedAfterMoveError);
  EXPECT_THROW((void)sem.resize(3), UsedAfterMoveError);
  EXPECT_THROW((void)sem.metrics(), UsedAfterMoveError);
  try {
    (void)sem.try_acquire();
  } catch (const UsedAfterMoveError& e) {
    EXPECT_NE(std::string(e.what()).find("FairSemaphore was used after it was moved from"),
              std::string::npos)
        << e.what();
  }

  // A moved-from AcquireRequest has nothing to cancel.
  AcquireRequest request;
  AcquireRequest moved = std::move(request);
  EXPECT_FALSE(request.cancel());  // NOLINT(bugprone-use-after-move)

  // Nothing was sent: the semaphore is as the handle it moved to left it, and that one works.
  EXPECT_EQ(taker.name(), "moved");
  EXPECT_EQ(taker.metrics().acquire_attempts, 0u);
  EXPECT_TRUE(taker.status().holders.empty());
  EXPECT_TRUE(taker.try_acquire().has_value());

  // Assigned to, it is a handle again.
  sem = FairSemaphore(redis_options(), "moved", options(2));
  EXPECT_EQ(sem.name(), "moved");
  EXPECT_TRUE(sem.try_acquire().has_value());
}

TEST_F(MovedFromTest, ASemaphoreLockFollowsItsSemaphoreWhenAVectorOfThemGrows) {
  std::vector<FairSemaphore> semaphores;
  semaphores.reserve(1);
  semaphores.emplace_back(redis_options(), "grown-0", options(1));
  SemaphoreLock lock(semaphores[0]);
  for (int i = 1; i < 8; ++i) {  // reallocates: the first semaphore moves, more than once
    semaphores.emplace_back(redis_options(), "grown-" + std::to_string(i), options(1));
  }
  {
    std::unique_lock<SemaphoreLock> guard(lock);
    EXPECT_TRUE(lock.permit().held());
    // The lock holds grown-0's one permit: the handle it moved to sees it taken.
    EXPECT_EQ(semaphores[0].status().holders.size(), 1u);
    EXPECT_FALSE(semaphores[0].try_acquire().has_value());
  }
  EXPECT_TRUE(semaphores[0].status().holders.empty());
  EXPECT_TRUE(lock.try_lock());
  lock.unlock();
  EXPECT_TRUE(lock.try_lock_until(std::chrono::system_clock::now() + 1s));
  lock.unlock();
}

TEST_F(MovedFromTest, ASemaphoreLockKeepsWorkingAfterItsHandleMovesAndIsDestroyed) {
  std::optional<FairSemaphore> first(std::in_place, redis_options(), "lock-moved", options(1));
  SemaphoreLock lock(*first, 1);
  FairSemaphore second(std::move(*first));
  first.reset();
  lock.lock();
  EXPECT_EQ(second.status().holders.size(), 1u);
  EXPECT_EQ(second.status().holders.at(0).id, lock.permit().id());
  lock.unlock();
  EXPECT_TRUE(second.status().holders.empty());

  // A lock of a moved-from semaphore cannot be made; a moved-from lock cannot lock.
  FairSemaphore emptied(std::move(second));
  EXPECT_THROW(SemaphoreLock{second}, UsedAfterMoveError);  // NOLINT(bugprone-use-after-move)
  SemaphoreLock taker(std::move(lock));
  EXPECT_THROW(lock.lock(), UsedAfterMoveError);  // NOLINT(bugprone-use-after-move)
  EXPECT_THROW((void)lock.try_lock(), UsedAfterMoveError);
  EXPECT_THROW((void)lock.try_lock_for(1ms), UsedAfterMoveError);
  EXPECT_FALSE(lock.permit().held());
  EXPECT_TRUE(taker.try_lock());
  EXPECT_THROW((void)taker.try_lock(), std::system_error);
  taker.unlock();

  // The last handle of the semaphore destroyed: the lock still has what it needs.
  { const FairSemaphore gone(std::move(emptied)); }
  EXPECT_TRUE(taker.try_lock());
  EXPECT_EQ(1u,
            SemaphoreAdmin(test::redis_options(), "lock-moved", prefix_).status().holders.size());
  taker.unlock();
}

TEST_F(MovedFromTest, AMovedFromSemaphoreAdminThrowsUsedAfterMoveAndHasNoName) {
  FairSemaphore sem(redis_options(), "admin-moved", options(1));
  SemaphoreAdmin admin(redis_options(), "admin-moved", prefix_);
  SemaphoreAdmin taker(std::move(admin));
  EXPECT_EQ(admin.name(), "");  // NOLINT(bugprone-use-after-move)
  EXPECT_THROW((void)admin.status(), UsedAfterMoveError);
  EXPECT_THROW((void)admin.evict("someone"), UsedAfterMoveError);
  EXPECT_THROW((void)admin.resize(2), UsedAfterMoveError);
  EXPECT_EQ(taker.status().limit, 1);
  admin = std::move(taker);
  EXPECT_EQ(admin.name(), "admin-moved");
  EXPECT_EQ(admin.status().limit, 1);
}

TEST_F(MovedFromTest, AMovedFromClientThrowsUsedAfterMoveFromWhatUsesIt) {
  Client client(redis_options());
  Client taker(std::move(client));
  EXPECT_THROW((void)client.connection(), UsedAfterMoveError);  // NOLINT(bugprone-use-after-move)
  EXPECT_THROW(FairSemaphore(client, "client-moved", options(1)), UsedAfterMoveError);
  EXPECT_THROW(SemaphoreAdmin(client, "client-moved", prefix_), UsedAfterMoveError);
  EXPECT_THROW((void)SemaphoreAdmin::list(client, prefix_), UsedAfterMoveError);
  EXPECT_THROW((void)SemaphoreAdmin::function_libraries(client), UsedAfterMoveError);
  EXPECT_THROW((void)SemaphoreAdmin::prune_function_libraries(client, true), UsedAfterMoveError);
  const Client copy(client);  // a copy of a moved-from Client is one too
  EXPECT_THROW((void)copy.connection(), UsedAfterMoveError);
  // The Client it moved to works, and so does one assigned to the moved-from one.
  FairSemaphore sem(taker, "client-moved", options(1));
  EXPECT_TRUE(sem.try_acquire().has_value());
  client = taker;
  EXPECT_EQ(client.connection().port, taker.connection().port);
}

TEST_F(MovedFromTest, AMovedFromPermitIsAnEmptyOne) {
  FairSemaphore sem(redis_options(), "permit-moved", options(1));
  Permit permit = sem.acquire();
  const std::string id = permit.id();
  Permit taker(std::move(permit));
  EXPECT_FALSE(permit.held());  // NOLINT(bugprone-use-after-move)
  EXPECT_FALSE(permit.lost());
  EXPECT_EQ(permit.id(), "");
  EXPECT_EQ(permit.fencing_token(), 0);
  EXPECT_EQ(permit.count(), 0);
  EXPECT_TRUE(permit.slots().empty());
  EXPECT_EQ(permit.slot(), -1);
  EXPECT_FALSE(permit.renew());
  EXPECT_EQ(permit.release(), ReleaseResult::already_released);
  EXPECT_EQ(permit.release(1), ReleaseResult::already_released);
  std::optional<ReleaseResult> released;
  permit.release_async([&](std::exception_ptr, ReleaseResult r) { released = r; });
  EXPECT_EQ(released, ReleaseResult::already_released);
  // The permit moved on and is still held.
  EXPECT_TRUE(taker.held());
  EXPECT_EQ(taker.id(), id);
  EXPECT_EQ(sem.status().holders.size(), 1u);
}

}  // namespace
}  // namespace fairsem
