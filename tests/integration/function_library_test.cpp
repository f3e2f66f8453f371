// The semaphore's scripts as one Redis function library (src/lua/semaphore, built by
// cmake/FairsemEmbedScriptsRun.cmake): FCALL where the server has functions, the library
// loaded when it is missing, and EVALSHA wherever functions are unknown, refused or taken; the
// listing and pruning of the libraries of each version (SemaphoreAdmin::function_libraries).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fairsem/fairsem.hpp>
#include <fairsem/impl/net/connection.hpp>
#include <fairsem/impl/protocol/scripts.hpp>

#include <string>

#include "acl_rule.hpp"
#include "semaphore_fixture.hpp"
#include "wait.hpp"

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using detail::Reply;
using detail::scripts::semaphore_library;
using test::redis_options;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

class FunctionLibraryTest : public test::SemaphoreFixture {
 protected:
  void SetUp() override {
    // Every test starts with no library, as on a server that never ran fairsem (the test
    // server may have run other tests before, in this process or, with
    // FAIRSEM_TEST_REDIS_URL, in others).
    if (has_functions()) admin_.command({"FUNCTION", "FLUSH"});
  }

  /// The names of the libraries on the server.
  std::vector<std::string> libraries() {
    std::vector<std::string> names;
    for (const Reply& library : admin_.command({"FUNCTION", "LIST"}).elements) {
      for (std::size_t i = 0; i + 1 < library.elements.size(); i += 2) {
        if (library.elements[i].str == "library_name") {
          names.push_back(library.elements[i + 1].str);
        }
      }
    }
    return names;
  }

  /// Options for an ACL user allowed this test's keys and, of fairsem's rule, `rule` (with the
  /// key pattern replaced by this test's prefix).
  ConnectionOptions user(const std::string& rule) {
    std::string scoped = rule;
    const std::string pattern = "~fairsem:*";
    scoped.replace(scoped.find(pattern), pattern.size(), "~" + prefix_ + "*");
    test::set_acl_user(admin_, "fairsem-fn", "fn-secret", scoped);
    ConnectionOptions o = redis_options();
    o.user = "fairsem-fn";
    o.password = "fn-secret";
    return o;
  }

  /// Commands the ACL refused since the last ACL LOG RESET, e.g. "fcall".
  std::vector<std::string> denied() {
    std::vector<std::string> out;
    for (const Reply& entry : admin_.command({"ACL", "LOG"}).elements) {
      for (std::size_t i = 0; i + 1 < entry.elements.size(); i += 2) {
        if (entry.elements[i].str == "object") out.push_back(entry.elements[i + 1].str);
      }
    }
    return out;
  }

  /// A grant, a waiter queued behind it, the hand-off and both releases: every path of the
  /// hot operations, with the scripts however they reach this server.
  void hand_off(const ConnectionOptions& connection, const std::string& name) {
    FairSemaphore sem(connection, name, options(1));
    std::optional<Permit> first = sem.try_acquire();
    ASSERT_TRUE(first);
    test::BackgroundWaiter waiter(sem);
    ASSERT_TRUE(test::wait_until([&] { return sem.status().waiters.size() == 1; }));
    EXPECT_EQ(ReleaseResult::released, first->release());
    Permit* second = waiter.result();
    ASSERT_NE(second, nullptr) << waiter.error;
    EXPECT_GT(second->fencing_token(), first->fencing_token());
    EXPECT_EQ(ReleaseResult::released, second->release());
    EXPECT_TRUE(sem.status().holders.empty());
  }
};

