#pragma once

// A toy fenced store for the fencing tests: one value per slot, in a Redis hash, written only
// by a (slot, token) at least as new as the newest that slot has accepted. A holder whose
// permit passed on while it was paused carries an older token for its slot and is refused.
// Shared by the test worker (the paused holder) and process_test.cpp.

#include <string>

#include "fairsem/impl/net/connection.hpp"

namespace fairsem::test {

/// KEYS[1] the store; ARGV slot, token, value. 1: written, 0: refused.
inline constexpr const char* kFencedWriteLua = R"lua(
local field = 'token:' .. ARGV[1]
local newest = tonumber(redis.call('HGET', KEYS[1], field) or '0')
if tonumber(ARGV[2]) < newest then return 0 end
redis.call('HSET', KEYS[1], field, ARGV[2], 'value:' .. ARGV[1], ARGV[3])
return 1
)lua";

/// Writes `value` for `slot` unless the slot has accepted a newer token; true if written.
inline bool fenced_write(detail::Connection& conn, const std::string& store, long long slot,
                         long long token, const std::string& value) {
  const std::string slot_arg = std::to_string(slot);
  const std::string token_arg = std::to_string(token);
  return conn.command({"EVAL", kFencedWriteLua, "1", store, slot_arg, token_arg, value}).integer ==
         1;
}

/// The value last written for `slot` (empty if none).
inline std::string fenced_value(detail::Connection& conn, const std::string& store,
                                long long slot) {
  return conn.command({"HGET", store, "value:" + std::to_string(slot)}).str;
}

}  // namespace fairsem::test
