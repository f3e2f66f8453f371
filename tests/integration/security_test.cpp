// Security: the Redis ACL fairsem needs (everything a user does works with it, nothing beyond
// its keys and commands does), passwords that never show up in an exception or a log line, and
// permit ids that are 128 random bits and cannot be released or renewed by guessing.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cctype>
#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

#include "acl_rule.hpp"
#include "error_of.hpp"
#include "fairsem/fairsem.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "fairsem/impl/protocol/scripts.hpp"
#include "fake_peer.hpp"
#include "redis_server.hpp"
#include "test_env.hpp"
#include "wait.hpp"

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using detail::Args;
using detail::Connection;
using detail::Reply;
using test::error_of;
using test::FakePeer;
using test::RedisServer;
using test::wait_until;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

constexpr const char* kUser = "fairsem-app";
constexpr const char* kPassword = "s3cr3t-pw-9q1z";
// kPassword percent-encoded: the URL carries this, AUTH gets kPassword.
constexpr const char* kEncodedPassword = "s3cr3t%2Dpw%2D9q1z";

/// True if `text` holds any piece of the test passwords, encoded or not. The pieces are not
/// hex, so a random permit id (32 hex digits) in a message can never look like one.
bool shows_password(const std::string& text) {
  for (const char* piece : {"s3cr3t", "9q1z", "%2Dpw"}) {
    if (text.find(piece) != std::string::npos) return true;
  }
  return false;
}

/// Collects what fairsem reports through SemaphoreOptions::logger and on_lost (any thread).
class Reports {
 public:
  Logger logger() {
    return [this](LogLevel, std::string_view message) { add(logs_, std::string(message)); };
  }
  LostCallback on_lost() {
    return [this](const std::string&, const std::string& reason) { add(lost_, reason); };
  }
  std::vector<std::string> logs() const { return get(logs_); }
  std::vector<std::string> lost() const { return get(lost_); }
  bool logged(std::string_view part) const {
    for (const std::string& m : logs()) {
      if (m.find(part) != std::string::npos) return true;
    }
    return false;
  }

 private:
  void add(std::vector<std::string>& to, std::string item) {
    std::lock_guard<std::mutex> lock(mu_);
    to.push_back(std::move(item));
  }
  std::vector<std::string> get(const std::vector<std::string>& from) const {
    std::lock_guard<std::mutex> lock(mu_);
    return from;
  }

  mutable std::mutex mu_;
  std::vector<std::string> logs_;
  std::vector<std::string> lost_;
};

/// Whether a waiting acquire has returned (or thrown) already.
bool ended(const std::future<Permit>& waiter) {
  return waiter.wait_for(0s) == std::future_status::ready;
}

/// How an acquire that should still be waiting ended, for a failure message.
std::string what_ended(std::future<Permit>& waiter) {
  try {
    return "it was granted permit " + waiter.get().id();
  } catch (const std::exception& e) {
    return std::string("it threw: ") + e.what();
  }
}

// --- the ACL ---------------------------------------------------------------------------------

/// The keys or channels field of ACL GETUSER as Redis 7 gives it ("~a ~b", "&c"): Redis 6.2
/// gives a list of the bare patterns instead.
std::string acl_patterns(const Reply& value, const std::string& prefix) {
  if (value.type != Reply::Type::array) return value.str;
  std::string text;
  for (const Reply& pattern : value.elements) {
    text += (text.empty() ? "" : " ") + prefix + pattern.str;
  }
  return text;
}

/// A private redis-server with the user `fairsem-app` created with exactly the documented ACL
/// rule; the tests connect as that user (database 1, so SELECT is covered too).
class SecurityAclTest : public ::testing::Test {
 protected:
  SecurityAclTest() {
    test::set_acl_user(admin_, kUser, kPassword);
    admin_.command({"ACL", "LOG", "RESET"});
    admin_.command({"CONFIG", "RESETSTAT"});
  }

  ConnectionOptions user_options(const char* password = kPassword) const {
    ConnectionOptions o = ConnectionOptions::from_url(fairsem::test::test_url(
        fmt::format("{}:{}@127.0.0.1:{}/1", kUser, password, server_.port())));
    o.connect_timeout = 2s;
    o.command_timeout = 5s;
    o.reconnect_backoff_min = 10ms;
    o.reconnect_backoff_max = 200ms;
    return o;
  }

  /// As user_options(kEncodedPassword), giving up on an absent server within a second.
  ConnectionOptions quick_to_give_up() const {
    ConnectionOptions c = user_options(kEncodedPassword);
    c.connect_timeout = 300ms;
    c.command_timeout = 300ms;
    c.reconnect_attempts = 2;
    c.reconnect_backoff_min = 1ms;
    c.reconnect_backoff_max = 5ms;
    return c;
  }

