#pragma once

// hiredis replies into fairsem's own Reply, the same with every hiredis fairsem supports (0.14
// and 1.x). Internal: it includes hiredis.h, which no public header does (only the
// implementation, and so header-only mode, includes it).
//
// The reply nesting limit lives here. hiredis 0.14 refuses replies nested more than 8 arrays
// deep; hiredis 1.x accepts any depth, and both its reply destructor and fairsem's conversion
// recurse, so a hostile server could crash the client with a deep enough reply. Readers set up
// by limit_reply_depth() refuse such a reply while it is being read, with either version.

#include <hiredis/hiredis.h>

#include <memory>

#include "fairsem/impl/protocol/reply.hpp"

namespace fairsem::detail {

/// The deepest array nesting a reply may have (hiredis 0.14's own limit). fairsem's deepest
/// reply, CLUSTER SLOTS, has 3 levels.
inline constexpr int kMaxReplyDepth = 8;

struct ReplyDeleter {
  void operator()(redisReply* reply) const noexcept { freeReplyObject(reply); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

/// Makes `reader` refuse any array nested deeper than kMaxReplyDepth: the read fails as an
/// out-of-memory error does, and reply_depth_refused() then says why. Call once per reader,
/// before it reads (Connection does it for every context, parse_resp for its reader).
void limit_reply_depth(redisReader& reader) noexcept;

/// True (once) when the last hiredis read on this thread failed because limit_reply_depth()
/// refused a reply; the flag is cleared by the call.
bool reply_depth_refused() noexcept;

/// A copy of `reply`. Throws ProtocolError for a reply type fairsem does not speak (RESP3)
/// or an array nested deeper than kMaxReplyDepth.
Reply convert(const redisReply& reply);

}  // namespace fairsem::detail