TEST_F(FunctionLibraryTest, EveryOperationIsAnFcallOfTheOneLibraryWhereTheServerHasFunctions) {
  if (!has_functions()) {
    // Redis 6.2: FCALL is an unknown command, and the semaphore runs on EVALSHA alone.
    admin_.command({"CONFIG", "RESETSTAT"});
    hand_off(redis_options(), "no-functions");
    EXPECT_GT(calls("evalsha"), 0);
    return;
  }
  admin_.command({"CONFIG", "RESETSTAT"});
  hand_off(redis_options(), "functions");
  EXPECT_GE(calls("fcall"), 5);  // open, try_acquire, acquire (queued), two releases, status
  EXPECT_EQ(1, calls("function|load"));  // by the first call, which found no library
  EXPECT_EQ(0, calls("evalsha"));
  EXPECT_EQ(0, calls("script|load"));  // nothing falls back, so no script is preloaded
  EXPECT_THAT(libraries(), ::testing::ElementsAre(std::string(semaphore_library.name)));
  EXPECT_THAT(std::string(semaphore_library.name), ::testing::MatchesRegex("fairsem_[0-9a-f]{12}"));
  // Every operation is a function of it.
  for (const detail::Script* script : detail::scripts::semaphore_scripts) {
    EXPECT_EQ(script->library, &semaphore_library) << script->name;
    EXPECT_THAT(std::string(script->function),
                StartsWith(std::string(semaphore_library.name) + "_"));
  }
}

TEST_F(FunctionLibraryTest, AFunctionFlushWhileAPermitIsHeldIsRepairedByLoadingTheLibraryAgain) {
  ASSERT_TRUE(has_functions()) << "this server has no functions";
  FairSemaphore sem(redis_options(), "flushed", options(1));
  Permit holder = sem.acquire();
  test::BackgroundWaiter waiter(sem);
  ASSERT_TRUE(test::wait_until([&] { return sem.status().waiters.size() == 1; }));
  admin_.command({"FUNCTION", "FLUSH"});  // an operator, or a restart without persistence
  EXPECT_THAT(libraries(), IsEmpty());
  admin_.command({"CONFIG", "RESETSTAT"});
  EXPECT_EQ(ReleaseResult::released, holder.release());  // not found, loaded, run again
  Permit* next = waiter.result();
  ASSERT_NE(next, nullptr) << waiter.error;
  EXPECT_EQ(1, calls("function|load"));
  EXPECT_EQ(0, calls("evalsha"));
  EXPECT_EQ(ReleaseResult::released, next->release());
  EXPECT_THAT(libraries(), ::testing::ElementsAre(std::string(semaphore_library.name)));
}

TEST_F(FunctionLibraryTest, AUserWithoutFcallRunsEverythingWithEvalsha) {
  ASSERT_TRUE(has_functions()) << "this server has no functions";
  const ConnectionOptions restricted = user(std::string(test::kFairsemAclRule));
  admin_.command({"ACL", "LOG", "RESET"});
  admin_.command({"CONFIG", "RESETSTAT"});
  hand_off(restricted, "no-fcall");
  EXPECT_GT(calls("evalsha"), 0);
  EXPECT_THAT(libraries(), IsEmpty());
  // What the ACL refused: FCALL, once per connection (each falls back on its own), and
  // nothing else.
  const std::vector<std::string> refused = denied();
  EXPECT_THAT(refused, ::testing::Not(IsEmpty()));
  EXPECT_THAT(refused, ::testing::Each(std::string("fcall")));
  // Scripts as before: a SCRIPT FLUSH costs a SCRIPT LOAD (counted as script|load from 7.0).
  admin_.command({"SCRIPT", "FLUSH"});
  admin_.command({"CONFIG", "RESETSTAT"});
  hand_off(restricted, "no-fcall");
  EXPECT_GE(calls("script|load"), 1);
  EXPECT_THAT(libraries(), IsEmpty());
}

TEST_F(FunctionLibraryTest, AUserWithFcallButNotFunctionLoadUsesTheLibraryAnOperatorLoaded) {
  ASSERT_TRUE(has_functions()) << "this server has no functions";
  const ConnectionOptions restricted = user(std::string(test::kFairsemAclRule) + " +fcall");
  // Not loaded yet: the user's FUNCTION LOAD is refused, and it runs scripts instead.
  admin_.command({"CONFIG", "RESETSTAT"});
  hand_off(restricted, "not-loaded");
  EXPECT_GT(calls("evalsha"), 0);
  EXPECT_THAT(libraries(), IsEmpty());
  // Loaded by an operator (generated/lua/semaphore_library.lua): FCALL alone from then on.
  EXPECT_EQ(admin_.command({"FUNCTION", "LOAD", semaphore_library.body}).str,
            semaphore_library.name);
  admin_.command({"CONFIG", "RESETSTAT"});
  hand_off(restricted, "loaded");
  EXPECT_GE(calls("fcall"), 5);
  EXPECT_EQ(0, calls("evalsha"));
  EXPECT_EQ(0, calls("function|load"));
}