  SemaphoreOptions options(long long limit, std::chrono::milliseconds lease = 10s) {
    SemaphoreOptions o;
    o.limit = limit;
    o.lease = lease;  // key_prefix stays "fairsem", the prefix the rule grants
    o.logger = reports_.logger();
    o.on_lost = reports_.on_lost();
    return o;
  }
  /// options(limit) with a 60 s lease and no watchdog: its permits are never found lost.
  SemaphoreOptions unrenewed(long long limit) {
    SemaphoreOptions o = options(limit, 60s);
    o.auto_renew = false;
    return o;
  }

  /// What Redis refused since the test started (ACL LOG): "reason object" per entry.
  std::vector<std::string> denials() {
    std::vector<std::string> out;
    for (const Reply& entry : admin_.command({"ACL", "LOG"}).elements) {
      std::string reason;
      std::string object;
      for (std::size_t i = 0; i + 1 < entry.elements.size(); i += 2) {
        if (entry.elements[i].str == "reason") reason = entry.elements[i + 1].str;
        if (entry.elements[i].str == "object") object = entry.elements[i + 1].str;
      }
      out.push_back(reason + " " + object);
    }
    return out;
  }

  /// The refusals ACL LOG records for calls made by scripts (context "lua"), as denials().
  std::vector<std::string> script_denials() {
    std::vector<std::string> out;
    for (const Reply& entry : admin_.command({"ACL", "LOG"}).elements) {
      std::map<std::string, std::string> fields;
      for (std::size_t i = 0; i + 1 < entry.elements.size(); i += 2) {
        fields[entry.elements[i].str] = entry.elements[i + 1].str;
      }
      if (fields["context"] == "lua") out.push_back(fields["reason"] + " " + fields["object"]);
    }
    return out;
  }

  /// Calls of `command` (e.g. "brpop", "script|load") since the test started.
  long long calls(const std::string& command) {
    const std::string info = admin_.command({"INFO", "commandstats"}).str;
    const std::string tag = "cmdstat_" + command + ":calls=";
    const auto at = info.find(tag);
    return at == std::string::npos ? 0 : std::stoll(info.substr(at + tag.size()));
  }

  const std::string name_ = test::unique_prefix();
  RedisServer server_;
  Connection admin_{ConnectionOptions::from_url(server_.url())};
  Reports reports_;
};

TEST_F(SecurityAclTest, RuleAllowsExactlyTheCommandsFairsemSends) {
  // Client-side commands (src/redirection.cpp, src/connect.cpp, src/semaphore.cpp): EVALSHA,
  // SCRIPT LOAD after NOSCRIPT, BRPOP for a waiter, SELECT for a /db URL. AUTH needs no
  // permission.
  std::set<std::string> needed = {"evalsha", "script|load", "brpop", "select"};
  // FCALL, and FUNCTION LOAD when the library is missing, where the server has functions.
  if (test::has_functions(admin_)) needed.insert({"fcall", "function|load"});
  // Everything the scripts call, as Redis 7 checks it against the same user.
  std::vector<const detail::Script*> scripts(detail::scripts::semaphore_scripts.begin(),
                                             detail::scripts::semaphore_scripts.end());
  scripts.push_back(&detail::scripts::server_clock);
  for (const detail::Script* script : scripts) {
    const std::string body(script->body);
    // redis.call('X', redis.pcall, call and pcall_redis (their local aliases), guarded(N, 'X'.
    static const std::regex kCall(
        R"((?:\bcall\(|\bpcall\(|pcall_redis\(|guarded\(\d, )'([A-Z]+)')");
    for (std::sregex_iterator it(body.begin(), body.end(), kCall), end; it != end; ++it) {
      std::string command = (*it)[1];
      for (char& c : command) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      needed.insert(command);
    }
  }
  ASSERT_GT(needed.size(), 10u) << "the script parser found too little";

  std::set<std::string> granted;
  std::vector<std::string> other;
  for (const std::string& word : test::split_words(test::fairsem_acl_rule(admin_))) {
    if (word[0] == '+') {
      granted.insert(word.substr(1));
    } else {
      other.push_back(word);
    }
  }
  EXPECT_EQ(needed, granted);
  // One key pattern, no channels (Redis 6.2's `reset` leaves all channels), no categories.
  EXPECT_EQ((std::vector<std::string>{"resetchannels", "~fairsem:*"}), other);

  // What Redis made of it: nothing but these commands, these keys, no channels.
  const Reply user = admin_.command({"ACL", "GETUSER", kUser});
  int checked = 0;
  for (std::size_t i = 0; i + 1 < user.elements.size(); i += 2) {
    const std::string& field = user.elements[i].str;
    const Reply& value = user.elements[i + 1];
    checked += field == "keys" || field == "channels" || field == "commands";
    if (field == "keys") {
      EXPECT_EQ("~fairsem:*", acl_patterns(value, "~"));
    } else if (field == "channels") {
      EXPECT_EQ("", acl_patterns(value, "&"));
    } else if (field == "commands") {
      EXPECT_THAT(value.str, StartsWith("-@all ")) << value.str;
      EXPECT_EQ(std::string::npos, value.str.find('@', 2)) << value.str;  // no other category
    }
  }
  EXPECT_EQ(3, checked);
}

