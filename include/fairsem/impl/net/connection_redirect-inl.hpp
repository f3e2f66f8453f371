#pragma once

// Connection::command() and eval(): one command sent where it runs. MOVED, ASK and a demoted
// master's READONLY/UNBLOCKED are followed (up to kMaxRedirects hops) with the Discovery's help,
// and code the server lacks is loaded and run once more: a script (NOSCRIPT) with SCRIPT LOAD,
// a function library ("Function not found") with FUNCTION LOAD.

#include <fmt/format.h>
#include "fairsem/impl/config.hpp"

#include <string>

#include "fairsem/impl/net/connection.hpp"
#include "fairsem/impl/net/discovery.hpp"
#include "fairsem/impl/net/router.hpp"
#include "fairsem/impl/protocol/replies.hpp"
#include "fairsem/impl/text.hpp"

namespace fairsem::detail {

FAIRSEM_INLINE void Connection::load(const Script& script) {
  Reply loaded = roundtrip({"SCRIPT", "LOAD", script.body}, options_.command_timeout);
  if (loaded.is_error()) {
    throw ReplyError(fmt::format("fairsem: SCRIPT LOAD of {} on {} failed: {}", script.name,
                                 endpoint_, loaded.str),
                     loaded.str);
  }
  if (expect_string(loaded, "the SCRIPT LOAD reply") != script.sha1) {
    throw ProtocolError(fmt::format("fairsem: {} returned SHA1 {} for script {}, expected {}",
                                    endpoint_, loaded.str, script.name, script.sha1));
  }
}

FAIRSEM_INLINE bool Connection::load_library(const Library& library, Reply& error) {
  Reply loaded = roundtrip({"FUNCTION", "LOAD", library.body}, options_.command_timeout);
  // Named by its content: a library of that name that is there already is this one (or a
  // foreign one; then its function is still missing, and eval() runs scripts instead).
  if (!loaded.is_error() || (starts_with(loaded.str, "ERR Library") &&
                             loaded.str.find("already exists") != std::string::npos)) {
    return true;
  }
  error = std::move(loaded);
  return false;
}

FAIRSEM_INLINE Connection::Reload Connection::reload(const Args& argv, Reply& reply,
                                                     const Script* script) {
  if (script == nullptr || !reply.is_error()) return Reload::not_needed;
  if (argv[0] == "FCALL") {
    if (script->library == nullptr || !starts_with(reply.str, "ERR Function not found")) {
      return Reload::not_needed;
    }
    return load_library(*script->library, reply) ? Reload::loaded : Reload::failed;
  }
  if (!starts_with(reply.str, "NOSCRIPT")) return Reload::not_needed;
  load(*script);
  return Reload::loaded;
}

namespace redirection_helpers {

// Redirections followed for one command before its last error reply is returned as it is.
inline constexpr int kMaxRedirects = 5;

/// Error replies of a master that was turned into a replica: the command did not run (a script
/// stops at its first write, and fairsem's scripts write nothing before it).
FAIRSEM_INLINE bool is_demoted(std::string_view error) {
  return starts_with(error, "READONLY") || starts_with(error, "UNBLOCKED") ||
         error.find("READONLY You can't write") != std::string_view::npos;
}

/// What an error reply to FCALL means: final (the caller's, as for any command), run the
/// script with EVALSHA this time, or from now on. `from_load`: the reply is FUNCTION LOAD's,
/// sent because the library was missing.
enum class FcallError { final, script_this_time, script_from_now_on };
FAIRSEM_INLINE FcallError classify_fcall_error(std::string_view error, bool from_load) {
  if (from_load) {
    // Out of memory, Redis refuses FUNCTION LOAD (a write that grows it), not SCRIPT LOAD.
    if (starts_with(error, "OOM")) return FcallError::script_this_time;
    // Refused by the ACL, unknown, or not compiled by this server: scripts will do.
    if (starts_with(error, "NOPERM") || starts_with(error, "ERR")) {
      return FcallError::script_from_now_on;
    }
    return FcallError::final;  // LOADING, BUSY, MASTERDOWN: as for any command
  }
  // FCALL unknown (Redis < 7, a renamed command) or refused by the ACL, or the function still
  // missing after its library was loaded (a foreign library under that name).
  if (starts_with(error, "ERR unknown command") || starts_with(error, "NOPERM") ||
      starts_with(error, "ERR Function not found")) {
    return FcallError::script_from_now_on;
  }
  return FcallError::final;
}

/// `command` (EVALSHA or FCALL) `handle` numkeys keys... args...
FAIRSEM_INLINE Args script_call(std::string_view command, std::string_view handle, const Args& keys,
                                const Args& args, const std::string& numkeys) {
  Args argv;
  argv.reserve(3 + keys.size() + args.size());
  argv.push_back(command);
  argv.push_back(handle);
  argv.push_back(numkeys);
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

}  // namespace redirection_helpers

FAIRSEM_INLINE Reply Connection::exchange(const Args& argv, std::chrono::milliseconds timeout,
                                          const Script* script) {
  bool reloaded = false;  // on the node connected to now
  for (int hop = 0;; ++hop) {
    load_failed_ = false;
    Reply reply = roundtrip(argv, timeout);
    if (!reply.is_error()) return reply;
    if (!reloaded) {
      // The server lacks the code (a flush, a restart, a new master): loaded, once per node.
      const Reload loaded = reload(argv, reply, script);
      if (loaded == Reload::loaded) {
        reloaded = true;
        --hop;
        continue;
      }
      load_failed_ = loaded == Reload::failed;  // followed below as any reply (READONLY)
    }
    if (!discovery_ || hop >= redirection_helpers::kMaxRedirects) return reply;
    if (auto redirect = parse_redirect(reply.str, node_)) {
      if (redirect->kind == Redirect::Kind::ask) {
        return ask(redirect->node, argv, timeout, script);
      }
      discovery_->moved(redirect->slot, redirect->node);
      if (slot_ < 0) slot_ = redirect->slot;
      broken_ = true;  // the next roundtrip connects to the slot's master
      reloaded = false;
      continue;
    }
    if (redirection_helpers::is_demoted(reply.str)) {
      discovery_->forget();
      broken_ = true;
      reloaded = false;
      continue;
    }
    return reply;
  }
}

FAIRSEM_INLINE Reply Connection::ask(const NodeAddress& node, const Args& argv,
                                     std::chrono::milliseconds timeout, const Script* script) {
  // ASKING admits only the next command, so it precedes the command each time it is sent.
  Connection asked(discovery_->node_options(node));
  asked.deadline_ = deadline_;
  auto once = [&] {
    const Reply asking = asked.roundtrip({"ASKING"}, options_.command_timeout);
    if (asking.is_error()) {
      throw ReplyError(
          fmt::format("fairsem: ASKING on {} failed: {}", asked.endpoint(), asking.str),
          asking.str);
    }
    return asked.roundtrip(argv, timeout);
  };
  Reply reply = once();
  const Reload loaded = asked.reload(argv, reply, script);
  if (loaded == Reload::loaded) reply = once();
  load_failed_ = loaded == Reload::failed;
  return reply;
}

FAIRSEM_INLINE Reply Connection::command(const Args& argv) {
  return command(argv, options_.command_timeout);
}

FAIRSEM_INLINE Reply Connection::command(const Args& argv,
                                         std::chrono::milliseconds reply_timeout) {
  if (argv.empty()) throw InvalidArgument("fairsem: a command needs at least its name");
  Reply reply = exchange(argv, reply_timeout, nullptr);
  if (reply.is_error()) {
    throw ReplyError(fmt::format("fairsem: {} on {} failed: {}", argv[0], endpoint_, reply.str),
                     reply.str);
  }
  return reply;
}

FAIRSEM_INLINE bool script_did_not_run(std::string_view error) {
  return starts_with(error, "NOSCRIPT") ||
         redirection_helpers::classify_fcall_error(error, false) !=
             redirection_helpers::FcallError::final ||
         parse_redirect(error, NodeAddress{}).has_value() || redirection_helpers::is_demoted(error);
}

FAIRSEM_INLINE Args Connection::script_command(const Script& script, const Args& keys,
                                               const Args& args, const std::string& numkeys) const {
  if (script.library != nullptr && functions_) {
    return redirection_helpers::script_call("FCALL", script.function, keys, args, numkeys);
  }
  return redirection_helpers::script_call("EVALSHA", script.sha1, keys, args, numkeys);
}

FAIRSEM_INLINE Reply Connection::eval(const Script& script, const Args& keys, const Args& args) {
  using redirection_helpers::FcallError;
  const std::string numkeys = std::to_string(keys.size());
  Reply reply;
  bool ran = false;
  if (script.library != nullptr && functions_) {
    reply =
        exchange(script_command(script, keys, args, numkeys), options_.command_timeout, &script);
    const FcallError error =
        reply.is_error() ? redirection_helpers::classify_fcall_error(reply.str, load_failed_)
                         : FcallError::final;
    // Not run: the script runs with EVALSHA instead, this time or on this connection for good.
    ran = error == FcallError::final;
    if (error == FcallError::script_from_now_on) functions_ = false;
  }
  if (!ran) {
    reply = exchange(redirection_helpers::script_call("EVALSHA", script.sha1, keys, args, numkeys),
                     options_.command_timeout, &script);
  }
  if (reply.is_error()) {
    throw ReplyError(
        fmt::format("fairsem: script {} on {} failed: {}", script.name, endpoint_, reply.str),
        reply.str);
  }
  return reply;
}

}  // namespace fairsem::detail
