#include <gtest/gtest.h>

#include <fairsem/impl/protocol/replies.hpp>
#include <fairsem/impl/protocol/reply.hpp>
#include <fairsem/impl/text.hpp>
#include <fairsem/version.hpp>

#include <chrono>
#include <climits>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace {

using fairsem::ProtocolError;
using fairsem::detail::Reply;
using std::chrono::milliseconds;
using namespace std::string_view_literals;

TEST(ReplyTest, ExpectHelpersReturnTheValue) {
  EXPECT_EQ(fairsem::detail::expect_integer(Reply::make_integer(42), "x"), 42);
  EXPECT_EQ(fairsem::detail::expect_string(Reply::make_string("ok"), "x"), "ok");
  EXPECT_EQ(fairsem::detail::expect_string(Reply::make_string("OK", Reply::Type::status), "x"),
            "OK");
  auto arr = Reply::make_array({Reply::make_integer(1), Reply::make_nil()});
  EXPECT_EQ(fairsem::detail::expect_array(arr, "x", 2).size(), 2u);
}

TEST(ReplyTest, WrongShapesThrowProtocolErrorNamingTheValue) {
  try {
    (void)fairsem::detail::expect_integer(Reply::make_string("7"), "the ticket");
    FAIL();
  } catch (const ProtocolError& e) {
    EXPECT_STREQ(e.what(), "fairsem: expected integer for the ticket, got bulk string");
  }
  EXPECT_THROW((void)fairsem::detail::expect_string(Reply::make_nil(), "x"), ProtocolError);
  EXPECT_THROW((void)fairsem::detail::expect_array(Reply::make_integer(1), "x"), ProtocolError);
  try {
    (void)fairsem::detail::expect_array(Reply::make_array({}), "the status reply", 3);
    FAIL();
  } catch (const ProtocolError& e) {
    EXPECT_STREQ(e.what(), "fairsem: expected at least 3 elements in the status reply, got 0");
  }
}

TEST(TextTest, PercentDecode) {
  using fairsem::detail::percent_decode;
  EXPECT_EQ(percent_decode("a%20b%2fc%2F"), "a b/c/");
  EXPECT_EQ(percent_decode(""), "");
  EXPECT_FALSE(percent_decode("%"));
  EXPECT_FALSE(percent_decode("%4"));
  EXPECT_FALSE(percent_decode("%g0"));
  EXPECT_EQ(percent_decode("%00"), std::string(1, '\0'));
}

TEST(TextTest, ParseDecimalRejectsSignsSpacesAndOverflow) {
  using fairsem::detail::parse_decimal;
  EXPECT_EQ(parse_decimal("65535", 65535), 65535u);
  EXPECT_FALSE(parse_decimal("65536", 65535));
  EXPECT_FALSE(parse_decimal("+1", 10));
  EXPECT_FALSE(parse_decimal(" 1", 10));
  EXPECT_FALSE(parse_decimal("", 10));
  EXPECT_FALSE(parse_decimal("99999999999999999999", UINT64_MAX));
}

TEST(TextTest, PrintableEscapesEverythingButPrintableAscii) {
  using fairsem::detail::printable;
  EXPECT_EQ(printable("ab 1~"), "ab 1~");
  EXPECT_EQ(printable(std::string("a\0\n\x7f\xff", 5)), "a\\x00\\x0a\\x7f\\xff");
}

// --- RESP parsing and the decoders of the semaphore scripts' replies (src/lua/semaphore/) -----

Reply integer(long long v) { return Reply::make_integer(v); }
Reply bulk(std::string s) { return Reply::make_string(std::move(s)); }
Reply array(std::vector<Reply> items) { return Reply::make_array(std::move(items)); }
Reply nil() { return Reply::make_nil(); }

constexpr long long kNow = 1'700'000'000'000;  // a plausible server clock, in ms

