#pragma once

#include "fairsem/impl/config.hpp"
#include "fairsem/impl/net/hiredis_reply.hpp"

#include <new>
#include <string_view>
#include <utility>
#include <vector>

#include "fairsem/errors.hpp"
#include "fairsem/impl/protocol/replies.hpp"

namespace fairsem::detail {
namespace hiredis_reply_helpers {

using CreateArray = decltype(redisReplyObjectFunctions::createArray);

// hiredis 0.14 passes an array's element count as int, 1.x as size_t: deduced, never called.
template <class Count>
Count count_parameter(void* (*)(const redisReadTask*, Count));
using ElementCount = decltype(count_parameter(CreateArray{}));

FAIRSEM_INLINE thread_local bool depth_refused = false;

/// hiredis's own array constructor, called for every array that is not too deep. Set once,
/// before the first limited reader reads (see limited_functions()).
FAIRSEM_INLINE CreateArray default_create_array = nullptr;

template <class Count>
void* create_array_within_depth(const redisReadTask* task, Count elements) {
  int depth = 1;
  for (const redisReadTask* up = task->parent; up != nullptr; up = up->parent) {
    if (++depth > kMaxReplyDepth) {
      // hiredis frees what it has built of the reply (at most kMaxReplyDepth levels) and
      // reports an out-of-memory error; the flag tells the caller what really happened.
      depth_refused = true;
      return nullptr;
    }
  }
  return default_create_array(task, elements);
}

/// hiredis's default reply functions with the array constructor replaced. `reader` is a
/// reader hiredis created with those defaults.
FAIRSEM_INLINE redisReplyObjectFunctions* limited_functions(const redisReader& reader) {
  static redisReplyObjectFunctions functions = [&reader] {
    redisReplyObjectFunctions copy = *reader.fn;
    default_create_array = copy.createArray;
    copy.createArray = &create_array_within_depth<ElementCount>;
    return copy;
  }();
  return &functions;
}

struct ReaderDeleter {
  void operator()(redisReader* reader) const noexcept { redisReaderFree(reader); }
};

// NOLINTNEXTLINE(misc-no-recursion): bounded by kMaxReplyDepth
FAIRSEM_INLINE Reply convert_at(const redisReply& r, int depth) {
  switch (r.type) {
    case REDIS_REPLY_NIL:
      return Reply::make_nil();
    case REDIS_REPLY_INTEGER:
      return Reply::make_integer(r.integer);
    case REDIS_REPLY_STRING:
      return Reply::make_string(std::string(r.str, r.len));
    case REDIS_REPLY_STATUS:
      return Reply::make_string(std::string(r.str, r.len), Reply::Type::status);
    case REDIS_REPLY_ERROR:
      return Reply::make_string(std::string(r.str, r.len), Reply::Type::error);
    case REDIS_REPLY_ARRAY: {
      if (depth > kMaxReplyDepth) {
        throw ProtocolError(fmt::format(
            "fairsem: a reply nested more than {} arrays deep; fairsem's replies never are",
            kMaxReplyDepth));
      }
      std::vector<Reply> items;
      items.reserve(r.elements);
      for (std::size_t i = 0; i < r.elements; ++i) {
        items.push_back(convert_at(*r.element[i], depth + 1));
      }
      return Reply::make_array(std::move(items));
    }
    default:
      break;
  }
#if HIREDIS_MAJOR >= 1
  // hiredis 1.x can parse RESP3; fairsem never sends HELLO 3, so such a reply means the
  // connection was switched to RESP3 behind its back.
  throw ProtocolError(
      fmt::format("fairsem: unexpected RESP3 reply type {}; fairsem speaks RESP2", r.type));
#else
  throw ProtocolError(fmt::format("fairsem: unknown reply type {}", r.type));
#endif
}

}  // namespace hiredis_reply_helpers

FAIRSEM_INLINE void limit_reply_depth(redisReader& reader) noexcept {
  reader.fn = hiredis_reply_helpers::limited_functions(reader);
}

FAIRSEM_INLINE bool reply_depth_refused() noexcept {
  return std::exchange(hiredis_reply_helpers::depth_refused, false);
}

FAIRSEM_INLINE Reply convert(const redisReply& reply) {
  return hiredis_reply_helpers::convert_at(reply, 1);
}

FAIRSEM_INLINE std::vector<Reply> parse_resp(std::string_view bytes) {
  std::unique_ptr<redisReader, hiredis_reply_helpers::ReaderDeleter> reader(redisReaderCreate());
  if (!reader) throw std::bad_alloc();
  limit_reply_depth(*reader);
  if (redisReaderFeed(reader.get(), bytes.data(), bytes.size()) != REDIS_OK) {
    throw std::bad_alloc();  // feeding fails only when the buffer cannot grow
  }
  std::vector<Reply> replies;
  for (;;) {
    void* raw = nullptr;
    // hiredis consumes a lone type byte before it finds the line unfinished, so "unread bytes"
    // must be looked at before each call, not only after the last.
    const bool unread = reader->pos < reader->len;
    if (redisReaderGetReply(reader.get(), &raw) != REDIS_OK) {
      if (reply_depth_refused()) {
        throw ProtocolError(fmt::format(
            "fairsem: protocol error: a reply nested more than {} arrays deep", kMaxReplyDepth));
      }
      if (reader->err == REDIS_ERR_OOM) throw std::bad_alloc();
      throw ProtocolError(fmt::format("fairsem: protocol error: {}", reader->errstr));
    }
    if (raw == nullptr) {
      if (unread) throw ProtocolError("fairsem: protocol error: the last reply is incomplete");
      break;
    }
    const ReplyPtr reply(static_cast<redisReply*>(raw));
    replies.push_back(convert(*reply));
  }
  // Unread bytes, or an array still being filled, are a reply that never ended.
  if (reader->pos < reader->len || reader->reply != nullptr) {
    throw ProtocolError("fairsem: protocol error: the last reply is incomplete");
  }
  return replies;
}

}  // namespace fairsem::detail
