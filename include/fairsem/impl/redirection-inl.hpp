#pragma once

// Connection::command() and eval(): one command sent where it runs. MOVED, ASK and a demoted
// master's READONLY/UNBLOCKED are followed (up to kMaxRedirects hops) with the Discovery's help,
// and code the server lacks is loaded and run once more: a script (NOSCRIPT) with SCRIPT LOAD,
// a function library ("Function not found") with FUNCTION LOAD.

#include <fmt/format.h>
#include "fairsem/impl/config.hpp"

#include <string>

#include "fairsem/impl/connection.hpp"
#include "fairsem/impl/discovery.hpp"
#include "fairsem/impl/replies.hpp"
#include "fairsem/impl/router.hpp"
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

FAIRSEM_INLINE bool Connection::load_library(const Library& library) {
  Reply loaded = roundtrip({"FUNCTION", "LOAD", library.body}, options_.command_timeout);
  if (!loaded.is_error()) return true;
  // Named by its content: a library of that name that is there already is this one.
  if (starts_with(loaded.str, "ERR Library") &&
      loaded.str.find("already exists") != std::string::npos) {
    return true;
  }
  // The user may not load functions, or this server cannot compile them: scripts will do.
  if (starts_with(loaded.str, "NOPERM") || starts_with(loaded.str, "ERR unknown") ||
      starts_with(loaded.str, "ERR Error registering functions") ||
      starts_with(loaded.str, "ERR Error compiling function")) {
    return false;
  }
  throw ReplyError(fmt::format("fairsem: FUNCTION LOAD of {} on {} failed: {}", library.name,
                               endpoint_, loaded.str),
                   loaded.str);
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

/// After `reply` to `argv` (a script's EVALSHA or FCALL), loads the code the server on `conn`
/// lacks: true when it is there now, so that the command can run again.
FAIRSEM_INLINE bool reload(Connection& conn, const Args& argv, const Reply& reply,
                           const Script* script) {
  if (script == nullptr || !reply.is_error()) return false;
  if (argv[0] == "FCALL") {
    return starts_with(reply.str, "ERR Function not found") && script->library != nullptr &&
           conn.load_library(*script->library);
  }
  if (!starts_with(reply.str, "NOSCRIPT")) return false;
  conn.load(*script);
  return true;
}

/// An FCALL error reply after which the connection runs scripts instead: FCALL unknown
/// (Redis < 7) or refused (ACL), or the library not there and not loadable.
FAIRSEM_INLINE bool without_functions(std::string_view error) {
  return starts_with(error, "ERR unknown command") || starts_with(error, "NOPERM") ||
         starts_with(error, "ERR Function not found");
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
  last_reply_elsewhere_ = false;
  bool reloaded = false;
  for (int hop = 0;; ++hop) {
    Reply reply = roundtrip(argv, timeout);
    if (!reply.is_error()) return reply;
    if (!reloaded && redirection_helpers::reload(*this, argv, reply, script)) {
      // The server lost the code (a flush, a restart, a new master): loaded again, once.
      reloaded = true;
      --hop;
      continue;
    }
    if (!discovery_ || hop >= redirection_helpers::kMaxRedirects) return reply;
    if (auto redirect = parse_redirect(reply.str, node_)) {
      if (redirect->kind == Redirect::Kind::ask) {
        last_reply_elsewhere_ = true;
        return ask(redirect->node, argv, timeout, script);
      }
      discovery_->moved(redirect->slot, redirect->node);
      if (slot_ < 0) slot_ = redirect->slot;
      broken_ = true;  // the next roundtrip connects to the slot's master
      continue;
    }
    if (redirection_helpers::is_demoted(reply.str)) {
      discovery_->forget();
      broken_ = true;
      continue;
    }
    return reply;
  }
}

FAIRSEM_INLINE Reply Connection::ask(const NodeAddress& node, const Args& argv,
                                     std::chrono::milliseconds timeout, const Script* script) {
  // ASKING admits only the next command, so it precedes the command each time it is sent.
  Connection asked(discovery_->node_options(node));
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
  if (redirection_helpers::reload(asked, argv, reply, script)) reply = once();
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

FAIRSEM_INLINE Reply Connection::eval(const Script& script, const Args& keys, const Args& args) {
  const std::string numkeys = std::to_string(keys.size());
  Reply reply;
  bool ran = false;
  if (script.library != nullptr && functions_) {
    reply =
        exchange(redirection_helpers::script_call("FCALL", script.function, keys, args, numkeys),
                 options_.command_timeout, &script);
    // Refused before it ran: this connection runs the script with EVALSHA from now on.
    ran = !(reply.is_error() && redirection_helpers::without_functions(reply.str));
    if (!ran) functions_ = false;
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