TEST(ParseRespTest, ParsesEveryReplyTypeInOrder) {
  using fairsem::detail::parse_resp;
  const auto replies = parse_resp(
      ":-42\r\n$3\r\na\0b\r\n+OK\r\n-ERR no\r\n$-1\r\n*-1\r\n*2\r\n:1\r\n*1\r\n$0\r\n\r\n"sv);
  ASSERT_EQ(replies.size(), 7u);
  EXPECT_EQ(replies[0].type, Reply::Type::integer);
  EXPECT_EQ(replies[0].integer, -42);
  EXPECT_EQ(replies[1].type, Reply::Type::string);
  EXPECT_EQ(replies[1].str, std::string("a\0b", 3));
  EXPECT_EQ(replies[2].type, Reply::Type::status);
  EXPECT_EQ(replies[2].str, "OK");
  EXPECT_EQ(replies[3].type, Reply::Type::error);
  EXPECT_EQ(replies[3].str, "ERR no");
  EXPECT_TRUE(replies[4].is_nil());
  EXPECT_TRUE(replies[5].is_nil());
  ASSERT_EQ(replies[6].type, Reply::Type::array);
  ASSERT_EQ(replies[6].elements.size(), 2u);
  EXPECT_EQ(replies[6].elements[0].integer, 1);
  ASSERT_EQ(replies[6].elements[1].elements.size(), 1u);
  EXPECT_EQ(replies[6].elements[1].elements[0].str, "");
  EXPECT_TRUE(parse_resp("").empty());
}

TEST(ParseRespTest, MalformedOrIncompleteBytesThrowProtocolError) {
  using fairsem::detail::parse_resp;
  EXPECT_THROW((void)parse_resp("?what\r\n"), ProtocolError);  // unknown type byte
  EXPECT_THROW((void)parse_resp("+OK\r\n:"), ProtocolError);   // a lone type byte after a reply
  EXPECT_THROW((void)parse_resp(":1\r\n*"), ProtocolError);
  EXPECT_THROW((void)parse_resp(":1\r\n!\r\n"), ProtocolError);         // after a good reply
  EXPECT_THROW((void)parse_resp(":12"), ProtocolError);                 // no line end
  EXPECT_THROW((void)parse_resp("$5\r\nab\r\n"), ProtocolError);        // short bulk string
  EXPECT_THROW((void)parse_resp("*3\r\n:1\r\n:2\r\n"), ProtocolError);  // short array
  EXPECT_THROW((void)parse_resp("*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n"),
               ProtocolError);  // nested 9 deep: one more than fairsem allows
}

std::string nested(int depth) {
  std::string bytes;
  for (int i = 0; i < depth; ++i) bytes += "*1\r\n";
  return bytes + ":1\r\n";
}

// The same limit with every hiredis: 0.14 stops at 8 levels by itself, 1.x would read any depth.
TEST(ParseRespTest, RepliesNestedUpToEightDeepAreReadDeeperOnesRefused) {
  using fairsem::detail::parse_resp;
  auto replies = parse_resp(nested(8));
  ASSERT_EQ(replies.size(), 1u);
  const Reply* r = &replies[0];
  for (int level = 0; level < 8; ++level) {
    ASSERT_EQ(r->type, Reply::Type::array) << "level " << level;
    ASSERT_EQ(r->elements.size(), 1u);
    r = &r->elements[0];
  }
  EXPECT_EQ(r->integer, 1);
  EXPECT_THROW((void)parse_resp(nested(9)), ProtocolError);
  EXPECT_THROW((void)parse_resp(nested(1'000'000)), ProtocolError);
  // The refusal is not left behind for the next read on this thread.
  EXPECT_EQ(parse_resp(":5\r\n").at(0).integer, 5);
}

fairsem::detail::RefusalContext refusal_context() {
  return {"semaphore 's' on h:1", "fairsem:{s}:meta", 3};
}

TEST(ScriptReplyTest, ReturnsTheElementsOfAnAnswer) {
  const Reply r = array({integer(1)});
  EXPECT_EQ(fairsem::detail::check_script_reply(r, refusal_context()).size(), 1u);
  const Reply renew = array({integer(kNow), integer(kNow + 10), integer(-1)});
  EXPECT_EQ(fairsem::detail::check_script_reply(renew, refusal_context()).size(), 3u);
}