TEST_F(FunctionLibraryTest, AForeignLibraryUnderTheLibrarysNameIsLeftAloneAndScriptsRunInstead) {
  ASSERT_TRUE(has_functions()) << "this server has no functions";
  const std::string name(semaphore_library.name);
  const std::string foreign = "#!lua name=" + name + "\nredis.register_function('" + name +
                              "_other', function() " + "return 'foreign' end)";
  admin_.command({"FUNCTION", "LOAD", foreign});
  admin_.command({"CONFIG", "RESETSTAT"});
  hand_off(redis_options(), "foreign");
  EXPECT_GT(calls("evalsha"), 0);
  EXPECT_EQ(admin_.command({"FCALL", name + "_other", "0"}).str, "foreign")
      << "the foreign library was replaced";
}

TEST_F(FunctionLibraryTest, NoCallSeesTheStateOfTheCallBeforeIt) {
  // A library's top level lives as long as the server, and its functions share it: begin()
  // sets the state of each call again (the block between "-- state {" and "-- } state" in
  // src/lua/semaphore/common.lua), here the count of waiters a resize promoted.
  FairSemaphore sem(redis_options(), "state", options(1));
  Permit holder = sem.acquire();
  test::BackgroundWaiter waiter(sem);
  ASSERT_TRUE(test::wait_until([&] { return sem.status().waiters.size() == 1; }));
  EXPECT_EQ(1, sem.resize(2).promoted);
  ASSERT_NE(waiter.result(), nullptr) << waiter.error;
  EXPECT_EQ(0, sem.resize(3).promoted);  // nobody waits
  EXPECT_EQ(0, FairSemaphore(redis_options(), "other", options(1)).resize(2).promoted);
}

TEST_F(FunctionLibraryTest, OutOfMemoryHoldersStillRenewAndReleaseButNoNewPermitIsGranted) {
  ASSERT_TRUE(has_functions()) << "this server has no functions";
  FairSemaphore sem(redis_options(), "oom", options(3));
  Permit first = sem.acquire();
  Permit second = sem.acquire();
  admin_.command({"CONFIG", "SET", "maxmemory-policy", "noeviction"});
  struct Limit {
    detail::Connection& admin;
    void lift() { admin.command({"CONFIG", "SET", "maxmemory", "0"}); }
    ~Limit() { lift(); }
  } limit{admin_};
  admin_.command({"CONFIG", "SET", "maxmemory", "1"});  // every byte in use is one too many
  admin_.command({"CONFIG", "RESETSTAT"});
  // acquire grows the data: refused whole, before it runs (its function has no allow-oom).
  try {
    (void)sem.try_acquire();
    ADD_FAILURE() << "a permit was granted with Redis out of memory";
  } catch (const ReplyError& e) {
    EXPECT_THAT(e.server_message(), StartsWith("OOM")) << e.what();
  }
  // open, release, renew and status may run (allow-oom): holders are never stuck.
  FairSemaphore reopened(redis_options(), "oom", options(3));
  EXPECT_TRUE(first.renew());
  ASSERT_EQ(2u, reopened.status().holders.size());
  EXPECT_EQ(ReleaseResult::released, first.release());
  EXPECT_GE(calls("fcall"), 4);
  EXPECT_EQ(0, calls("evalsha"));
  // With the library gone too, FUNCTION LOAD is refused (OOM): this release runs as a script.
  admin_.command({"FUNCTION", "FLUSH"});
  EXPECT_EQ(ReleaseResult::released, second.release());
  const long long scripts = calls("evalsha");  // NOSCRIPT, SCRIPT LOAD, EVALSHA again
  EXPECT_GE(scripts, 1);
  EXPECT_THAT(libraries(), IsEmpty());
  // With memory again, the next call loads the library and runs as a function.
  limit.lift();
  EXPECT_TRUE(sem.status().holders.empty());
  EXPECT_EQ(scripts, calls("evalsha"));
  EXPECT_THAT(libraries(), ::testing::ElementsAre(std::string(semaphore_library.name)));
}

