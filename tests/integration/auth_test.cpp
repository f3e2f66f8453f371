// AUTH on connect: password-only (requirepass) and ACL users; wrong or missing credentials are
// an AuthError that is not retried, whatever command meets the refusal; no error text ever
// contains the password.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fairsem/fairsem.hpp>
#include <fairsem/impl/net/connection.hpp>

#include <functional>
#include <string>
#include <vector>

#include "fake_peer.hpp"
#include "test_env.hpp"

namespace {

using fairsem::AuthError;
using fairsem::ConnectionError;
using fairsem::detail::Connection;
using fairsem::test::FakePeer;
using fairsem::test::redis_options;
using fairsem::test::RedisServer;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

constexpr const char* kSecret = "Pa55-SECRET-w0rd";

// Creates an ACL user on the shared server for the duration of a test.
class AclUser {
 public:
  explicit AclUser(const std::string& tag) : name_("u" + std::to_string(::getpid()) + tag) {
    admin_.command(
        {"ACL", "SETUSER", name_, "reset", "on", std::string(">") + kSecret, "~*", "+@all"});
  }
  ~AclUser() { admin_.command({"ACL", "DELUSER", name_}); }
  const std::string& name() const { return name_; }

 private:
  Connection admin_{redis_options()};
  std::string name_;
};

TEST(AuthTest, AclUserWithTheRightPasswordIsThatUser) {
  AclUser user("right");
  auto o = redis_options();
  o.user = user.name();
  o.password = kSecret;
  Connection c(o);
  EXPECT_EQ(c.command({"ACL", "WHOAMI"}).str, user.name());
}

TEST(AuthTest, UrlCredentialsArePercentDecodedBeforeAuth) {
  AclUser user("url");
  auto base = redis_options();
  // "Pa55-SECRET-w0rd" with every character but the dashes percent-encoded where legal.
  std::string url = fairsem::test::test_url(
      user.name() + ":Pa55%2DSECRET%2Dw0rd@127.0.0.1:" + std::to_string(base.port));
  Connection c(fairsem::ConnectionOptions::from_url(url));
  EXPECT_EQ(c.command({"ACL", "WHOAMI"}).str, user.name());
}

TEST(AuthTest, WrongPasswordIsAnAuthErrorNamingTheUserButNotThePassword) {
  AclUser user("wrong");
  auto o = redis_options();
  o.user = user.name();
  o.password = std::string(kSecret) + "-typo";
  try {
    Connection c(o);
    FAIL() << "authenticated with a wrong password";
  } catch (const AuthError& e) {
    EXPECT_THAT(e.what(), HasSubstr("authentication to " + o.endpoint() + " as user '" +
                                    user.name() + "' failed"));
    EXPECT_THAT(e.what(), HasSubstr("WRONGPASS"));
    EXPECT_THAT(e.what(), ::testing::Not(HasSubstr("SECRET")));
  }
}

TEST(AuthTest, RequirepassServerAcceptsThePasswordAndRejectsOthers) {
  RedisServer server({"--requirepass", kSecret});
  auto o = fairsem::ConnectionOptions::from_url(server.url());
  o.password = kSecret;
  Connection ok(o);
  EXPECT_EQ(ok.command({"PING"}).str, "PONG");

  o.password = "not-it-SECRET";
  EXPECT_THROW(Connection c(o), AuthError);

  // Without a password the connection opens but every command is refused by the server: an
  // AuthError, like wrong credentials, not a ReplyError.
  o.password.clear();
  Connection anonymous(o);
  try {
    anonymous.command({"PING"});
    FAIL();
  } catch (const AuthError& e) {
    EXPECT_THAT(e.what(), HasSubstr("requires authentication"));
    EXPECT_THAT(e.what(), HasSubstr("NOAUTH"));
  }
}

// Redis answers an unauthenticated command of more than 10 arguments with "ERR Protocol error:
// unauthenticated multibulk length" before it would say NOAUTH; a semaphore's first script
// call is such a command. Whatever comes first, a missing password is an AuthError.
TEST(AuthTest, AMissingPasswordIsAnAuthErrorWhateverTheFirstCommand) {
  RedisServer server({"--requirepass", kSecret});
  const auto o = fairsem::ConnectionOptions::from_url(server.url());
  EXPECT_THROW(fairsem::FairSemaphore(o, "s", fairsem::SemaphoreOptions{}), AuthError);
  fairsem::Client client(o);
  EXPECT_THROW(fairsem::FairSemaphore(client, "s", fairsem::SemaphoreOptions{}), AuthError);
  Connection anonymous(o);
  std::vector<std::string> many(12, "k");
  fairsem::detail::Args argv{"EVAL", "return 1", "11"};
  for (const std::string& k : many) argv.emplace_back(k);
  try {
    anonymous.command(argv);
    FAIL();
  } catch (const AuthError& e) {
    EXPECT_THAT(e.what(), HasSubstr("unauthenticated"));
  }
  // With a database to SELECT, the handshake itself meets the refusal.
  auto with_db = o;
  with_db.db = 1;
  EXPECT_THROW(Connection c(with_db), AuthError);
  // Nothing was written meanwhile.
  auto admin = o;
  admin.password = kSecret;
  EXPECT_EQ(Connection(admin).command({"DBSIZE"}).integer, 0);
}

// An ACL deployment whose default user is off: a Client without a user and password is refused
// with an AuthError too.
TEST(AuthTest, AClientWithoutCredentialsOnAnAclServerGetsAnAuthError) {
  RedisServer server;
  Connection admin(fairsem::ConnectionOptions::from_url(server.url()));
  admin.command({"ACL", "SETUSER", "ops", "on", std::string(">") + kSecret, "~*", "+@all"});
  admin.command({"ACL", "SETUSER", "default", "off"});
  const auto o = fairsem::ConnectionOptions::from_url(server.url());
  EXPECT_THROW(fairsem::FairSemaphore(o, "s", fairsem::SemaphoreOptions{}), AuthError);
  auto ops = o;
  ops.user = "ops";
  ops.password = kSecret;
  fairsem::FairSemaphore works(ops, "s", fairsem::SemaphoreOptions{});
  EXPECT_TRUE(works.try_acquire().has_value());
}

TEST(AuthTest, AuthErrorIsNotRetriedByReconnect) {
  RedisServer server;
  Connection admin(fairsem::ConnectionOptions::from_url(server.url()));
  admin.command({"ACL", "SETUSER", "carol", "on", ">old-pw", "~*", "+@all"});
  auto o = fairsem::ConnectionOptions::from_url(server.url());
  o.user = "carol";
  o.password = "old-pw";
  o.reconnect_attempts = 5;
  o.reconnect_backoff_min = 1ms;
  Connection c(o);
  const std::string id = std::to_string(c.command({"CLIENT", "ID"}).integer);

  // The password changes and the connection drops: reconnecting must stop at the first refusal.
  admin.command({"ACL", "SETUSER", "carol", "resetpass", ">new-pw"});
  admin.command({"CLIENT", "KILL", "ID", id});
  EXPECT_THROW(c.command({"PING"}), ConnectionError);  // the in-flight command sees the drop
  EXPECT_THROW(c.command({"PING"}), AuthError);        // the reconnect sees the refusal

  // ACL LOG groups failed AUTHs per user and counts them: exactly one attempt was made.
  fairsem::detail::Reply log = admin.command({"ACL", "LOG"});
  ASSERT_EQ(log.elements.size(), 1u);
  const auto& entry = log.elements[0].elements;
  for (std::size_t i = 0; i + 1 < entry.size(); i += 2) {
    if (entry[i].str == "count") {
      EXPECT_EQ(entry[i + 1].integer, 1);
    } else if (entry[i].str == "username") {
      EXPECT_EQ(entry[i + 1].str, "carol");
    }
  }
}

// Every failure path a connection can take, with a password set: none may echo it.
TEST(AuthTest, NoErrorMessageContainsThePassword) {
  std::vector<std::string> messages;
  auto capture = [&](const std::function<void()>& f) {
    try {
      f();
      ADD_FAILURE() << "expected an error from case " << messages.size();
    } catch (const fairsem::Error& e) {
      messages.emplace_back(e.what());
    }
  };
  const std::string secret = kSecret;
  const int closed_port = fairsem::test::free_loopback_port();
  AclUser user("noecho");
  auto with = [&](int port) {
    auto o = redis_options();
    o.port = port;
    o.user = user.name();
    o.password = secret;
    o.reconnect_attempts = 2;
    o.reconnect_backoff_min = 1ms;
    o.connect_timeout = 300ms;
    o.command_timeout = 300ms;
    return o;
  };
  // malformed URLs
  capture([&] { (void)fairsem::ConnectionOptions::from_url("redis://u:" + secret + "@h:0"); });
  capture([&] { (void)fairsem::ConnectionOptions::from_url("redis://u:" + secret + "%@h"); });
  // refused, silent, timed out on connect
  capture([&] { Connection c(with(closed_port)); });
  FakePeer silent(FakePeer::Mode::silent);
  capture([&] { Connection c(with(silent.port())); });
  FakePeer full(FakePeer::Mode::never_accept);
  capture([&] { Connection c(with(full.port())); });
  // wrong password, and the server's own error for the wrong password
  capture([&] {
    auto o = with(redis_options().port);
    o.password = secret + "x";
    Connection c(o);
  });
  // reply errors and a broken connection on a good login
  Connection good(with(redis_options().port));
  capture([&] { good.command({"NOSUCHCOMMAND"}); });
  capture([&] {
    const std::string id = std::to_string(good.command({"CLIENT", "ID"}).integer);
    good.command({"CLIENT", "KILL", "ID", id, "SKIPME", "no"});
    good.command({"PING"});
  });
  // reconnect that gives up
  FakePeer hangup(FakePeer::Mode::hang_up);
  capture([&] {
    auto o = with(hangup.port());
    o.reconnect_attempts = 1;
    Connection c(o);
  });

  ASSERT_GE(messages.size(), 8u);
  for (const auto& m : messages) {
    EXPECT_THAT(m, ::testing::Not(HasSubstr("SECRET"))) << m;
    EXPECT_THAT(m, ::testing::Not(HasSubstr(secret))) << m;
  }
}

}  // namespace