TEST(ScriptReplyTest, LimitMismatchNamesBothLimits) {
  try {
    (void)fairsem::detail::check_script_reply(array({integer(-1), bulk("5")}), refusal_context());
    FAIL();
  } catch (const fairsem::LimitMismatchError& e) {
    EXPECT_EQ(e.stored_limit(), 5);
    EXPECT_EQ(e.requested_limit(), 3);
    EXPECT_STREQ(e.what(),
                 "fairsem: semaphore 's' on h:1: opened with limit 3, but Redis stores limit 5 "
                 "(set by the semaphore's first user); nothing was changed");
  }
}

TEST(ScriptReplyTest, OtherRefusalsAreReplyErrors) {
  using fairsem::ReplyError;
  using fairsem::detail::check_script_reply;
  try {
    (void)check_script_reply(array({integer(-1), bulk("x\x01")}), refusal_context());
    FAIL();
  } catch (const ReplyError& e) {
    EXPECT_STREQ(e.what(),
                 "fairsem: semaphore 's' on h:1: the limit stored in 'fairsem:{s}:meta' is "
                 "\"x\\x01\", not a number; fairsem leaves it alone");
    EXPECT_EQ(e.server_message(), "ERR invalid stored limit");
  }
  try {
    (void)check_script_reply(array({integer(-2), bulk("k"), bulk("string"), bulk("zset")}),
                             refusal_context());
    FAIL();
  } catch (const ReplyError& e) {
    EXPECT_STREQ(e.what(),
                 "fairsem: semaphore 's' on h:1: key 'k' holds a string where fairsem keeps a "
                 "zset; it belongs to something else, so fairsem leaves it alone (choose another "
                 "key_prefix or name)");
    EXPECT_EQ(e.server_message(),
              "WRONGTYPE Operation against a key holding the wrong kind of value");
  }
  try {
    (void)check_script_reply(array({integer(-3), bulk("c")}), refusal_context());
    FAIL();
  } catch (const ReplyError& e) {
    EXPECT_STREQ(e.what(),
                 "fairsem: semaphore 's' on h:1: key 'c' does not hold an integer counter; it "
                 "belongs to something else, so fairsem leaves it alone");
  }
}

TEST(ScriptReplyTest, ALaterDataModelIsADataModelErrorNamingBothModelsAndTheWriter) {
  using fairsem::detail::check_script_reply;
  try {
    (void)check_script_reply(array({integer(-7), bulk("3"), integer(2), bulk("0.5.0")}),
                             refusal_context());
    FAIL();
  } catch (const fairsem::DataModelError& e) {
    EXPECT_EQ(e.stored_model(), "3");
    EXPECT_EQ(e.supported_model(), 2);
    EXPECT_EQ(e.written_by(), "0.5.0");
    EXPECT_EQ(std::string(e.what()),
              "fairsem: semaphore 's' on h:1: the semaphore's keys are in data model 3 (written "
              "by fairsem 0.5.0), and this client (fairsem " FAIRSEM_VERSION_STRING
              ") reads and writes data model 2; nothing was changed: upgrade this client");
  }
  try {
    (void)check_script_reply(array({integer(-7), bulk("x\x01"), integer(2), nil()}),
                             refusal_context());
    FAIL();
  } catch (const fairsem::DataModelError& e) {
    EXPECT_EQ(e.written_by(), "");
    EXPECT_NE(std::string(e.what()).find("data model x\\x01, and this client"), std::string::npos)
        << e.what();
  }
  // A DataModelError is a ProtocolError; a malformed one is a plain ProtocolError.
  EXPECT_THROW((void)check_script_reply(array({integer(-7), bulk("3"), integer(2), nil()}),
                                        refusal_context()),
               ProtocolError);
  for (const Reply& bad : {array({integer(-7), bulk("3"), integer(2)}),
                           array({integer(-7), integer(3), integer(2), nil()}),
                           array({integer(-7), bulk("3"), bulk("2"), nil()}),
                           array({integer(-7), bulk("3"), integer(2), integer(5)})}) {
    try {
      (void)check_script_reply(bad, refusal_context());
      ADD_FAILURE() << "accepted";
    } catch (const fairsem::DataModelError&) {
      ADD_FAILURE() << "a malformed refusal was taken for a data model";
    } catch (const ProtocolError&) {
    }
  }
}

