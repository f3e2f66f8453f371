#pragma once

// An owned, hiredis-independent copy of one RESP2 reply. Connection converts hiredis replies
// into this type, so reply decoding can be unit-tested and fuzzed without a server.

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fairsem/errors.hpp"

namespace fairsem::detail {

struct Reply {
  enum class Type : std::uint8_t { nil, integer, string, status, error, array };

  Type type = Type::nil;
  long long integer = 0;        // Type::integer
  std::string str;              // Type::string, Type::status, Type::error
  std::vector<Reply> elements;  // Type::array

  static Reply make_nil() { return Reply{}; }
  static Reply make_integer(long long v) {
    Reply r;
    r.type = Type::integer;
    r.integer = v;
    return r;
  }
  static Reply make_string(std::string s, Type t = Type::string) {
    Reply r;
    r.type = t;
    r.str = std::move(s);
    return r;
  }
  static Reply make_array(std::vector<Reply> items) {
    Reply r;
    r.type = Type::array;
    r.elements = std::move(items);
    return r;
  }

  bool is_nil() const noexcept { return type == Type::nil; }
  bool is_error() const noexcept { return type == Type::error; }
};

inline std::string_view type_name(Reply::Type t) noexcept {
  switch (t) {
    case Reply::Type::nil:
      return "nil";
    case Reply::Type::integer:
      return "integer";
    case Reply::Type::string:
      return "bulk string";
    case Reply::Type::status:
      return "status";
    case Reply::Type::error:
      return "error";
    case Reply::Type::array:
      return "array";
  }
  return "unknown";
}

/// Throws ProtocolError unless `r` has type `t`; `what` names the value for the message.
inline const Reply& expect_type(const Reply& r, Reply::Type t, std::string_view what) {
  if (r.type != t) {
    throw ProtocolError(
        fmt::format("fairsem: expected {} for {}, got {}", type_name(t), what, type_name(r.type)));
  }
  return r;
}

inline long long expect_integer(const Reply& r, std::string_view what) {
  return expect_type(r, Reply::Type::integer, what).integer;
}

inline const std::string& expect_string(const Reply& r, std::string_view what) {
  if (r.type != Reply::Type::string && r.type != Reply::Type::status) {
    throw ProtocolError(
        fmt::format("fairsem: expected a string for {}, got {}", what, type_name(r.type)));
  }
  return r.str;
}

inline const std::vector<Reply>& expect_array(const Reply& r, std::string_view what,
                                              std::size_t min_size = 0) {
  const auto& items = expect_type(r, Reply::Type::array, what).elements;
  if (items.size() < min_size) {
    throw ProtocolError(fmt::format("fairsem: expected at least {} elements in {}, got {}",
                                    min_size, what, items.size()));
  }
  return items;
}

}  // namespace fairsem::detail
