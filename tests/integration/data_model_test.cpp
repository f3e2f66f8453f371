// A semaphore whose keys a later fairsem wrote in a data model this client cannot read (meta's
// `model` above 2, see "Data model" in src/lua/semaphore/common.lua): every operation is
// refused with DataModelError, naming both data models and the version that wrote the data,
// and nothing in Redis changes. Data model 2, stored or not, is this client's own.

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "fairsem/fairsem.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "semaphore_fixture.hpp"
#include "test_env.hpp"

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using detail::Args;
using detail::Connection;
using detail::Reply;
using test::redis_options;

class DataModelTest : public test::SemaphoreFixture {
 protected:
  /// Runs operation `args[0]` of semaphore `name` directly, limit 1, lease 60 s.
  Reply run(const std::string& name, const Args& args) {
    return run_op(conn_, name, args, "1", "60000");
  }
  Connection conn_{redis_options()};
};

TEST_F(DataModelTest, ALaterDataModelIsRefusedByEveryOperationWithNothingWritten) {
  SemaphoreOptions o = options(1, 60s);
  FairSemaphore sem(redis_options(), "later", o);
  std::optional<Permit> held = sem.try_acquire();
  ASSERT_TRUE(held);
  // A later fairsem took the semaphore's data on to its data model 4.
  admin_.command({"HSET", key("later", "meta"), "model", "4", "model_by", "9.1.0"});
  const auto before = snapshot();
  const auto refused = [&](const DataModelError& e) {
    EXPECT_EQ(e.stored_model(), "4");
    EXPECT_EQ(e.supported_model(), 3);
    EXPECT_EQ(e.written_by(), "9.1.0");
    EXPECT_NE(std::string(e.what()).find("the semaphore's keys are in data model 4 (written by "
                                         "fairsem 9.1.0), and this client (fairsem " +
                                         std::string(version()) +
                                         ") reads and writes data model 3; nothing was changed"),
              std::string::npos)
        << e.what();
  };
  try {
    FairSemaphore opened(redis_options(), "later", o);
    ADD_FAILURE() << "opened";
  } catch (const DataModelError& e) {
    refused(e);
  }
  try {
    (void)sem.try_acquire();
    ADD_FAILURE() << "acquired";
  } catch (const DataModelError& e) {
    refused(e);
  }
  // (A refused release drops the permit in this process; its entry stays in Redis.)
  try {
    (void)held->release();
    ADD_FAILURE() << "released";
  } catch (const DataModelError& e) {
    refused(e);
  }
  SemaphoreAdmin admin(redis_options(), "later", prefix_);
  EXPECT_THROW((void)admin.status(), DataModelError);
  EXPECT_THROW((void)admin.evict(held->id()), DataModelError);
  EXPECT_THROW((void)admin.resize(2), DataModelError);
  // Every script refuses it first, whatever else its call would do.
  const std::string ticket = std::to_string(held->fencing_token());
  for (const Args& call :
       {Args{"open"}, Args{"acquire", "x", "queue", "o"},
        Args{"release", held->id(), ticket, "60000"}, Args{"renew", held->id(), ticket},
        Args{"status"}, Args{"evict", held->id()}, Args{"resize", "2"}, Args{"tenant", "t", "2"}}) {
    const Reply r = run("later", call);
    ASSERT_EQ(r.elements.size(), 4U) << call[0];
    EXPECT_EQ(r.elements[0].integer, -7) << call[0];
    EXPECT_EQ(r.elements[1].str, "4") << call[0];
    EXPECT_EQ(r.elements[2].integer, 3) << call[0];
    EXPECT_EQ(r.elements[3].str, "9.1.0") << call[0];
  }
  EXPECT_EQ(before, snapshot());

  // Without model_by, and with a model that is not a number: refused all the same.
  admin_.command({"HDEL", key("later", "meta"), "model_by"});
  admin_.command({"HSET", key("later", "meta"), "model", "3.x"});
  try {
    (void)sem.try_acquire();
    ADD_FAILURE() << "acquired";
  } catch (const DataModelError& e) {
    EXPECT_EQ(e.stored_model(), "3.x");
    EXPECT_EQ(e.written_by(), "");
    EXPECT_NE(std::string(e.what()).find("data model 3.x, and this client"), std::string::npos)
        << e.what();
  }

  // Data model 2 is this client's own: the entry the refused release left is there to evict,
  // and the next permit is granted.
  admin_.command({"HSET", key("later", "meta"), "model", "2"});
  EXPECT_EQ(admin.evict(held->id()), EvictResult::holder);
  std::optional<Permit> next = sem.try_acquire();
  ASSERT_TRUE(next);
  EXPECT_EQ(next->release(), ReleaseResult::released);
}

}  // namespace
}  // namespace fairsem