TEST(ScriptReplyTest, TooManyUnitsForTheStoredLimitIsAnInvalidArgument) {
  fairsem::detail::RefusalContext ctx = refusal_context();
  ctx.units = 4;
  try {
    (void)fairsem::detail::check_script_reply(array({integer(-4), integer(2)}), ctx);
    FAIL();
  } catch (const fairsem::InvalidArgument& e) {
    EXPECT_STREQ(e.what(),
                 "fairsem: semaphore 's' on h:1: asked for 4 units, more than the limit 2 stored "
                 "in Redis (after a resize); nothing was written");
  }
  EXPECT_THROW((void)fairsem::detail::check_script_reply(array({integer(-4), integer(0)}), ctx),
               ProtocolError);
  EXPECT_THROW((void)fairsem::detail::check_script_reply(array({integer(-4)}), ctx), ProtocolError);
}

TEST(ScriptReplyTest, MalformedRepliesAndRefusalsThrowProtocolError) {
  using fairsem::detail::check_script_reply;
  const auto ctx = refusal_context();
  EXPECT_THROW((void)check_script_reply(nil(), ctx), ProtocolError);
  EXPECT_THROW((void)check_script_reply(integer(1), ctx), ProtocolError);
  EXPECT_THROW((void)check_script_reply(array({}), ctx), ProtocolError);
  EXPECT_THROW((void)check_script_reply(array({bulk("1")}), ctx), ProtocolError);
  try {
    (void)check_script_reply(array({integer(-1)}), ctx);
    FAIL();
  } catch (const ProtocolError& e) {
    EXPECT_STREQ(e.what(),
                 "fairsem: semaphore 's' on h:1: unexpected refusal -1 from the semaphore script");
  }
  EXPECT_THROW((void)check_script_reply(array({integer(-1), integer(5)}), ctx), ProtocolError);
  EXPECT_THROW((void)check_script_reply(array({integer(-1), bulk("5"), bulk("6")}), ctx),
               ProtocolError);
  EXPECT_THROW((void)check_script_reply(array({integer(-2), bulk("k"), bulk("string")}), ctx),
               ProtocolError);
  EXPECT_THROW(
      (void)check_script_reply(array({integer(-2), bulk("k"), integer(1), bulk("zset")}), ctx),
      ProtocolError);
  EXPECT_THROW((void)check_script_reply(array({integer(-3), nil()}), ctx), ProtocolError);
  EXPECT_THROW((void)check_script_reply(array({integer(-4), bulk("k")}), ctx), ProtocolError);
  EXPECT_THROW((void)check_script_reply(array({integer(LLONG_MIN)}), ctx), ProtocolError);
}

TEST(OpenReplyTest, AcceptsOnlyOneAndTheStoredExpiry) {
  using fairsem::detail::decode_open;
  EXPECT_EQ(decode_open(array({integer(1), integer(0)})), 0);
  EXPECT_EQ(decode_open(array({integer(1), integer(20000)})), 20000);
  EXPECT_THROW(decode_open(array({integer(1)})), ProtocolError);
  EXPECT_THROW(decode_open(array({integer(2), integer(0)})), ProtocolError);
  EXPECT_THROW(decode_open(array({integer(1), integer(-1)})), ProtocolError);
  EXPECT_THROW(decode_open(array({integer(1), bulk("0")})), ProtocolError);
  EXPECT_THROW(decode_open(array({integer(1), integer(0), integer(0)})), ProtocolError);
  EXPECT_THROW(decode_open(array({bulk("1"), integer(0)})), ProtocolError);
  EXPECT_THROW(decode_open(integer(1)), ProtocolError);
}

