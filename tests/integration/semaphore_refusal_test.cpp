// SemaphoreTest, refusals: another limit, a stored limit that is not a number, bad names and
// bad options, foreign keys of another type; each refused with a useful error, Redis unchanged.

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "fairsem/fairsem.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "semaphore_fixture.hpp"
#include "test_env.hpp"

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using test::redis_options;
using test::SemaphoreTest;

// Behaviour 9: the first client stores the limit; another limit is refused, changing nothing.
TEST_F(SemaphoreTest, AnotherLimitIsRefusedNamingBothNumbers) {
  FairSemaphore first(redis_options(), "limits", options(3, 60s));
  Permit p = first.acquire();
  const auto before = snapshot();
  try {
    FairSemaphore second(redis_options(), "limits", options(5));
    FAIL() << "opening with another limit must throw";
  } catch (const LimitMismatchError& e) {
    EXPECT_EQ(3, e.stored_limit());
    EXPECT_EQ(5, e.requested_limit());
    const std::string what = e.what();
    EXPECT_NE(std::string::npos, what.find("limit 5")) << what;
    EXPECT_NE(std::string::npos, what.find("limit 3")) << what;
    EXPECT_NE(std::string::npos, what.find("'limits'")) << what;
  }
  EXPECT_EQ(before, snapshot());
  EXPECT_EQ("3", admin_.command({"HGET", key("limits", "meta"), "limit"}).str);
}

// A limit that is not a number is refused by every operation, not only by open.
TEST_F(SemaphoreTest, AStoredLimitThatIsNotANumberIsRefusedAtAcquire) {
  FairSemaphore sem(redis_options(), "limit-later", options(2));
  admin_.command({"HSET", key("limit-later", "meta"), "limit", "seven"});
  EXPECT_THROW((void)sem.try_acquire(), ReplyError);
  EXPECT_EQ(0, integer({"EXISTS", key("limit-later", "owner")}));
}

// Behaviour 10: bad input is refused with InvalidArgument naming the problem, and nothing is
// written to Redis.
TEST_F(SemaphoreTest, BadNamesAreRefused) {
  const long long keys_before = integer({"DBSIZE"});
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "must not be empty"},
      {std::string(201, 'n'), "201 bytes"},
      {"a{b", "'{'"},
      {"a}b", "'}'"},
      {"a b", "whitespace"},
      {"a\tb", "\\x09"},
      {std::string("a\x01") + "b", "\\x01"},
      {"line\n", "\\x0a"},
  };
  for (const auto& [name, expected] : bad) {
    try {
      FairSemaphore sem(redis_options(), name, options(1));
      ADD_FAILURE() << "name \"" << name << "\" was accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string::npos, std::string(e.what()).find(expected)) << e.what();
      EXPECT_NE(std::string::npos, std::string(e.what()).find("semaphore name")) << e.what();
    }
  }
  EXPECT_NO_THROW(FairSemaphore(redis_options(), std::string(200, 'n'), options(1)));
  EXPECT_EQ(keys_before + 1, integer({"DBSIZE"}));  // only the valid one stored its limit
}

TEST_F(SemaphoreTest, BadOptionsAreRefused) {
  const long long keys_before = integer({"DBSIZE"});
  auto expect_refused = [&](SemaphoreOptions o, const std::string& expected) {
    try {
      FairSemaphore sem(redis_options(), "bad-options", o);
      ADD_FAILURE() << "accepted; expected an error mentioning " << expected;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string::npos, std::string(e.what()).find(expected)) << e.what();
    }
  };
  SemaphoreOptions o = options(1);
  o.limit = 0;
  expect_refused(o, "limit must be at least 1 and at most 1000000000, got 0");
  o.limit = -4;
  expect_refused(o, "got -4");
  o.limit = 1'000'000'001;
  expect_refused(o, "at most 1000000000, got 1000000001");
  o = options(1);
  o.lease = 0ms;
  expect_refused(o, "lease must be positive, got 0 ms");
  o.lease = -5ms;
  expect_refused(o, "got -5 ms");
  o.lease = std::chrono::hours(24 * 31);
  expect_refused(o, "lease must be at most");
  o = options(1, 3000ms);
  o.renew_interval = 3000ms;
  expect_refused(o, "renew_interval (3000 ms) must be shorter than the lease (3000 ms)");
  o.renew_interval = 5000ms;
  expect_refused(o, "renew_interval (5000 ms)");
  o.renew_interval = -1ms;
  expect_refused(o, "must not be negative");
  o = options(1);
  o.key_prefix = "my app";
  expect_refused(o, "key_prefix");
  o = options(1);
  o.permit_id = "id{1}";
  expect_refused(o, "permit_id");
  o = options(1);
  o.min_replicas = -1;
  expect_refused(o, "min_replicas must not be negative, got -1");
  o.min_replicas = 1;
  o.replica_timeout = 0ms;
  expect_refused(o, "replica_timeout must be positive, got 0 ms");
  o = options(1, 1000ms);  // renew interval 333 ms: a WAIT may take (1000 - 333) / 2 ms
  o.min_replicas = 1;
  o.replica_timeout = 334ms;
  expect_refused(o,
                 "replica_timeout (334 ms) must be at most half of lease - renew_interval "
                 "(333 ms here)");
  EXPECT_EQ(keys_before, integer({"DBSIZE"}));
}

