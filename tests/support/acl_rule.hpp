#pragma once

// The Redis ACL an operator gives fairsem's user: only the keys under the default prefix and
// only the commands fairsem sends (from the client, and from inside its Lua scripts, which
// Redis 7 checks against the same user). Shared by the security and CLI tests.

#include <string>
#include <string_view>
#include <vector>

#include "fairsem/impl/net/connection.hpp"
#include "script_command.hpp"
#include "words.hpp"

namespace fairsem::test {

/// What follows `ACL SETUSER <user> reset on ><password>`: `reset` drops every permission
/// (-@all, no keys; no channels from Redis 7.0, all channels before, hence `resetchannels`:
/// Redis 6.2's acl-pubsub-default is allchannels), then the key pattern and the commands:
///   client-side:  EVALSHA, SCRIPT LOAD (after NOSCRIPT), BRPOP (a waiter's wake list),
///                 SELECT (only sent for a /db other than 0);
///   in scripts:   TIME and the string, hash, list and sorted-set commands of src/lua/semaphore/.
/// With it alone, a server with functions sees fairsem fall back to EVALSHA (one denied FCALL
/// per connection); kFairsemFunctionsAclRule adds what the function library needs.
inline constexpr std::string_view kFairsemAclRule =
    "resetchannels ~fairsem:* "
    "+evalsha +script|load +brpop +select "
    "+time +type +get +set +incr +del +pexpire +pexpireat "
    "+hget +hmget +hset +hdel +hexists +hlen +hkeys +hgetall "
    "+lpush +lindex "
    "+zadd +zrem +zrank +zscore +zcard +zrange +zrangebyscore +zremrangebyscore "
    "+zpopmin +zinterstore";

/// Added to kFairsemAclRule on a server with functions (Redis 7+; Redis 6.2 refuses these
/// names): FCALL, and FUNCTION LOAD when the library is missing.
inline constexpr std::string_view kFairsemFunctionsAclRule = "+fcall +function|load";

/// The whole rule for the server `admin` is connected to.
inline std::string fairsem_acl_rule(detail::Connection& admin) {
  std::string rule(kFairsemAclRule);
  if (has_functions(admin)) rule.append(" ").append(kFairsemFunctionsAclRule);
  return rule;
}

/// Creates (or replaces) `user` with `password` and `rule` through an admin connection.
inline void set_acl_user(detail::Connection& admin, const std::string& user,
                         const std::string& password, std::string_view rule) {
  std::vector<std::string> words = {"ACL", "SETUSER", user, "reset", "on", ">" + password};
  for (std::string& w : split_words(rule)) words.push_back(std::move(w));
  admin.command(detail::Args(words.begin(), words.end()));
}

/// As above, with fairsem_acl_rule(admin).
inline void set_acl_user(detail::Connection& admin, const std::string& user,
                         const std::string& password) {
  set_acl_user(admin, user, password, fairsem_acl_rule(admin));
}

}  // namespace fairsem::test