// The slot defaults to what the script sends: 0 for the first grant, -1 otherwise.
Reply acquire_reply(long long state, long long ticket, long long deadline, long long position,
                    long long now = kNow, std::optional<long long> slot = std::nullopt) {
  return array({integer(state), integer(ticket), integer(deadline), integer(position), integer(now),
                integer(slot.value_or(state == 1 ? 0 : -1))});
}

TEST(AcquireReplyTest, DecodesEveryState) {
  using fairsem::detail::AcquireState;
  using fairsem::detail::decode_acquire;
  auto r = decode_acquire(acquire_reply(1, 7, kNow + 10'000, 0));
  EXPECT_EQ(r.state, AcquireState::granted);
  EXPECT_EQ(r.ticket, 7);
  EXPECT_EQ(r.lease, milliseconds(10'000));
  EXPECT_EQ(r.position, 0);
  EXPECT_EQ(r.slots, (std::vector<long long>{0}));
  r = decode_acquire(acquire_reply(1, 9, kNow + 10'000, 0, kNow, 999'999'999));
  EXPECT_EQ(r.slots, (std::vector<long long>{999'999'999}));
  // A grant of three units: three slots, ascending.
  r = decode_acquire(array({integer(1), integer(4), integer(kNow + 1), integer(0), integer(kNow),
                            integer(0), integer(3), integer(7)}));
  EXPECT_EQ(r.slots, (std::vector<long long>{0, 3, 7}));
  r = decode_acquire(acquire_reply(2, 8, kNow + 500, 3));
  EXPECT_EQ(r.state, AcquireState::queued);
  EXPECT_EQ(r.ticket, 8);
  EXPECT_EQ(r.lease, milliseconds(500));
  EXPECT_EQ(r.position, 3);
  EXPECT_TRUE(r.slots.empty());
  r = decode_acquire(acquire_reply(0, 0, 0, 0));
  EXPECT_EQ(r.state, AcquireState::full);
  EXPECT_EQ(r.ticket, 0);
  r = decode_acquire(acquire_reply(3, 0, 0, 0));
  EXPECT_EQ(r.state, AcquireState::evicted);
  r = decode_acquire(acquire_reply(4, 0, 0, 0));
  EXPECT_EQ(r.state, AcquireState::too_large);
  // The longest lease there is.
  r = decode_acquire(acquire_reply(1, 1, kNow + fairsem::detail::kMaxLease.count(), 0));
  EXPECT_EQ(r.lease, fairsem::detail::kMaxLease);
}

TEST(AcquireReplyTest, MalformedRepliesThrowProtocolError) {
  using fairsem::detail::decode_acquire;
  const long long d = kNow + 1000;
  EXPECT_THROW((void)decode_acquire(nil()), ProtocolError);
  EXPECT_THROW(
      (void)decode_acquire(array({integer(1), integer(1), integer(d), integer(0), integer(kNow)})),
      ProtocolError);
  // Slots of a grant strictly ascend; a reply that got no permit has exactly one -1.
  EXPECT_THROW((void)decode_acquire(array({integer(1), integer(1), integer(d), integer(0),
                                           integer(kNow), integer(0), integer(0)})),
               ProtocolError);
  EXPECT_THROW((void)decode_acquire(array({integer(1), integer(1), integer(d), integer(0),
                                           integer(kNow), integer(3), integer(1)})),
               ProtocolError);
  EXPECT_THROW((void)decode_acquire(array({integer(2), integer(1), integer(d), integer(1),
                                           integer(kNow), integer(-1), integer(-1)})),
               ProtocolError);
  // A grant needs a slot below the largest limit; anything else carries slot -1.
  EXPECT_THROW((void)decode_acquire(acquire_reply(1, 1, d, 0, kNow, -1)), ProtocolError);
  EXPECT_THROW((void)decode_acquire(acquire_reply(1, 1, d, 0, kNow, 1'000'000'000)), ProtocolError);
  EXPECT_THROW((void)decode_acquire(acquire_reply(2, 1, d, 1, kNow, 0)), ProtocolError);
  EXPECT_THROW((void)decode_acquire(acquire_reply(0, 0, 0, 0, kNow, 3)), ProtocolError);
  EXPECT_THROW((void)decode_acquire(acquire_reply(5, 1, d, 0)), ProtocolError);
  EXPECT_THROW((void)decode_acquire(acquire_reply(4, 0, 0, 0, kNow, 2)), ProtocolError);
  EXPECT_THROW((void)decode_acquire(acquire_reply(-1, 1, d, 0)), ProtocolError);
  EXPECT_THROW((void)decode_acquire(acquire_reply(1, 0, d, 0)), ProtocolError);   // ticket 0
  EXPECT_THROW((void)decode_acquire(acquire_reply(2, -5, d, 1)), ProtocolError);  // negative
  EXPECT_THROW((void)decode_acquire(acquire_reply(1, 1, kNow - 1, 0)), ProtocolError);
  EXPECT_THROW(
      (void)decode_acquire(acquire_reply(1, 1, kNow + fairsem::detail::kMaxLease.count() + 1, 0)),
      ProtocolError);
  EXPECT_THROW((void)decode_acquire(acquire_reply(1, 1, LLONG_MAX, 0, 0)), ProtocolError);
  EXPECT_THROW((void)decode_acquire(acquire_reply(1, 1, LLONG_MIN, 0)), ProtocolError);
  EXPECT_THROW((void)decode_acquire(acquire_reply(1, 1, 10, 0, -LLONG_MAX)), ProtocolError);
  EXPECT_THROW((void)decode_acquire(acquire_reply(1, 1, d, 2)), ProtocolError);  // granted, queued
  EXPECT_THROW((void)decode_acquire(acquire_reply(2, 1, d, 0)), ProtocolError);  // queued at 0
  EXPECT_THROW((void)decode_acquire(array(
                   {integer(1), bulk("1"), integer(d), integer(0), integer(kNow), integer(0)})),
               ProtocolError);
  EXPECT_THROW((void)decode_acquire(
                   array({integer(0), nil(), integer(0), integer(0), integer(kNow), integer(-1)})),
               ProtocolError);
  EXPECT_THROW((void)decode_acquire(array(
                   {integer(1), integer(1), integer(d), integer(0), integer(kNow), bulk("0")})),
               ProtocolError);
}

TEST(ReleaseReplyTest, DecodesEveryState) {
  using fairsem::detail::decode_release;
  using fairsem::detail::ReleaseState;
  EXPECT_EQ(decode_release(array({integer(0)})), ReleaseState::not_present);
  EXPECT_EQ(decode_release(array({integer(1)})), ReleaseState::holder_released);
  EXPECT_EQ(decode_release(array({integer(2)})), ReleaseState::waiter_left);
  EXPECT_EQ(decode_release(array({integer(3)})), ReleaseState::released_before);
}

TEST(ReleaseReplyTest, MalformedRepliesThrowProtocolError) {
  using fairsem::detail::decode_release;
  EXPECT_THROW((void)decode_release(array({})), ProtocolError);  // used to index elements[0]
  EXPECT_THROW((void)decode_release(integer(1)), ProtocolError);
  EXPECT_THROW((void)decode_release(array({integer(4)})), ProtocolError);
  EXPECT_THROW((void)decode_release(array({integer(-1)})), ProtocolError);
  EXPECT_THROW((void)decode_release(array({bulk("1")})), ProtocolError);
  EXPECT_THROW((void)decode_release(array({integer(1), integer(1)})), ProtocolError);
}

TEST(RenewReplyTest, DecodesOneStatePerPermit) {
  using fairsem::detail::decode_renew;
  using fairsem::detail::RenewState;
  const auto r = decode_renew(array({integer(kNow), integer(kNow + 3000), integer(1), integer(0),
                                     integer(-1), integer(2), integer(9)}),
                              5);
  EXPECT_EQ(r.lease, milliseconds(3000));
  EXPECT_EQ(r.states,
            (std::vector<RenewState>{RenewState::held, RenewState::gone, RenewState::evicted,
                                     RenewState::waiting, RenewState::waiting}));
  EXPECT_TRUE(decode_renew(array({integer(kNow), integer(kNow)}), 0).states.empty());
}

TEST(RenewReplyTest, MalformedRepliesThrowProtocolError) {
  using fairsem::detail::decode_renew;
  const Reply good = array({integer(kNow), integer(kNow + 10), integer(1)});
  EXPECT_THROW((void)decode_renew(good, 0), ProtocolError);
  EXPECT_THROW((void)decode_renew(good, 2), ProtocolError);
  EXPECT_THROW((void)decode_renew(good, SIZE_MAX), ProtocolError);
  EXPECT_THROW((void)decode_renew(good, SIZE_MAX - 2), ProtocolError);
  EXPECT_THROW((void)decode_renew(array({integer(kNow), integer(kNow + 10), integer(-2)}), 1),
               ProtocolError);
  EXPECT_THROW((void)decode_renew(array({integer(kNow), integer(kNow + 10), nil()}), 1),
               ProtocolError);
  EXPECT_THROW((void)decode_renew(array({integer(kNow), integer(kNow - 10), integer(1)}), 1),
               ProtocolError);
  EXPECT_THROW((void)decode_renew(array({integer(-1), integer(10), integer(1)}), 1), ProtocolError);
  EXPECT_THROW((void)decode_renew(array({integer(0), integer(LLONG_MAX), integer(1)}), 1),
               ProtocolError);
  EXPECT_THROW((void)decode_renew(array({bulk("1"), integer(kNow), integer(1)}), 1), ProtocolError);
  EXPECT_THROW((void)decode_renew(nil(), 0), ProtocolError);
}

TEST(EvictReplyTest, DecodesEveryState) {
  using fairsem::EvictResult;
  using fairsem::detail::decode_evict;
  EXPECT_EQ(decode_evict(array({integer(0)})), EvictResult::not_found);
  EXPECT_EQ(decode_evict(array({integer(1)})), EvictResult::holder);
  EXPECT_EQ(decode_evict(array({integer(2)})), EvictResult::waiter);
  EXPECT_EQ(decode_evict(array({integer(3)})), EvictResult::already_evicted);
}

TEST(EvictReplyTest, MalformedRepliesThrowProtocolError) {
  using fairsem::detail::decode_evict;
  EXPECT_THROW((void)decode_evict(array({})), ProtocolError);  // used to index elements[0]
  EXPECT_THROW((void)decode_evict(bulk("1")), ProtocolError);
  EXPECT_THROW((void)decode_evict(array({integer(4)})), ProtocolError);
  EXPECT_THROW((void)decode_evict(array({integer(-1)})), ProtocolError);
  EXPECT_THROW((void)decode_evict(array({nil()})), ProtocolError);
  EXPECT_THROW((void)decode_evict(array({integer(1), bulk("x")})), ProtocolError);
}

TEST(ResizeReplyTest, DecodesAndRefusesMalformed) {
  using fairsem::detail::decode_resize;
  const auto r = decode_resize(array({integer(2), integer(5), integer(3)}));
  EXPECT_EQ(r.old_limit, 2);
  EXPECT_EQ(r.new_limit, 5);
  EXPECT_EQ(r.promoted, 3);
  EXPECT_EQ(decode_resize(array({integer(0), integer(1), integer(0)})).old_limit, 0);
  EXPECT_THROW((void)decode_resize(array({integer(2), integer(5)})), ProtocolError);
  EXPECT_THROW((void)decode_resize(array({integer(2), integer(0), integer(0)})), ProtocolError);
  EXPECT_THROW((void)decode_resize(array({integer(-1), integer(1), integer(0)})), ProtocolError);
  EXPECT_THROW((void)decode_resize(array({integer(2), integer(1), integer(-1)})), ProtocolError);
  EXPECT_THROW((void)decode_resize(array({integer(2), bulk("1"), integer(0)})), ProtocolError);
}

TEST(WakeReplyTest, DecodesTimeoutPromotionAndEviction) {
  using fairsem::detail::decode_wake;
  using fairsem::detail::WakeReason;
  EXPECT_EQ(decode_wake(nil()).reason, WakeReason::timeout);
  const auto promoted = decode_wake(array({bulk("p:{s}:wake:a"), bulk("5:17")}));
  EXPECT_EQ(promoted.reason, WakeReason::promoted);
  EXPECT_EQ(promoted.ticket, 5);
  EXPECT_EQ(promoted.slots, (std::vector<long long>{17}));
  EXPECT_EQ(decode_wake(array({bulk("p:{s}:wake:a"), bulk("1:0")})).slots,
            (std::vector<long long>{0}));
  const auto weighted = decode_wake(array({bulk("p:{s}:wake:a"), bulk("9007199254740993:1,4,9")}));
  EXPECT_EQ(weighted.ticket, 9007199254740993);
  EXPECT_EQ(weighted.slots, (std::vector<long long>{1, 4, 9}));
  EXPECT_EQ(decode_wake(array({bulk("p:{s}:wake:a"), bulk("too-large")})).reason,
            WakeReason::too_large);
  EXPECT_EQ(decode_wake(array({bulk("p:{s}:wake:a"), bulk("evicted")})).reason,
            WakeReason::evicted);
}

TEST(WakeReplyTest, MalformedRepliesThrowProtocolError) {
  using fairsem::detail::decode_wake;
  EXPECT_THROW((void)decode_wake(integer(1)), ProtocolError);
  EXPECT_THROW((void)decode_wake(array({})), ProtocolError);
  EXPECT_THROW((void)decode_wake(array({bulk("k")})), ProtocolError);
  EXPECT_THROW((void)decode_wake(array({bulk("k"), bulk("1"), bulk("1")})), ProtocolError);
  EXPECT_THROW((void)decode_wake(array({bulk("k"), bulk("-2")})), ProtocolError);
  EXPECT_THROW((void)decode_wake(array({bulk("k"), bulk("17")})), ProtocolError);  // no ticket
  EXPECT_THROW((void)decode_wake(array({bulk("k"), bulk("0:1")})), ProtocolError);
  EXPECT_THROW((void)decode_wake(array({bulk("k"), bulk(":1")})), ProtocolError);
  EXPECT_THROW((void)decode_wake(array({bulk("k"), bulk("x:1")})), ProtocolError);
  EXPECT_THROW((void)decode_wake(array({bulk("k"), bulk("3:")})), ProtocolError);
  EXPECT_THROW((void)decode_wake(array({bulk("k"), bulk("3:1:2")})), ProtocolError);
  EXPECT_THROW((void)decode_wake(array({bulk("k"), bulk("")})), ProtocolError);
  EXPECT_THROW((void)decode_wake(array({bulk("k"), bulk("1:1000000000")})), ProtocolError);
  EXPECT_THROW((void)decode_wake(array({bulk("k"), bulk("1:99999999999")})), ProtocolError);
  EXPECT_THROW((void)decode_wake(array({bulk("k"), bulk("1:1x")})), ProtocolError);
  EXPECT_THROW((void)decode_wake(array({bulk("k"), bulk("1:3,2")})), ProtocolError);
  EXPECT_THROW((void)decode_wake(array({bulk("k"), bulk("1:1,,2")})), ProtocolError);
  EXPECT_THROW((void)decode_wake(array({bulk("k"), bulk("1:,1")})), ProtocolError);
  EXPECT_THROW((void)decode_wake(array({bulk("k"), integer(1)})), ProtocolError);
  EXPECT_THROW((void)decode_wake(array({nil(), bulk("1")})), ProtocolError);
}

TEST(ServerClockReplyTest, AcceptsMillisecondsSystemClockCanHold) {
  using fairsem::detail::decode_server_clock;
  EXPECT_EQ(decode_server_clock(integer(kNow)), milliseconds(kNow));
  EXPECT_EQ(decode_server_clock(integer(0)), milliseconds(0));
  EXPECT_THROW((void)decode_server_clock(integer(-1)), ProtocolError);
  EXPECT_THROW((void)decode_server_clock(integer(LLONG_MAX)), ProtocolError);
  EXPECT_THROW((void)decode_server_clock(bulk("1700000000000")), ProtocolError);
}

}  // namespace
