#pragma once

// Connection::command() and eval(): one command sent where it runs. MOVED, ASK and a demoted
// master's READONLY/UNBLOCKED are followed (up to kMaxRedirects hops) with the Discovery's help,
// and a script the server lost (NOSCRIPT) is loaded again with SCRIPT LOAD and run once more.

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

namespace redirection_helpers {

// Redirections followed for one command before its last error reply is returned as it is.
inline constexpr int kMaxRedirects = 5;

/// Error replies of a master that was turned into a replica: the command did not run (a script
/// stops at its first write, and fairsem's scripts write nothing before it).
FAIRSEM_INLINE bool is_demoted(std::string_view error) {
  return starts_with(error, "READONLY") || starts_with(error, "UNBLOCKED") ||
         error.find("READONLY You can't write") != std::string_view::npos;
}

}  // namespace redirection_helpers

FAIRSEM_INLINE Reply Connection::exchange(const Args& argv, std::chrono::milliseconds timeout,
                                          const Script* script) {
  last_reply_elsewhere_ = false;
  bool reloaded = false;
  for (int hop = 0;; ++hop) {
    Reply reply = roundtrip(argv, timeout);
    if (!reply.is_error()) return reply;
    if (script != nullptr && !reloaded && starts_with(reply.str, "NOSCRIPT")) {
      // The server lost the script (SCRIPT FLUSH, a restart, a new master): load it, once.
      load(*script);
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
  if (script != nullptr && reply.is_error() && starts_with(reply.str, "NOSCRIPT")) {
    asked.load(*script);
    reply = once();
  }
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
  Args argv;
  argv.reserve(3 + keys.size() + args.size());
  argv.push_back("EVALSHA");
  argv.push_back(script.sha1);
  argv.push_back(numkeys);
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());

  Reply reply = exchange(argv, options_.command_timeout, &script);
  if (reply.is_error()) {
    throw ReplyError(
        fmt::format("fairsem: script {} on {} failed: {}", script.name, endpoint_, reply.str),
        reply.str);
  }
  return reply;
}

}  // namespace fairsem::detail