TEST_F(SecurityAclTest, RestrictedUserAcquiresQueuesIsWokenGivesUpAndReleases) {
  FairSemaphore sem(user_options(), name_, options(1, 3s));
  std::future<Permit> waiter;  // declared before the permit it waits for (destroyed after it)
  std::optional<Permit> first = sem.try_acquire();
  ASSERT_TRUE(first);
  EXPECT_FALSE(sem.try_acquire());

  // A waiter blocks in BRPOP on its wake list until the release promotes it.
  waiter = std::async(std::launch::async, [&] { return sem.acquire(); });
  ASSERT_TRUE(wait_until([&] { return ended(waiter) || sem.status().waiters.size() == 1; }));
  ASSERT_FALSE(ended(waiter)) << what_ended(waiter);
  // The give-up path: a second waiter runs out of time and takes its entry back out.
  EXPECT_FALSE(sem.try_acquire_for(300ms));
  EXPECT_EQ(1u, sem.status().waiters.size());

  EXPECT_EQ(ReleaseResult::released, first->release());
  Permit second = waiter.get();
  EXPECT_GT(second.fencing_token(), first->fencing_token());
  const Status s = sem.status();
  ASSERT_EQ(1u, s.holders.size());
  EXPECT_EQ(second.id(), s.holders[0].id);
  EXPECT_TRUE(s.waiters.empty());
  EXPECT_EQ(ReleaseResult::released, second.release());
  EXPECT_TRUE(sem.status().holders.empty());

  EXPECT_GE(calls("brpop"), 1);
  EXPECT_GE(calls("select"), 1);
  EXPECT_THAT(denials(), IsEmpty());
  EXPECT_THAT(reports_.logs(), IsEmpty());
}

TEST_F(SecurityAclTest, RestrictedUserKeepsItsPermitRenewedPastTheLease) {
  FairSemaphore sem(user_options(), name_, options(1, 1500ms));  // renewed every 500 ms
  Permit p = sem.acquire();
  // Renewals as the server sees them: the holder's lease left grows back.
  int renewals = 0;
  auto last = sem.status().holders.at(0).lease_left;
  ASSERT_TRUE(wait_until([&] {
    const Status s = sem.status();
    if (s.holders.size() != 1 || s.holders[0].id != p.id()) return true;  // lost: fails below
    if (s.holders[0].lease_left > last) ++renewals;
    last = s.holders[0].lease_left;
    return renewals >= 4;
  }));
  // Four renewals, 500 ms apart, outlast the 1.5 s lease: the same permit is still held.
  const Status s = sem.status();
  ASSERT_EQ(1u, s.holders.size());
  EXPECT_EQ(p.id(), s.holders[0].id);
  EXPECT_EQ(p.fencing_token(), s.holders[0].ticket);
  EXPECT_EQ(p.fencing_token(), s.last_ticket);
  EXPECT_EQ(4, renewals);
  EXPECT_FALSE(p.lost());
  EXPECT_TRUE(p.renew());  // by hand too
  EXPECT_EQ(ReleaseResult::released, p.release());
  EXPECT_THAT(denials(), IsEmpty());
  EXPECT_THAT(reports_.logs(), IsEmpty());
  EXPECT_THAT(reports_.lost(), IsEmpty());
}

TEST_F(SecurityAclTest, RestrictedUserEvictsHoldersAndWaitersAlsoThroughSemaphoreAdmin) {
  FairSemaphore sem(user_options(), name_, options(1));
  SemaphoreAdmin admin(user_options(), name_);
  std::future<Permit> waiter;
  Permit evicted = sem.acquire();
  EXPECT_EQ(EvictResult::holder, sem.evict(evicted.id()));
  EXPECT_FALSE(evicted.renew());
  ASSERT_EQ(1u, reports_.lost().size());
  EXPECT_THAT(reports_.lost()[0], HasSubstr("evicted"));
  EXPECT_EQ(ReleaseResult::expired, evicted.release());

  Permit holder = sem.acquire();
  waiter = std::async(std::launch::async, [&] { return sem.acquire(); });
  ASSERT_TRUE(wait_until([&] { return ended(waiter) || admin.status().waiters.size() == 1; }));
  ASSERT_FALSE(ended(waiter)) << what_ended(waiter);
  const Status s = admin.status();
  EXPECT_EQ(1, s.limit);
  ASSERT_EQ(1u, s.holders.size());
  EXPECT_EQ(holder.id(), s.holders[0].id);
  EXPECT_EQ(EvictResult::waiter, admin.evict(s.waiters.at(0).id));
  EXPECT_THROW(waiter.get(), EvictedError);
  EXPECT_EQ(EvictResult::holder, admin.evict(holder.id()));
  EXPECT_EQ(EvictResult::already_evicted, admin.evict(holder.id()));
  EXPECT_FALSE(holder.renew());
  EXPECT_EQ(2u, reports_.lost().size());
  const Status after = admin.status();
  EXPECT_TRUE(after.holders.empty());
  EXPECT_TRUE(after.waiters.empty());
  EXPECT_THAT(denials(), IsEmpty());
}

