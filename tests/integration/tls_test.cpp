// TLS (rediss://) against real TLS-only servers with certificates made at test time
// (tests/support/test_certs): the semaphore over TLS, mutual TLS, every refusal the issue
// names, and reconnects. Built only when fairsem is built with TLS. The rest of the suite runs
// over TLS too when FAIRSEM_TEST_TLS=1 (CI's TLS configuration).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "error_of.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "fairsem/semaphore.hpp"
#include "fake_peer.hpp"
#include "redis_server.hpp"
#include "test_certs.hpp"
#include "test_env.hpp"
#include "wait.hpp"

namespace {

using fairsem::ConnectionError;
using fairsem::ConnectionOptions;
using fairsem::FairSemaphore;
using fairsem::InvalidArgument;
using fairsem::SemaphoreOptions;
using fairsem::TimeoutError;
using fairsem::TlsOptions;
using fairsem::detail::Connection;
using fairsem::test::error_of;
using fairsem::test::FakePeer;
using fairsem::test::RedisServer;
using fairsem::test::ServerTls;
using fairsem::test::TestCerts;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

const TestCerts& certs() { return TestCerts::get(); }

/// Options for `server` with `tls` instead of the harness's own TLS settings.
ConnectionOptions with_tls(const RedisServer& server, TlsOptions tls) {
  ConnectionOptions o = server.options();
  o.tls = std::move(tls);
  o.connect_timeout = 2s;
  o.command_timeout = 5s;
  o.reconnect_attempts = 1;
  return o;
}

/// Connections the server has accepted so far (INFO stats).
long long connections_received(const RedisServer& server) {
  Connection admin(server.options());
  const std::string info = admin.command({"INFO", "stats"}).str;
  const std::string field = "total_connections_received:";
  const auto at = info.find(field);
  return at == std::string::npos ? -1 : std::stoll(info.substr(at + field.size()));
}

SemaphoreOptions one_permit(const std::string& prefix) {
  SemaphoreOptions o;
  o.limit = 1;
  o.lease = 3s;
  o.key_prefix = prefix;
  return o;
}

TEST(TlsTest, AcquireReleaseAndBlockingHandOffOverTls) {
  RedisServer server(certs().server_tls(), {});  // TLS only: --port 0
  const ConnectionOptions o = with_tls(server, certs().client_tls());
  FairSemaphore a(o, "tls", one_permit(fairsem::test::unique_prefix()));
  std::optional<fairsem::Permit> held = a.acquire();
  ASSERT_TRUE(held);
  auto waiter = std::async(std::launch::async, [&] { return a.acquire(); });
  ASSERT_TRUE(fairsem::test::wait_until([&] { return a.status().waiters.size() == 1; }));
  EXPECT_EQ(waiter.wait_for(0s), std::future_status::timeout);
  const auto token = held->fencing_token();
  EXPECT_EQ(held->release(), fairsem::ReleaseResult::released);
  fairsem::Permit next = waiter.get();  // handed off over TLS
  EXPECT_GT(next.fencing_token(), token);
  EXPECT_EQ(next.release(), fairsem::ReleaseResult::released);
}

TEST(TlsTest, CacertdirAndTheSniNameAreHonoured) {
  RedisServer server(certs().server_tls(), {});
  TlsOptions by_dir;
  by_dir.enabled = true;
  by_dir.cacertdir = certs().ca_dir;
  Connection dir(with_tls(server, by_dir));
  EXPECT_EQ(dir.command({"PING"}).str, "PONG");
  TlsOptions named = certs().client_tls();
  named.sni = "localhost";  // verified instead of 127.0.0.1; the certificate names both
  Connection sni(with_tls(server, named));
  EXPECT_EQ(sni.command({"PING"}).str, "PONG");
}

TEST(TlsTest, MutualTlsWorksWithTheClientCertificateAndIsAClearErrorWithout) {
  RedisServer server(certs().server_tls(/*auth_clients=*/true), {});
  Connection with_cert(with_tls(server, certs().mutual_tls()));
  EXPECT_EQ(with_cert.command({"PING"}).str, "PONG");
  const std::string refused =
      error_of<ConnectionError>([&] { Connection c(with_tls(server, certs().client_tls())); });
  EXPECT_THAT(refused, HasSubstr("127.0.0.1:" + std::to_string(server.port())));
  // OpenSSL's alert when it is read in time, else the reset that follows it, with a hint.
  EXPECT_THAT(refused, ::testing::AnyOf(HasSubstr("TLS: tlsv13 alert certificate required"),
                                        HasSubstr("if it requires a client certificate, set "
                                                  "cert and key")))
      << refused;
}

TEST(TlsTest, AStrangerCaAndTheSystemTrustStoreDoNotTrustTheServer) {
  RedisServer server(certs().server_tls(), {});
  TlsOptions stranger = certs().client_tls();
  stranger.cacert = certs().stranger_ca_cert;
  const std::string refused =
      error_of<ConnectionError>([&] { Connection c(with_tls(server, stranger)); });
  EXPECT_THAT(refused, HasSubstr("cannot connect to 127.0.0.1:" + std::to_string(server.port())));
  EXPECT_THAT(refused, HasSubstr("TLS handshake failed: certificate verify failed"));
  TlsOptions system;  // no cacert: the system's trust store, which never saw the test CA
  system.enabled = true;
  EXPECT_THAT(error_of<ConnectionError>([&] { Connection c(with_tls(server, system)); }),
              HasSubstr("certificate verify failed"));
  // insecure turns verification off: for tests only.
  stranger.insecure = true;
  Connection c(with_tls(server, stranger));
  EXPECT_EQ(c.command({"PING"}).str, "PONG");
}

TEST(TlsTest, ACertificateForAnotherHostIsRefusedByNameAndAddress) {
  ServerTls other = certs().server_tls();
  other.cert_file = certs().other_host_cert;  // signed by the same CA, for other.example
  other.key_file = certs().other_host_key;
  other.client.sni = "other.example";  // the harness itself connects by that name
  RedisServer server(other, {});
  const std::string by_address =
      error_of<ConnectionError>([&] { Connection c(with_tls(server, certs().client_tls())); });
  EXPECT_THAT(by_address, HasSubstr("certificate verify failed: IP address mismatch"));
  ConnectionOptions by_name = with_tls(server, certs().client_tls());
  by_name.host = "localhost";
  EXPECT_THAT(error_of<ConnectionError>([&] { Connection c(by_name); }),
              HasSubstr("certificate verify failed: hostname mismatch"));
  TlsOptions as_other = certs().client_tls();
  as_other.sni = "other.example";
  Connection c(with_tls(server, as_other));
  EXPECT_EQ(c.command({"PING"}).str, "PONG");
}

TEST(TlsTest, PlaintextToATlsPortAndTlsToAPlaintextPortAreClearErrors) {
  RedisServer tls_server(certs().server_tls(), {});
  ConnectionOptions plain = with_tls(tls_server, TlsOptions{});
  const std::string to_tls = error_of<ConnectionError>([&] {
    Connection c(plain);
    (void)c.command({"PING"});
  });
  EXPECT_THAT(to_tls, HasSubstr("127.0.0.1:" + std::to_string(tls_server.port())));
  RedisServer plain_server(std::nullopt, {});
  const std::string to_plain = error_of<ConnectionError>(
      [&] { Connection c(with_tls(plain_server, certs().client_tls())); });
  EXPECT_THAT(to_plain, HasSubstr("TLS handshake")) << to_plain;
}

// A peer that accepts and never answers the ClientHello: the handshake is bounded by the connect
// timeout (300 ms here), not the command timeout (a minute), and is a TimeoutError. Neither it
// nor a refused certificate quotes the password of the URL.
TEST(TlsTest, ASilentPeerTimesOutInTheHandshakeAndNoRefusalShowsThePassword) {
  const std::string password = "tls-hunter2-secret";
  FakePeer silent(FakePeer::Mode::silent);
  ConnectionOptions o = ConnectionOptions::from_url("rediss://:" + password +
                                                    "@127.0.0.1:" + std::to_string(silent.port()));
  o.tls = certs().client_tls();
  o.connect_timeout = 300ms;
  o.command_timeout = 60s;
  o.reconnect_attempts = 1;
  const auto started = std::chrono::steady_clock::now();
  const std::string timed_out = error_of<TimeoutError>([&] { Connection c(o); });
  // Not a speed bound: a hundred times the connect timeout, half the command timeout that a
  // handshake left unbounded by the connect timeout would wait for.
  EXPECT_LT(std::chrono::steady_clock::now() - started, 30s);
  EXPECT_THAT(timed_out, HasSubstr("connecting to 127.0.0.1:" + std::to_string(silent.port()) +
                                   " timed out after 300 ms (TLS handshake)"));
  EXPECT_THAT(timed_out, Not(HasSubstr(password)));

  RedisServer server(certs().server_tls(), {});
  TlsOptions stranger = certs().client_tls();
  stranger.cacert = certs().stranger_ca_cert;
  ConnectionOptions refused_options = with_tls(server, stranger);
  refused_options.password = password;
  const std::string refused = error_of<ConnectionError>([&] { Connection c(refused_options); });
  EXPECT_THAT(refused, HasSubstr("certificate verify failed"));
  EXPECT_THAT(refused, Not(HasSubstr(password)));
}

TEST(TlsTest, UnreadableOrUnusableFilesAreInvalidArgumentNamingThemAndReachNoServer) {
  RedisServer server(certs().server_tls(), {});
  const long long before = connections_received(server);
  const auto refusal = [&](TlsOptions tls) {
    return error_of<InvalidArgument>([&] { Connection c(with_tls(server, std::move(tls))); });
  };
  TlsOptions missing = certs().client_tls();
  missing.cacert = "/nonexistent/ca.pem";
  EXPECT_THAT(refusal(missing),
              HasSubstr("cacert '/nonexistent/ca.pem' cannot be read: No such file or directory"));
  TlsOptions not_dir = certs().client_tls();
  not_dir.cacertdir = certs().ca_cert;
  EXPECT_THAT(refusal(not_dir), HasSubstr("is not a directory"));
  const std::string garbage = certs().dir + "/garbage.key";
  std::ofstream(garbage) << "not a key\n";
  TlsOptions bad_key = certs().mutual_tls();
  bad_key.key = garbage;
  EXPECT_THAT(refusal(bad_key), HasSubstr("key '" + garbage + "' is not an unencrypted PEM"));
  TlsOptions wrong_key = certs().mutual_tls();
  wrong_key.key = certs().server_key;
  EXPECT_THAT(refusal(wrong_key), HasSubstr("does not match the certificate in cert"));
  // The harness's own INFO is the only connection since.
  EXPECT_EQ(connections_received(server), before + 1);
}

TEST(TlsTest, ReconnectsOverTlsAfterClientKillAndARestartWithoutLeakingConnections) {
  RedisServer server(certs().server_tls(), {});
  const ConnectionOptions o = with_tls(server, certs().client_tls());
  SemaphoreOptions so = one_permit(fairsem::test::unique_prefix());
  so.lease = 10s;
  FairSemaphore sem(o, "tls-reconnect", so);
  auto held = sem.try_acquire();
  ASSERT_TRUE(held);
  Connection admin(server.options());
  (void)admin.command({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
  EXPECT_EQ(sem.status().holders.size(), 1u);  // a new TLS connection
  server.restart();  // no persistence: the holder is gone, the semaphore works again
  ASSERT_TRUE(fairsem::test::wait_until([&] {
    try {
      return sem.status().holders.empty();
    } catch (const ConnectionError&) {
      return false;
    }
  }));
  auto again = sem.try_acquire();
  ASSERT_TRUE(again);
  EXPECT_GE(sem.metrics().reconnects, 2u);
  // The semaphore's pool and its watchdog, and the harness: no connection left behind by
  // the reconnects.
  Connection after(server.options());
  const std::string clients = after.command({"CLIENT", "LIST"}).str;
  EXPECT_LE(std::count(clients.begin(), clients.end(), '\n'), 4) << clients;
  EXPECT_EQ(again->release(), fairsem::ReleaseResult::released);
}

TEST(TlsTest, InsecureIsLoggedOnceAsAWarning) {
  RedisServer server(certs().server_tls(), {});
  TlsOptions insecure = certs().client_tls();
  insecure.insecure = true;
  std::mutex mu;
  std::vector<std::string> warnings;
  SemaphoreOptions so = one_permit(fairsem::test::unique_prefix());
  so.logger = [&](fairsem::LogLevel level, std::string_view message) {
    std::lock_guard<std::mutex> lock(mu);
    if (level == fairsem::LogLevel::warning) warnings.emplace_back(message);
  };
  FairSemaphore sem(with_tls(server, insecure), "insecure", so);
  auto p = sem.try_acquire();
  ASSERT_TRUE(p);
  EXPECT_EQ(p->release(), fairsem::ReleaseResult::released);
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(warnings.size(), 1u) << ::testing::PrintToString(warnings);
  EXPECT_THAT(warnings[0], HasSubstr("TLS certificate verification is off (insecure)"));
}

}  // namespace
