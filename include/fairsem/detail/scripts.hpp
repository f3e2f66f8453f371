#pragma once

// The Lua scripts fairsem runs on the server. Their bodies live in src/lua/*.lua and are
// compiled in by cmake/FairsemEmbedScripts.cmake, which also computes each SHA1.

#include <string>
#include <string_view>
#include <vector>

namespace fairsem::detail {

struct Script {
  std::string_view name;  // file name without ".lua"
  std::string_view body;  // the Lua source as SCRIPT LOAD receives it
  std::string_view sha1;  // lower-case hex SHA1 of body: the EVALSHA handle
};

namespace scripts {

/// Returns the server clock as {seconds, microseconds} from TIME; every lease deadline is
/// computed from the same clock, never from a client's.
extern const Script server_clock;

/// Pushes to a client's kick list (src/lua/kick.lua), so that its wake-up thread's BRPOP starts
/// over with the wake lists of newly queued waiters.
extern const Script kick;

/// Every operation on a semaphore (open, acquire, release, renew, status, evict, resize); see
/// the header comment of src/lua/semaphore.lua for its keys, arguments and replies.
extern const Script semaphore;

}  // namespace scripts

/// The KEYS of the semaphore script for semaphore `name` under `key_prefix`, in its order
/// (defined in semaphore.cpp).
std::vector<std::string> semaphore_keys(std::string_view key_prefix, std::string_view name);
}  // namespace fairsem::detail