TEST_F(SecurityAclTest, RestrictedUserReloadsItsCodeAfterAnOperatorsFlush) {
  FairSemaphore sem(user_options(), name_, options(1));
  SemaphoreAdmin admin(user_options(), name_);
  Permit p = sem.acquire();

  // The function library where the server has functions, else the scripts. INFO
  // commandstats counts SCRIPT LOAD as script|load from Redis 7.0, and with every other SCRIPT
  // subcommand as script before: counted from a RESETSTAT after the operator's FLUSH.
  const bool functions = test::has_functions(admin_);
  const auto loads = [&] {
    return functions ? calls("function|load") : calls("script|load") + calls("script");
  };
  const Args flush = functions ? Args{"FUNCTION", "FLUSH"} : Args{"SCRIPT", "FLUSH"};
  admin_.command(flush);  // an operator, as the default user
  admin_.command({"CONFIG", "RESETSTAT"});
  EXPECT_EQ(ReleaseResult::released, p.release());  // not found, loaded, run again
  EXPECT_EQ(1, loads());
  admin_.command(flush);
  admin_.command({"CONFIG", "RESETSTAT"});
  EXPECT_TRUE(admin.status().holders.empty());
  EXPECT_EQ(1, loads());
  EXPECT_TRUE(sem.try_acquire());
  EXPECT_THAT(denials(), IsEmpty());

  // The user may load its script, but not flush everyone's.
  Connection raw(user_options());
  try {
    raw.command({"SCRIPT", "FLUSH"});
    ADD_FAILURE() << "the restricted user flushed the script cache";
  } catch (const ReplyError& e) {
    EXPECT_THAT(e.server_message(), StartsWith("NOPERM"));
  }
}

TEST_F(SecurityAclTest, RestrictedUserIsRefusedOtherKeysAndEveryOtherCommand) {
  SemaphoreOptions elsewhere = options(1);
  elsewhere.key_prefix = "other";
  try {
    FairSemaphore sem(user_options(), name_, elsewhere);
    ADD_FAILURE() << "opened a semaphore outside fairsem:*";
  } catch (const ReplyError& e) {
    EXPECT_THAT(e.server_message(), StartsWith("NOPERM"));
    EXPECT_THAT(e.what(), HasSubstr("NOPERM"));
  }
  try {
    SemaphoreAdmin(user_options(), name_, "other").status();
    ADD_FAILURE() << "read a semaphore outside fairsem:*";
  } catch (const ReplyError& e) {
    EXPECT_THAT(e.server_message(), StartsWith("NOPERM"));
  }
  EXPECT_FALSE(denials().empty());

  Connection raw(user_options());
  EXPECT_EQ(Reply::Type::nil, raw.command({"GET", "fairsem:mine"}).type);  // logged in, its keys
  const std::vector<std::vector<std::string_view>> refused = {
      {"GET", "other:x"},
      {"SET", "other:x", "1"},
      {"KEYS", "*"},
      {"SCAN", "0"},
      {"RANDOMKEY"},
      {"FLUSHALL"},
      {"FLUSHDB"},
      {"SWAPDB", "0", "1"},
      {"CONFIG", "GET", "requirepass"},
      {"SCRIPT", "FLUSH"},
      {"SCRIPT", "KILL"},
      {"FUNCTION", "LIST"},
      {"EVAL", "return 1", "0"},
      {"DEBUG", "SLEEP", "0"},
      {"ACL", "LIST"},
      {"CLIENT", "LIST"},
      {"INFO"},
      {"PUBLISH", "channel", "message"},
      {"MODULE", "LIST"},
      {"OBJECT", "ENCODING", "fairsem:mine"},
      {"RENAME", "fairsem:a", "other:a"},
      {"COPY", "fairsem:a", "other:a"},
  };
  for (const auto& argv : refused) {
    std::string line;
    for (auto a : argv) line += std::string(a) + " ";
    // A command this server does not have (FUNCTION before Redis 7.0) is refused as unknown
    // before any ACL check.
    const bool known =
        admin_.command({"COMMAND", "INFO", std::string(argv[0])}).elements.at(0).type !=
        Reply::Type::nil;
    try {
      raw.command(detail::Args(argv.begin(), argv.end()));
      ADD_FAILURE() << "allowed: " << line;
    } catch (const ReplyError& e) {
      EXPECT_THAT(e.server_message(), StartsWith(known ? "NOPERM" : "ERR unknown command")) << line;
    }
  }
  // It may load any script, but a script runs with the user's rights: the call it makes is
  // refused (failing the script, nothing done) and the ACL log names the key or command, in a
  // script ("lua" context). The error's wording differs by version ("The user executing the
  // script can't ..." up to Redis 7.0, "ACL failure in script: ..." from 7.2 and in Valkey),
  // so only the script it names is checked in it.
  admin_.command({"SET", "canary", "1"});
  const std::vector<std::pair<std::string, std::string>> scripts = {
      {"return redis.call('GET', 'other:x')", "key other:x"},
      {"return redis.call('KEYS', '*')", "command keys"},
      {"return redis.call('FLUSHALL')", "command flushall"},
      {"return redis.call('SCAN', '0')", "command scan"},
  };
  for (const auto& [body, denial] : scripts) {
    admin_.command({"ACL", "LOG", "RESET"});
    const std::string sha = raw.command({"SCRIPT", "LOAD", body}).str;
    try {
      raw.command({"EVALSHA", sha, "0"});
      ADD_FAILURE() << "a script ran: " << body;
    } catch (const ReplyError& e) {
      EXPECT_THAT(e.server_message(), StartsWith("ERR ")) << body;
      EXPECT_THAT(e.server_message(), HasSubstr(sha)) << body;
    }
    EXPECT_THAT(script_denials(), ::testing::ElementsAre(denial)) << body;
  }
  EXPECT_EQ(admin_.command({"EXISTS", "canary"}).integer, 1) << "FLUSHALL ran";
}