// Puts a key of the wrong type (a hash for the counter, a string for the others) at `foreign`,
// a semaphore's `suffix` key, as another program would; returns its name.
std::string plant_foreign_key(detail::Connection& admin, std::string foreign,
                              const std::string& suffix) {
  if (suffix == "counter") {
    admin.command({"HSET", foreign, "field", "value"});
  } else {
    admin.command({"SET", foreign, "not fairsem's"});
  }
  return foreign;
}

TEST_F(SemaphoreTest, ForeignKeyOfAnotherTypeIsLeftAlone) {
  for (const std::string suffix : {"owner", "time", "meta", "info", "counter"}) {
    const std::string name = "foreign-" + suffix;
    const std::string foreign = plant_foreign_key(admin_, key(name, suffix), suffix);
    const auto before = snapshot();
    try {
      FairSemaphore sem(redis_options(), name, options(1));
      ADD_FAILURE() << "a foreign " << suffix << " key was accepted";
    } catch (const ReplyError& e) {
      EXPECT_NE(std::string::npos, std::string(e.what()).find("'" + foreign + "'")) << e.what();
      EXPECT_EQ(0u, e.server_message().find("WRONGTYPE")) << e.server_message();
    }
    EXPECT_EQ(before, snapshot()) << suffix;
  }
  // A counter that is a string but not a number is refused before anything is written: when
  // the semaphore is opened, and when it turns up later.
  const std::string counter = key("foreign-text", "counter");
  admin_.command({"SET", counter, "twelve"});
  auto before = snapshot();
  EXPECT_THROW(FairSemaphore(redis_options(), "foreign-text", options(1)), ReplyError);
  EXPECT_EQ(before, snapshot());
  admin_.command({"DEL", counter});
  FairSemaphore sem(redis_options(), "foreign-text", options(1));
  admin_.command({"SET", counter, "twelve"});
  before = snapshot();
  EXPECT_THROW((void)sem.try_acquire(), ReplyError);
  EXPECT_EQ(before, snapshot());
}

// The hot path reads some keys only when it needs them (an acquire of a semaphore nobody holds
// does not count the holders): a key of another type that turns up after the semaphore was
// opened is refused by the first access that needs it, naming it, with nothing written; an
// acquire and a release that do not need `free` leave it alone.
TEST_F(SemaphoreTest, AForeignKeyThatTurnsUpLaterIsRefusedOnTheHotPathWithNothingWritten) {
  for (const std::string suffix : {"owner", "time", "meta", "info", "counter", "slots"}) {
    const std::string name = "later-" + suffix;
    FairSemaphore sem(redis_options(), name, options(2));
    const std::string foreign = plant_foreign_key(admin_, key(name, suffix), suffix);
    const auto before = snapshot();
    try {
      (void)sem.try_acquire();
      ADD_FAILURE() << "a foreign " << suffix << " key was accepted";
    } catch (const ReplyError& e) {
      EXPECT_NE(std::string::npos, std::string(e.what()).find("'" + foreign + "'")) << e.what();
    }
    EXPECT_EQ(before, snapshot()) << suffix;
  }
  // slots or time turning up while a permit is held: its release is refused before writing.
  for (const std::string suffix : {"slots", "time"}) {
    const std::string name = "later-release-" + suffix;
    FairSemaphore held_sem(redis_options(), name, options(2));
    std::optional<Permit> permit = held_sem.try_acquire();
    ASSERT_TRUE(permit);
    admin_.command({"DEL", key(name, suffix)});
    const std::string foreign = plant_foreign_key(admin_, key(name, suffix), suffix);
    const auto before = snapshot();
    try {
      (void)permit->release();
      ADD_FAILURE() << "a foreign " << suffix << " key was accepted";
    } catch (const ReplyError& e) {
      EXPECT_NE(std::string::npos, std::string(e.what()).find("'" + foreign + "'")) << e.what();
    }
    EXPECT_EQ(before, snapshot()) << suffix;
  }

  // free turning up: a release that does not need it leaves it alone. (A foreign key where a
  // receipt goes costs only the receipt: ReceiptsTest.)
  for (const std::string suffix : {"free"}) {
    const std::string name = "later-" + suffix;
    FairSemaphore idle(redis_options(), name, options(2));
    const std::string foreign = plant_foreign_key(admin_, key(name, suffix), suffix);
    std::optional<Permit> granted = idle.try_acquire();
    ASSERT_TRUE(granted);
    EXPECT_EQ(granted->release(), ReleaseResult::released);
    EXPECT_EQ(admin_.command({"GET", foreign}).str, "not fairsem's") << suffix;
    EXPECT_EQ(integer({"EXISTS", key(name, "owner")}), 0) << suffix;  // nobody holds
  }
}

}  // namespace
}  // namespace fairsem
