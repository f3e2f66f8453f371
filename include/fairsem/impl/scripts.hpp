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

/// One script per operation on a semaphore, each src/lua/semaphore/common.lua followed by the
/// operation's own file (src/lua/semaphore/<op>.lua): see those for the keys, the arguments and
/// the replies.
extern const Script semaphore_open;
extern const Script semaphore_acquire;
extern const Script semaphore_release;
extern const Script semaphore_renew;
extern const Script semaphore_status;
extern const Script semaphore_evict;
extern const Script semaphore_resize;

/// The script of semaphore operation `op` ("open", "acquire", ...). Throws std::logic_error for
/// an unknown operation (defined in semaphore_core.cpp).
const Script& semaphore_script(std::string_view op);

}  // namespace scripts

/// The KEYS of the semaphore script for semaphore `name` under `key_prefix`, in its order
/// (defined in semaphore.cpp).
std::vector<std::string> semaphore_keys(std::string_view key_prefix, std::string_view name);
}  // namespace fairsem::detail