// --- passwords -------------------------------------------------------------------------------

// Every URL form, well-formed or not, with the password in the user info, also where the host
// was forgotten (`redis://user:password`). Not covered, as no parser can tell: a host-less URL
// whose password holds an unencoded '@' (what follows it is the host) or is all digits (a port).
TEST(SecurityPasswordTest, UrlErrorsNeverShowThePasswordEvenWithoutAHost) {
  const std::vector<std::string> passwords = {
      kPassword,        kEncodedPassword, "s3cr3t%40pw%2F9q1z",
      "s3cr3t/pw?9q1z", "s3cr3t#pw:9q1z", "s3cr3t[pw]9q1z"};
  const std::vector<std::string> urls = {
      "redis://u:PW",         "redis://:PW",        "redis://u:PW/0",        "unix://u:PW",
      "redis://u:PW@",        "redis://u:PW@h:0",   "redis://u:PW@h:x",      "redis://u:PW@h/-1",
      "redis://u:PW@h/x",     "redis://u:PW@h/1/2", "redis://u:PW@h?db=1",   "redis://u:PW@h#f",
      "redis://u:PW@[::1",    "redis://u:PW@a:b:c", "redis://u:PW@h%zz",     "redis://u:PW%@h",
      "unix://u:PW@relative", "unix://u:PW@/s?x=1", "unix://u:PW@/s?db=",    "rediss://u:PW@h",
      "http://u:PW@h",        "redis:/u:PW@h",      "redis://PW@h:99999999", "u:PW@h",
  };
  int failures = 0;
  for (const std::string& password : passwords) {
    for (std::string url : urls) {
      url.replace(url.find("PW"), 2, password);
      try {
        const ConnectionOptions o = ConnectionOptions::from_url(url);
        EXPECT_FALSE(shows_password(o.redacted_url())) << url << " -> " << o.redacted_url();
        EXPECT_FALSE(shows_password(o.endpoint())) << url << " -> " << o.endpoint();
      } catch (const InvalidArgument& e) {
        ++failures;
        EXPECT_FALSE(shows_password(e.what())) << url << "\n  " << e.what();
      }
    }
  }
  EXPECT_GT(failures, static_cast<int>(passwords.size() * (urls.size() - 2)));
}

TEST(SecurityPasswordTest, RedactedUrlHidesPlainAndPercentEncodedPasswords) {
  const auto tcp = ConnectionOptions::from_url(std::string("redis://fairsem-app:") +
                                               kEncodedPassword + "@127.0.0.1:6380/2");
  EXPECT_EQ(kPassword, tcp.password);
  EXPECT_EQ("redis://fairsem-app:***@127.0.0.1:6380/2", tcp.redacted_url());
  EXPECT_EQ("127.0.0.1:6380", tcp.endpoint());
  const auto unix_socket =
      ConnectionOptions::from_url(std::string("unix://:") + kEncodedPassword + "@/run/r.sock");
  EXPECT_EQ("unix://:***@/run/r.sock", unix_socket.redacted_url());
  ConnectionOptions set_by_hand;
  set_by_hand.password = kPassword;
  EXPECT_EQ("redis://:***@127.0.0.1:6379", set_by_hand.redacted_url());
}