TEST_F(FunctionLibraryTest, ListingNamesEachVersionsLibraryAndPruningDeletesAllButThisVersions) {
  const Client client(redis_options());
  if (!has_functions()) {
    // Redis 6.2: no library to list or delete, and no error for it.
    EXPECT_THAT(SemaphoreAdmin::function_libraries(client), IsEmpty());
    EXPECT_THAT(SemaphoreAdmin::prune_function_libraries(client), IsEmpty());
    return;
  }
  // Libraries of two other fairsem versions (one from before versions were recorded), and two
  // that are not fairsem's although one has its prefix.
  const auto load = [&](const std::string& name, const std::string& description) {
    const std::string body = "#!lua name=" + name + "\nredis.register_function{function_name = '" +
                             name + "_f', callback = function() return 1 end" +
                             (description.empty() ? "" : ", description = '" + description + "'") +
                             "}";
    admin_.command({"FUNCTION", "LOAD", body});
  };
  load("fairsem_0123456789ab", "");
  load("fairsem_abcdef012345", "fairsem 9.9.9");
  load("fairsem_mine", "fairsem 1.0.0");
  load("billing", "");
  hand_off(redis_options(), "current");  // loads this version's

  const std::string node = admin_.endpoint();
  const std::vector<FunctionLibrary> listed = SemaphoreAdmin::function_libraries(client);
  ASSERT_EQ(3u, listed.size());
  EXPECT_EQ(std::string(semaphore_library.name), listed[0].name);
  EXPECT_TRUE(listed[0].current);
  EXPECT_EQ(std::string(version()), listed[0].version);
  EXPECT_EQ(detail::scripts::semaphore_scripts.size(), listed[0].functions);
  EXPECT_EQ(node, listed[0].node);
  EXPECT_EQ("fairsem_0123456789ab", listed[1].name);
  EXPECT_EQ("", listed[1].version);
  EXPECT_FALSE(listed[1].current);
  EXPECT_EQ(1u, listed[1].functions);
  EXPECT_EQ("fairsem_abcdef012345", listed[2].name);
  EXPECT_EQ("9.9.9", listed[2].version);
  EXPECT_EQ(node, listed[2].node);

  // A dry run deletes nothing.
  const auto names = [](const std::vector<FunctionLibrary>& libraries) {
    std::vector<std::string> out;
    for (const FunctionLibrary& l : libraries) out.push_back(l.name);
    return out;
  };
  const std::vector<std::string> others = {"fairsem_0123456789ab", "fairsem_abcdef012345"};
  EXPECT_EQ(others, names(SemaphoreAdmin::prune_function_libraries(client, /*dry_run=*/true)));
  EXPECT_EQ(5u, libraries().size());
  // Pruning deletes the other versions' libraries, and only those.
  EXPECT_EQ(others, names(SemaphoreAdmin::prune_function_libraries(client)));
  EXPECT_THAT(libraries(), ::testing::UnorderedElementsAre(std::string(semaphore_library.name),
                                                           "fairsem_mine", "billing"));
  EXPECT_THAT(SemaphoreAdmin::prune_function_libraries(client), IsEmpty());
  // This version goes on as before, without loading its library again.
  admin_.command({"CONFIG", "RESETSTAT"});
  hand_off(redis_options(), "current");
  EXPECT_EQ(0, calls("function|load"));
  EXPECT_EQ(0, calls("evalsha"));
}

}  // namespace
}  // namespace fairsem
