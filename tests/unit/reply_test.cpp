#include <gtest/gtest.h>

#include <fairsem/detail/reply.hpp>
#include <fairsem/detail/text.hpp>

namespace {

using fairsem::ProtocolError;
using fairsem::detail::Reply;

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

}  // namespace
