// ConnectionOptions::client_name: each of a Client's connections names itself after what it
// does (CLIENT SETNAME "<name>:pool", ":renew", ":wake"), so that CLIENT LIST tells an operator,
// or the stress harness's faults, which connection is which. A name Redis would refuse is an
// InvalidArgument before anything connects; an ACL user without CLIENT SETNAME gets an
// AuthError that says so, and nothing is written.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include "fairsem/fairsem.hpp"
#include "semaphore_fixture.hpp"
#include "test_env.hpp"
#include "wait.hpp"

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using test::redis_options;
using test::wait_until;
using ::testing::HasSubstr;

class ClientNameTest : public test::SemaphoreFixture {
 protected:
  /// The names of the server's connections that start with `prefix`.
  std::set<std::string> names_starting(const std::string& prefix) {
    std::set<std::string> names;
    std::istringstream lines(admin_.command({"CLIENT", "LIST"}).str);
    for (std::string line; std::getline(lines, line);) {
      const auto at = line.find(" name=");
      if (at == std::string::npos) continue;
      const std::string name = line.substr(at + 6, line.find(' ', at + 6) - (at + 6));
      if (name.rfind(prefix, 0) == 0) names.insert(name);
    }
    return names;
  }
};

TEST_F(ClientNameTest, EachConnectionSaysWhoseItIsAndWhatItDoes) {
  const std::string name = "svc-" + std::to_string(::getpid());
  ConnectionOptions c = redis_options();
  c.client_name = name;
  Client client(c);
  FairSemaphore sem(client, "named", options(1, 600ms));  // renewed every 200 ms
  Permit held = sem.acquire();
  std::future<std::optional<Permit>> waiting = sem.try_acquire_for_async(10s);
  ASSERT_TRUE(wait_until([&] { return sem.metrics().renewals >= 1; }));
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  EXPECT_TRUE(wait_until([&] {
    return names_starting(name) ==
           std::set<std::string>{name + ":pool", name + ":renew", name + ":wake"};
  })) << "the connections named "
      << name << "...: " << testing::PrintToString(names_starting(name));
  EXPECT_EQ(held.release(), ReleaseResult::released);
  const std::optional<Permit> granted = waiting.get();
  ASSERT_TRUE(granted.has_value());
}

TEST_F(ClientNameTest, ANameRedisWouldRefuseIsAnInvalidArgument) {
  ConnectionOptions c = redis_options();
  c.client_name = "my app";
  try {
    Client client(c);
    FAIL() << "a name with a space was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("client_name has character code 32 at position 2"));
  }
  c.client_name = "caf\xc3\xa9";
  EXPECT_THROW(Client{c}, InvalidArgument);
}

TEST_F(ClientNameTest, AUserWithoutClientSetnameGetsAnAuthErrorAndNothingIsWritten) {
  const std::string user = "u" + std::to_string(::getpid()) + "-noname";
  // All of CLIENT taken away: Redis 6.2 cannot take away one subcommand (-client|setname).
  admin_.command({"ACL", "SETUSER", user, "reset", "on", ">pw", "~*", "+@all", "-client"});
  ConnectionOptions c = redis_options();
  c.user = user;
  c.password = "pw";
  c.client_name = "refused";
  try {
    Client client(c);
    FairSemaphore sem(client, "refused", options(1));
    (void)sem.try_acquire();
    FAIL() << "CLIENT SETNAME was refused, and yet the acquire went on";
  } catch (const AuthError& e) {
    EXPECT_THAT(e.what(), HasSubstr("CLIENT SETNAME refused:pool"));
    EXPECT_THAT(e.what(), HasSubstr("NOPERM"));
    EXPECT_THAT(e.what(), HasSubstr("needs +client|setname, or leave client_name empty"));
  }
  EXPECT_TRUE(snapshot().empty());
  admin_.command({"ACL", "DELUSER", user});
}

}  // namespace
}  // namespace fairsem
