#pragma once

// The Lua scripts fairsem runs on the server. Their bodies live in src/lua/*.lua and are
// embedded by cmake/FairsemEmbedScripts.cmake, which also computes each SHA1.

#include <string>
#include <string_view>
#include <vector>

namespace fairsem::detail {

/// A Redis function library (Redis 7+): loaded once with FUNCTION LOAD, its functions run with
/// FCALL and build their helpers once, at load, where an EVAL script builds them on every run.
struct Library {
  std::string_view name;  // "fairsem_<12 hex digits of its SHA1>": one name per content
  std::string_view body;  // the Lua source as FUNCTION LOAD receives it ("#!lua name=...")
};

struct Script {
  std::string_view name;  // file name without ".lua"
  std::string_view body;  // the Lua source as SCRIPT LOAD receives it
  std::string_view sha1;  // lower-case hex SHA1 of body: the EVALSHA handle
  // The same code as a function of `library` (FCALL `function`), or nullptr: EVALSHA only.
  const Library* library = nullptr;
  std::string_view function;
};

}  // namespace fairsem::detail

// The scripts themselves, one inline constexpr Script each, generated from src/lua by
// cmake/FairsemEmbedScripts.cmake into <build>/generated/include (installed beside this header):
//   server_clock       the server clock as {seconds, microseconds} from TIME; every lease
//                      deadline is computed from the same clock, never from a client's
//   kick               pushes to a client's kick list (src/lua/kick.lua), so that its wake-up
//                      thread's BRPOP starts over with the wake lists of newly queued waiters
//   semaphore_<op>     one script per operation on a semaphore (open, acquire, release, renew,
//                      status, evict, resize, tenant), each src/lua/semaphore/common.lua,
//                      tenants.lua, slots.lua and queue.lua followed by the operation's own file
//                      (src/lua/semaphore/<op>.lua): see those for the keys, the arguments and
//                      the replies
//   semaphore_scripts  the eight semaphore_<op> scripts, in that order (std::array of pointers)
//   semaphore_library  the eight as one function library (<build>/generated/lua/
//                      semaphore_library.lua), each semaphore_<op> naming its function there
#include "fairsem/impl/scripts_data.hpp"

namespace fairsem::detail {

namespace scripts {

/// The script of semaphore operation `op` ("open", "acquire", ...). Throws std::logic_error for
/// an unknown operation (defined in semaphore_core-inl.hpp).
const Script& semaphore_script(std::string_view op);

}  // namespace scripts

/// The KEYS of the semaphore script for semaphore `name` under `key_prefix`, in its order
/// (defined in semaphore-inl.hpp).
std::vector<std::string> semaphore_keys(std::string_view key_prefix, std::string_view name);
}  // namespace fairsem::detail