TEST_F(SecurityAclTest, ConnectionAuthAndPermissionErrorsNeverShowThePassword) {
  auto quick = [](ConnectionOptions o, int port) {
    o.port = port;
    o.connect_timeout = 300ms;
    o.command_timeout = 300ms;
    o.reconnect_attempts = 1;
    return o;
  };
  std::vector<std::string> messages;
  const auto wrong = ConnectionOptions::from_url(fairsem::test::test_url(
      fmt::format("{}:{}-typo@127.0.0.1:{}", kUser, kEncodedPassword, server_.port())));
  messages.push_back(error_of([&] { FairSemaphore sem(wrong, name_, options(1)); }));
  messages.push_back(error_of([&] { SemaphoreAdmin admin(wrong, name_); }));
  messages.push_back(error_of([&] { (void)probe_server(wrong, 1); }));
  EXPECT_THAT(messages.back(), HasSubstr("WRONGPASS"));

  const int closed_port = test::free_loopback_port();
  messages.push_back(
      error_of([&] { FairSemaphore sem(quick(user_options(), closed_port), name_, options(1)); }));
  FakePeer silent(FakePeer::Mode::silent);  // accepts, never answers AUTH
  messages.push_back(error_of(
      [&] { FairSemaphore sem(quick(user_options(), silent.port()), name_, options(1)); }));
  EXPECT_THAT(messages.back(), HasSubstr("AUTH"));
  FakePeer full(FakePeer::Mode::never_accept);
  messages.push_back(
      error_of([&] { SemaphoreAdmin admin(quick(user_options(), full.port()), name_); }));
  FakePeer hang_up(FakePeer::Mode::hang_up);
  messages.push_back(
      error_of([&] { SemaphoreAdmin admin(quick(user_options(), hang_up.port()), name_); }));

  // Refused by the ACL: another prefix, and a command the user lacks (INFO).
  SemaphoreOptions elsewhere = options(1);
  elsewhere.key_prefix = "other";
  messages.push_back(error_of([&] { FairSemaphore sem(user_options(), name_, elsewhere); }));
  messages.push_back(error_of([&] { (void)probe_server(user_options(), 1); }));
  EXPECT_THAT(messages.back(), HasSubstr("NOPERM"));

  ASSERT_EQ(9u, messages.size());
  for (const std::string& m : messages) {
    EXPECT_FALSE(m.empty());
    EXPECT_FALSE(shows_password(m)) << m;
  }
  EXPECT_THAT(reports_.logs(), IsEmpty());
}

TEST_F(SecurityAclTest, LogsAndErrorsNeverShowThePasswordWhenTheServerIsGone) {
  const ConnectionOptions c = quick_to_give_up();
  FairSemaphore sem(c, name_, options(2, 600ms));
  std::optional<Permit> renewed = sem.acquire();
  std::optional<Permit> also_renewed = sem.acquire();
  // Permits never found lost, whose releases make calls (a lost one's sends nothing).
  FairSemaphore kept(c, name_ + "-kept", unrenewed(2));
  std::optional<Permit> released = kept.acquire();
  std::optional<Permit> dropped = kept.acquire();

  server_.kill();
  // The watchdog's renewals fail until the lease runs out, and say so.
  ASSERT_TRUE(wait_until([&] { return reports_.lost().size() == 2; }));
  EXPECT_TRUE(reports_.logged("renewing")) << ::testing::PrintToString(reports_.logs());
  std::vector<std::string> errors;
  errors.push_back(error_of([&] { (void)released->release(); }));
  errors.push_back(error_of([&] { (void)sem.status(); }));
  dropped.reset();  // the destructor's release fails: logged, not thrown
  EXPECT_TRUE(reports_.logged("releasing permit")) << ::testing::PrintToString(reports_.logs());

  for (const std::string& m : errors) EXPECT_FALSE(shows_password(m)) << m;
  for (const std::string& m : reports_.logs()) EXPECT_FALSE(shows_password(m)) << m;
  for (const std::string& m : reports_.lost()) EXPECT_FALSE(shows_password(m)) << m;
}

TEST_F(SecurityAclTest, LogsNeverShowThePasswordWhenTheCredentialsAreRevoked) {
  ConnectionOptions c = user_options();
  c.reconnect_backoff_min = 1ms;
  c.reconnect_backoff_max = 5ms;
  FairSemaphore sem(c, name_, options(1, 600ms));
  std::optional<Permit> p = sem.acquire();
  FairSemaphore kept(c, name_ + "-kept", unrenewed(1));
  std::optional<Permit> held = kept.acquire();  // never found lost: its release makes a call

  // The operator changes the password and drops the user's connections.
  admin_.command({"ACL", "SETUSER", kUser, "resetpass", ">rotated-pw-5e2a"});
  admin_.command({"CLIENT", "KILL", "USER", kUser});
  ASSERT_TRUE(wait_until([&] { return reports_.lost().size() == 1; }));
  EXPECT_TRUE(reports_.logged("WRONGPASS")) << ::testing::PrintToString(reports_.logs());
  const std::string refused = error_of([&] { (void)sem.try_acquire(); });
  EXPECT_THAT(refused, HasSubstr("authentication"));
  held.reset();  // release refused: logged
  EXPECT_TRUE(reports_.logged("releasing permit")) << ::testing::PrintToString(reports_.logs());

  EXPECT_FALSE(shows_password(refused)) << refused;
  for (const std::string& m : reports_.logs()) EXPECT_FALSE(shows_password(m)) << m;
  for (const std::string& m : reports_.lost()) EXPECT_FALSE(shows_password(m)) << m;
}

