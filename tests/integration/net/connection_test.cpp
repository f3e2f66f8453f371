// The hiredis connection layer against a real redis-server (and, for failure modes that a
// healthy server cannot produce, loopback peers that misbehave on purpose).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fairsem/impl/net/connection.hpp>

#include <unistd.h>

#include <string>

#include "fake_peer.hpp"
#include "test_env.hpp"

namespace {

using fairsem::ConnectionError;
using fairsem::ReplyError;
using fairsem::TimeoutError;
using fairsem::detail::Connection;
using fairsem::detail::Reply;
using fairsem::test::FakePeer;
using fairsem::test::redis_options;
using fairsem::test::unique_prefix;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

fairsem::ConnectionOptions options_for_port(int port) {
  fairsem::ConnectionOptions o;
  o.port = port;
  o.connect_timeout = 500ms;
  o.command_timeout = 300ms;
  o.reconnect_attempts = 1;
  return o;
}

long long client_id(Connection& c) { return c.command({"CLIENT", "ID"}).integer; }

void kill_client(long long id) {
  Connection admin(redis_options());
  ASSERT_EQ(admin.command({"CLIENT", "KILL", "ID", std::to_string(id)}).integer, 1);
}

TEST(ConnectionTest, PingsTheServer) {
  Connection c(redis_options());
  EXPECT_FALSE(c.broken());
  Reply r = c.command({"PING"});
  EXPECT_EQ(r.type, Reply::Type::status);
  EXPECT_EQ(r.str, "PONG");
}

TEST(ConnectionTest, ArgumentsAndRepliesAreBinarySafe) {
  Connection c(redis_options());
  const std::string key = unique_prefix() + std::string("\0\r\n key", 8);
  const std::string value("a\0b\r\n$3\r\n*1\xff", 13);
  EXPECT_EQ(c.command({"SET", key, value}).str, "OK");
  Reply got = c.command({"GET", key});
  ASSERT_EQ(got.type, Reply::Type::string);
  EXPECT_EQ(got.str, value);
  EXPECT_EQ(c.command({"STRLEN", key}).integer, 13);
}

TEST(ConnectionTest, PipelineReturnsEveryReplyInOrderIncludingErrors) {
  Connection c(redis_options());
  const std::string counter = unique_prefix() + ":counter";
  const std::string text = unique_prefix() + ":text";
  std::vector<fairsem::detail::Args> cmds;
  cmds.push_back({"SET", text, "not a number"});
  for (int i = 0; i < 50; ++i) cmds.push_back({"INCR", counter});
  cmds.push_back({"INCR", text});  // an error in the middle does not stop the rest
  cmds.push_back({"GET", counter});
  std::vector<Reply> replies = c.pipeline(cmds);
  ASSERT_EQ(replies.size(), cmds.size());
  EXPECT_EQ(replies[0].str, "OK");
  for (int i = 1; i <= 50; ++i) EXPECT_EQ(replies[static_cast<std::size_t>(i)].integer, i);
  EXPECT_TRUE(replies[51].is_error());
  EXPECT_THAT(replies[51].str, HasSubstr("not an integer"));
  EXPECT_EQ(replies[52].str, "50");
  EXPECT_FALSE(c.broken());
}

TEST(ConnectionTest, ServerErrorReplyBecomesReplyErrorWithTheServersText) {
  Connection c(redis_options());
  const std::string key = unique_prefix();
  c.command({"SET", key, "x"});
  try {
    c.command({"HSET", key, "f", "v"});
    FAIL() << "HSET on a string succeeded";
  } catch (const ReplyError& e) {
    EXPECT_THAT(e.server_message(), ::testing::StartsWith("WRONGTYPE"));
    EXPECT_THAT(e.what(), HasSubstr("HSET on " + c.endpoint()));
    EXPECT_THAT(e.what(), HasSubstr(e.server_message()));
  }
  EXPECT_FALSE(c.broken()) << "an error reply must not break the connection";
  EXPECT_EQ(c.command({"GET", key}).str, "x");
}

TEST(ConnectionTest, RefusedPortIsAConnectionErrorNamingTheEndpoint) {
  const int port = fairsem::test::free_loopback_port();  // nothing listens there now
  try {
    Connection c(options_for_port(port));
    FAIL() << "connected to a closed port";
  } catch (const TimeoutError& e) {
    FAIL() << "a refused connection is not a timeout: " << e.what();
  } catch (const ConnectionError& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot connect to 127.0.0.1:" + std::to_string(port)));
    EXPECT_THAT(e.what(), HasSubstr("refused"));
  }
}

TEST(ConnectionTest, UnresolvableHostIsAConnectionError) {
  fairsem::ConnectionOptions o = options_for_port(6379);
  o.host = "no-such-host.invalid";
  EXPECT_THROW(Connection c(o), ConnectionError);
}

TEST(ConnectionTest, SilentServerTimesOutAndBreaksTheConnection) {
  FakePeer peer(FakePeer::Mode::silent);
  Connection c(options_for_port(peer.port()));  // no AUTH: connecting alone succeeds
  try {
    c.command({"PING"});
    FAIL() << "a silent server answered";
  } catch (const TimeoutError& e) {
    EXPECT_THAT(e.what(), HasSubstr("no reply to PING from 127.0.0.1:" +
                                    std::to_string(peer.port()) + " within 300 ms"));
  }
  EXPECT_TRUE(c.broken());
}

// hiredis 1.x reads replies of any depth and frees them recursively; without fairsem's limit a
// reply nested a million arrays deep overflows the client's stack (SIGSEGV).
TEST(ConnectionTest, AReplyNestedAMillionDeepIsAProtocolErrorNotACrash) {
  std::string deep;
  deep.reserve(4'000'004);
  for (int i = 0; i < 1'000'000; ++i) deep += "*1\r\n";
  deep += ":1\r\n";
  FakePeer peer(FakePeer::Mode::reply, deep);
  Connection c(options_for_port(peer.port()));
  try {
    c.command({"PING"});
    FAIL() << "a reply nested a million deep was accepted";
  } catch (const fairsem::ProtocolError& e) {
    EXPECT_THAT(e.what(), HasSubstr("protocol error from 127.0.0.1:" + std::to_string(peer.port()) +
                                    " in reply to PING"));
    EXPECT_THAT(e.what(), HasSubstr("nested"));
  }
  EXPECT_TRUE(c.broken());
}

TEST(ConnectionTest, SilentServerDuringAuthIsATimeoutOnConnect) {
  FakePeer peer(FakePeer::Mode::silent);
  auto o = options_for_port(peer.port());
  o.password = "pw";
  EXPECT_THROW(Connection c(o), TimeoutError);
}

TEST(ConnectionTest, ConnectThatGetsNoAnswerTimesOut) {
  FakePeer peer(FakePeer::Mode::never_accept);  // SYNs are dropped: connect() hangs
  auto o = options_for_port(peer.port());
  o.connect_timeout = 200ms;
  try {
    Connection c(o);
    FAIL() << "connected to a full accept queue";
  } catch (const TimeoutError& e) {
    EXPECT_THAT(e.what(), HasSubstr("connecting to 127.0.0.1:" + std::to_string(peer.port()) +
                                    " timed out after 200 ms"));
  }
}

TEST(ConnectionTest, ReconnectsAfterClientKillWithAuthAndDbReapplied) {
  // An ACL user and a non-zero db: both must be applied again on the new socket.
  Connection admin(redis_options());
  const std::string user = "u" + std::to_string(::getpid()) + "reconnect";
  admin.command({"ACL", "SETUSER", user, "reset", "on", ">pw", "~*", "+@all"});
  auto o = redis_options();
  o.user = user;
  o.password = "pw";
  o.db = 3;
  Connection c(o);
  const long long first_id = client_id(c);

  kill_client(first_id);
  EXPECT_THROW(c.command({"PING"}), ConnectionError);
  EXPECT_TRUE(c.broken());

  EXPECT_EQ(c.command({"PING"}).str, "PONG");  // reconnects first
  EXPECT_FALSE(c.broken());
  EXPECT_NE(client_id(c), first_id);
  EXPECT_EQ(c.command({"ACL", "WHOAMI"}).str, user);
  EXPECT_THAT(c.command({"CLIENT", "INFO"}).str, HasSubstr(" db=3 "));
  admin.command({"ACL", "DELUSER", user});
}

TEST(ConnectionTest, ExplicitReconnectGivesAFreshSocket) {
  Connection c(redis_options());
  const long long before = client_id(c);
  c.reconnect();
  EXPECT_NE(client_id(c), before);
}

TEST(ConnectionTest, ReconnectBacksOffExponentiallyAndGivesUp) {
  fairsem::test::RedisServer server({"--requirepass", "pw"});
  auto o = fairsem::ConnectionOptions::from_url(server.url());
  o.password = "pw";
  o.reconnect_attempts = 4;
  o.reconnect_backoff_min = 40ms;
  o.reconnect_backoff_max = 80ms;
  Connection c(o);
  EXPECT_EQ(c.command({"PING"}).str, "PONG");

  // The server goes away; in its place a peer that hangs up on every connection.
  server.stop();
  FakePeer peer(FakePeer::Mode::hang_up, {}, server.port());
  try {
    c.reconnect();
    FAIL() << "reconnected to a peer that hangs up";
  } catch (const ConnectionError& e) {
    EXPECT_THAT(e.what(), HasSubstr("reconnecting gave up after 4 attempts"));
    EXPECT_THAT(e.what(), HasSubstr("127.0.0.1:" + std::to_string(server.port())));
  }
  EXPECT_TRUE(c.broken());
  auto accepts = peer.accepts();
  ASSERT_EQ(accepts.size(), 4u) << "exactly reconnect_attempts connects, then it stops";
  // Pauses of at least half the nominal 40, 80, 80 ms (jitter), growing, capped at the max.
  EXPECT_GE(accepts[1] - accepts[0], 20ms);
  EXPECT_GE(accepts[2] - accepts[1], 40ms);
  EXPECT_GE(accepts[3] - accepts[2], 40ms);
}

TEST(ConnectionTest, WritingToAClosedSocketIsAnErrorNotSigpipe) {
  FakePeer peer(FakePeer::Mode::hang_up);
  Connection c(options_for_port(peer.port()));
  ASSERT_TRUE(peer.wait_for_accepts(1, 5s));
  // Several megabytes take many write() calls; those after the peer's RST would raise SIGPIPE,
  // whose default action kills the process.
  const std::string big(1 << 20, 'x');
  std::vector<fairsem::detail::Args> cmds(8, fairsem::detail::Args{"SET", "k", big});
  EXPECT_THROW(c.pipeline(cmds), ConnectionError);
  EXPECT_TRUE(c.broken());
}

TEST(ConnectionTest, MovedConnectionKeepsWorking) {
  Connection a(redis_options());
  Connection b(std::move(a));
  EXPECT_EQ(b.command({"PING"}).str, "PONG");
  Connection c(redis_options());
  c = std::move(b);
  EXPECT_EQ(c.command({"PING"}).str, "PONG");
}

TEST(ConnectionTest, SelectOfAMissingDatabaseFailsOnConnect) {
  auto o = redis_options();
  o.db = 100000;
  try {
    Connection c(o);
    FAIL();
  } catch (const ConnectionError& e) {
    EXPECT_THAT(e.what(), HasSubstr("SELECT 100000 on " + o.endpoint() + " failed"));
    EXPECT_THAT(e.what(), HasSubstr("out of range"));
  }
}

TEST(ConnectionTest, ConnectsOverIpv6Loopback) {
  auto o = redis_options();
  auto url = fairsem::test::test_url("[::1]:" + std::to_string(o.port));
  Connection c(fairsem::ConnectionOptions::from_url(url));
  EXPECT_EQ(c.command({"PING"}).str, "PONG");
  EXPECT_EQ(c.endpoint(), "[::1]:" + std::to_string(o.port));
}

TEST(ConnectionTest, ConnectsOverAUnixSocketWithDbFromTheUrl) {
  fairsem::test::RedisServer server(
      {"--unixsocket", "{dir}/redis.sock", "--unixsocketperm", "700"});
  Connection c(fairsem::ConnectionOptions::from_url("unix://" + server.socket_path() + "?db=2"));
  EXPECT_EQ(c.endpoint(), "unix:" + server.socket_path());
  EXPECT_EQ(c.command({"PING"}).str, "PONG");
  EXPECT_THAT(c.command({"CLIENT", "INFO"}).str, HasSubstr(" db=2 "));
}

}  // namespace
