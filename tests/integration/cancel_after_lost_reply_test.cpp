// A cancel after a lost first reply (issue 50, defect 4): an asynchronous acquire's first call
// runs on the server (uncontended: granted at once), then every connection is cut before its
// reply and new ones are refused; the user cancels during that outage. The request ends with
// CancelledError at once, and once the server is reachable again the entry the lost call made
// is given up in the background: the permit it held passes to another client long before its
// lease would have run out.

#include <gtest/gtest.h>

#include <chrono>
#include <exception>
#include <future>
#include <optional>
#include <string>

#include "cutting_proxy.hpp"
#include "exception_is.hpp"
#include "fairsem/fairsem.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "proxied_redis.hpp"
#include "script_command.hpp"
#include "test_env.hpp"
#include "wait.hpp"

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using detail::Connection;
using test::CuttingProxy;

TEST(CancelAfterLostReplyTest, TheEntryALostFirstReplyLeftIsGivenUpOnceTheServerIsBack) {
  CuttingProxy proxy(test::upstream_port());
  Connection admin(test::redis_options());
  // A lease far longer than the test's waits: only a leave frees the permit in time.
  const SemaphoreOptions o = test::unique_options(1, 10s);
  FairSemaphore proxied(test::through(proxy), "cancel-after-lost-reply", o);
  FairSemaphore direct(test::redis_options(), "cancel-after-lost-reply", o);

  proxy.cut_reply_to(test::script_command(admin), "acquire");
  proxy.go_away_at_cut();
  std::promise<std::exception_ptr> outcome;
  AcquireRequest request =
      proxied.acquire_async([&outcome](std::exception_ptr error, std::optional<Permit> permit) {
        outcome.set_value(permit ? nullptr : error);
      });
  ASSERT_TRUE(proxy.wait_for_cuts(1, 20s));
  // The server ran the call: it granted the permit, whose reply never came.
  ASSERT_EQ(direct.status().holders.size(), 1u);

  // The server is unreachable: the cancel ends the request at once all the same.
  EXPECT_TRUE(request.cancel());
  std::future<std::exception_ptr> done = outcome.get_future();
  ASSERT_EQ(done.wait_for(20s), std::future_status::ready);
  EXPECT_TRUE(test::exception_is<CancelledError>(done.get()));
  EXPECT_TRUE(proxy.away());

  proxy.serve_again();
  // Given up by the background leave, about a backoff (at most 1 s) after the server is back;
  // the lease would have held it for about 10 s more.
  const std::optional<Permit> next = direct.try_acquire_for(5s);
  EXPECT_TRUE(next.has_value()) << "the cancelled request's entry still holds the permit";
}

}  // namespace
}  // namespace fairsem