// A connection dropped under the watchdog, then a reconnect that reaches a wrong host on the
// server's port, one that quotes the AUTH it refuses, password and all: the logger,
// on_renew_failure, on_lost and the exceptions hear of each, and never see the password.
TEST_F(SecurityAclTest, LogsNeverShowThePasswordWhenAReconnectReachesAWrongHost) {
  const ConnectionOptions c = quick_to_give_up();
  SemaphoreOptions o = options(1, 600ms);
  std::mutex mu;
  std::vector<std::string> renew_errors;
  o.on_renew_failure = [&](const PermitInfo&, const std::string& error) {
    std::lock_guard<std::mutex> lock(mu);
    renew_errors.push_back(error);
  };
  FairSemaphore sem(c, name_, o);
  std::optional<Permit> p = sem.acquire();
  FairSemaphore kept(c, name_ + "-kept", unrenewed(1));
  std::optional<Permit> held = kept.acquire();  // never found lost: its release makes a call
  ASSERT_TRUE(wait_until([&] { return sem.metrics().renewals >= 1; }));  // the watchdog is on

  admin_.command({"CLIENT", "KILL", "USER", kUser});
  ASSERT_TRUE(wait_until([&] { return sem.metrics().reconnects >= 1; }));
  // The watchdog's log lines reach the logger through the callback thread, maybe after the
  // reconnect was counted.
  EXPECT_TRUE(wait_until([&] { return reports_.logged("running it again"); }))
      << ::testing::PrintToString(reports_.logs());

  server_.kill();
  const std::string echo = fmt::format(
      "-ERR unknown command 'AUTH', with args beginning with: '{}' '{}' \r\n", kUser, kPassword);
  FakePeer wrong_host(FakePeer::Mode::reply, echo, server_.port());
  ASSERT_TRUE(wait_until([&] { return reports_.lost().size() == 1; }));
  const std::string refused = error_of([&] { (void)sem.try_acquire(); });
  EXPECT_THAT(refused, HasSubstr("with args beginning with: 'fairsem-app' '***'"));
  held.reset();  // the destructor's release fails: logged
  EXPECT_TRUE(reports_.logged("releasing permit")) << ::testing::PrintToString(reports_.logs());
  EXPECT_TRUE(reports_.logged("'***'")) << ::testing::PrintToString(reports_.logs());

  std::lock_guard<std::mutex> lock(mu);
  ASSERT_FALSE(renew_errors.empty());
  EXPECT_THAT(renew_errors, Contains(HasSubstr("'***'")));
  EXPECT_FALSE(shows_password(refused)) << refused;
  for (const std::string& m : renew_errors) EXPECT_FALSE(shows_password(m)) << m;
  for (const std::string& m : reports_.logs()) EXPECT_FALSE(shows_password(m)) << m;
  for (const std::string& m : reports_.lost()) EXPECT_FALSE(shows_password(m)) << m;
}

// --- permit ids ------------------------------------------------------------------------------

class SecurityPermitIdTest : public ::testing::Test {
 protected:
  SemaphoreOptions options(long long limit) const {
    SemaphoreOptions o;
    o.limit = limit;
    o.key_prefix = prefix_;
    o.auto_renew = false;  // nothing touches a permit behind the test's back
    o.logger = [](LogLevel, std::string_view) {};
    return o;
  }
  std::string key(const std::string& name, const std::string& suffix) const {
    return prefix_ + ":{" + name + "}:" + suffix;
  }
  /// Runs the semaphore script directly, as any client with the same Redis access could.
  Reply script(const std::string& name, std::vector<std::string> args) {
    const std::vector<std::string> keys = detail::semaphore_keys(prefix_, name);
    return admin_.eval(detail::scripts::semaphore_script(args.at(0)),
                       detail::Args(keys.begin(), keys.end()),
                       detail::Args(args.begin(), args.end()));
  }
  std::string str(std::initializer_list<std::string_view> argv) { return admin_.command(argv).str; }

  const std::string prefix_ = test::unique_prefix();
  Connection admin_{test::redis_options()};
};

TEST_F(SecurityPermitIdTest, RandomIdsAre32HexDigitsAllDistinctWithEveryBitRandom) {
  FairSemaphore sem(test::redis_options(), "ids", options(1));
  constexpr int kIds = 10'000;
  std::unordered_set<std::string> ids;
  std::array<int, 128> ones{};
  for (int i = 0; i < kIds; ++i) {
    std::optional<Permit> p = sem.try_acquire();  // released at the end of the iteration
    ASSERT_TRUE(p);
    const std::string& id = p->id();
    ASSERT_EQ(32u, id.size()) << id;
    for (std::size_t d = 0; d < id.size(); ++d) {
      const char c = id[d];
      ASSERT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << id;
      const int nibble = c <= '9' ? c - '0' : c - 'a' + 10;
      for (int b = 0; b < 4; ++b) ones[d * 4 + static_cast<std::size_t>(b)] += (nibble >> b) & 1;
    }
    ids.insert(id);
  }
  EXPECT_EQ(static_cast<std::size_t>(kIds), ids.size());
  // Each of the 128 bits is set in about half the ids (standard deviation 50; 4000..6000 is
  // 20 of them): a counter, a clock or a half-constant id fails this.
  for (std::size_t bit = 0; bit < ones.size(); ++bit) {
    EXPECT_GT(ones[bit], 4000) << "bit " << bit;
    EXPECT_LT(ones[bit], 6000) << "bit " << bit;
  }
}

// No API turns an id into a permit, or releases or renews by id: only Permit does, and a Permit
// comes only from acquiring. (evict(id) is the operator's tool, not a release.)
template <class T, class = void>
struct releases_by_id : std::false_type {};
template <class T>
struct releases_by_id<T, std::void_t<decltype(std::declval<T&>().release(std::string()))>>
    : std::true_type {};
template <class T, class = void>
struct renews_by_id : std::false_type {};
template <class T>
struct renews_by_id<T, std::void_t<decltype(std::declval<T&>().renew(std::string()))>>
    : std::true_type {};
static_assert(!releases_by_id<FairSemaphore>::value && !releases_by_id<SemaphoreAdmin>::value);
static_assert(!renews_by_id<FairSemaphore>::value && !renews_by_id<SemaphoreAdmin>::value);
static_assert(!std::is_constructible_v<Permit, std::string> &&
              !std::is_copy_constructible_v<Permit>);

TEST_F(SecurityPermitIdTest, AnotherClientCannotTakeOrFreeAPermitWhoseIdItDoesNotKnow) {
  const std::string name = "other-client";
  FairSemaphore owner(test::redis_options(), name, options(1));
  Permit p = owner.acquire();

  FairSemaphore other(test::redis_options(), name, options(1));  // its own connections
  EXPECT_FALSE(other.try_acquire());
  EXPECT_FALSE(other.try_acquire_for(100ms));  // queued, gave up: only its own entry went
  std::string guess = p.id();
  guess.back() = guess.back() == '0' ? '1' : '0';
  SemaphoreOptions guessing = options(1);
  guessing.permit_id = guess;  // a caller-chosen id one digit off the holder's
  FairSemaphore guesser(test::redis_options(), name, guessing);
  EXPECT_FALSE(guesser.try_acquire());

  const Status s = other.status();
  ASSERT_EQ(1u, s.holders.size());
  EXPECT_EQ(p.id(), s.holders[0].id);
  EXPECT_EQ(p.fencing_token(), s.holders[0].ticket);
  EXPECT_TRUE(s.waiters.empty());
  EXPECT_TRUE(p.renew());
  EXPECT_EQ(ReleaseResult::released, p.release());
}

TEST_F(SecurityPermitIdTest, ScriptCallsWithAGuessedIdOrTicketLeaveTheHolderAndItsToken) {
  const std::string name = "guessed";
  FairSemaphore sem(test::redis_options(), name, options(1));
  Permit p = sem.acquire();
  const std::string id = p.id();
  const std::string ticket = std::to_string(p.fencing_token());
  auto holder_state = [&] {
    return str({"ZSCORE", key(name, "owner"), id}) + "|" + str({"ZSCORE", key(name, "time"), id}) +
           "|" + str({"GET", key(name, "counter")});
  };
  const std::string before = holder_state();

  std::string one_off = id;
  one_off.back() = one_off.back() == 'f' ? 'e' : 'f';
  std::string upper = id;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const std::string& guess : {std::string("0123456789abcdef0123456789abcdef"), one_off,
                                   id.substr(0, 31), id + "0", upper, std::string("*")}) {
    EXPECT_EQ(
        0, script(name, {"release", "1", "10000", guess, ticket, "10000"}).elements.at(0).integer)
        << guess;
    EXPECT_EQ(0,
              script(name, {"release", "1", "10000", guess, "0", "10000"}).elements.at(0).integer)
        << guess;
    EXPECT_EQ(0, script(name, {"renew", "1", "10000", guess, ticket}).elements.at(2).integer)
        << guess;
    EXPECT_EQ(0, script(name, {"evict", "1", "10000", guess}).elements.at(0).integer) << guess;
  }
  // The right id with a wrong ticket is a stale holder's call: refused as well.
  for (const std::string& wrong : {std::to_string(p.fencing_token() + 1), std::string("-1")}) {
    EXPECT_EQ(0,
              script(name, {"release", "1", "10000", id, wrong, "10000"}).elements.at(0).integer);
    EXPECT_EQ(0, script(name, {"renew", "1", "10000", id, wrong}).elements.at(2).integer);
  }
  EXPECT_EQ(before, holder_state());  // still held, same ticket, same deadline, same counter
  EXPECT_TRUE(p.renew());

  // The control: with its id and ticket the same call does release it.
  EXPECT_EQ(1, script(name, {"release", "1", "10000", id, ticket, "10000"}).elements.at(0).integer);
  EXPECT_FALSE(p.renew());
}

}  // namespace
}  // namespace fairsem
