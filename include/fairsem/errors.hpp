#pragma once

// Header-only mode: the first fairsem header a translation unit includes brings the whole
// implementation at its end (fairsem/impl/header_only.hpp), once the headers it includes are
// complete. See fairsem/impl/config.hpp.
#if defined(FAIRSEM_HEADER_ONLY) && !defined(FAIRSEM_IMPL_PENDING)
#define FAIRSEM_IMPL_PENDING
#define FAIRSEM_IMPL_BY_ERRORS_HPP
#endif

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace fairsem {

/// Root of every exception fairsem throws. Messages name what failed and where (the
/// semaphore, the server endpoint); they never contain a password.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
  ~Error() override;
};

/// The server could not be reached, or the connection broke while a command was in flight.
/// A command interrupted this way may or may not have run on the server.
class ConnectionError : public Error {
 public:
  using Error::Error;
  ~ConnectionError() override;
};

/// Connecting, or waiting for a reply, took longer than the configured timeout. The
/// connection is dropped and re-established by the next command.
class TimeoutError : public ConnectionError {
 public:
  using ConnectionError::ConnectionError;
  ~TimeoutError() override;
};

/// The server refused the credentials (AUTH failed). Retrying does not help, so
/// reconnection gives up at once.
class AuthError : public ConnectionError {
 public:
  using ConnectionError::ConnectionError;
  ~AuthError() override;
};

/// The server answered a command with an error reply. `server_message()` is the server's
/// text unchanged (e.g. "WRONGTYPE Operation against a key holding the wrong kind of value").
class ReplyError : public Error {
 public:
  ReplyError(const std::string& message, std::string server_message)
      : Error(message), server_message_(std::move(server_message)) {}
  ~ReplyError() override;

  const std::string& server_message() const noexcept { return server_message_; }

 private:
  std::string server_message_;
};

/// The server's reply did not have the shape fairsem expected (a protocol or version mismatch).
class ProtocolError : public Error {
 public:
  using Error::Error;
  ~ProtocolError() override;
};

/// The semaphore's keys in Redis are in a later data model than this client reads and writes:
/// a newer fairsem wrote them (a rolling upgrade that reached the data before this process).
/// Every operation on that semaphore is refused, with nothing written, until this client is
/// upgraded; the message names both data models and, when stored, the version that wrote them.
class DataModelError : public ProtocolError {
 public:
  DataModelError(const std::string& message, std::string stored_model, long long supported_model,
                 std::string written_by)
      : ProtocolError(message),
        stored_model_(std::move(stored_model)),
        supported_model_(supported_model),
        written_by_(std::move(written_by)) {}
  ~DataModelError() override;

  /// meta's `model` as stored; the data model this client reads and writes; the fairsem
  /// version that wrote the data (empty when not stored).
  const std::string& stored_model() const noexcept { return stored_model_; }
  long long supported_model() const noexcept { return supported_model_; }
  const std::string& written_by() const noexcept { return written_by_; }

 private:
  std::string stored_model_;
  long long supported_model_;
  std::string written_by_;
};

/// A semaphore was opened with a limit other than the one stored in Redis by its first user.
class LimitMismatchError : public Error {
 public:
  LimitMismatchError(const std::string& message, long long stored_limit, long long requested_limit)
      : Error(message), stored_limit_(stored_limit), requested_limit_(requested_limit) {}
  ~LimitMismatchError() override;

  long long stored_limit() const noexcept { return stored_limit_; }
  long long requested_limit() const noexcept { return requested_limit_; }

 private:
  long long stored_limit_;
  long long requested_limit_;
};

/// A queued acquire ended because its request was evicted (FairSemaphore::evict,
/// SemaphoreAdmin::evict, `fairsem evict`): an operator removed it from the queue on purpose.
class EvictedError : public Error {
 public:
  EvictedError(const std::string& message, std::string permit_id)
      : Error(message), permit_id_(std::move(permit_id)) {}
  ~EvictedError() override;

  const std::string& permit_id() const noexcept { return permit_id_; }

 private:
  std::string permit_id_;
};

/// A queued request can never be granted: while it waited, a resize left the semaphore's limit
/// below the units it asks for. Its queue entry was removed (the requests behind it moved up).
class RequestTooLargeError : public Error {
 public:
  RequestTooLargeError(const std::string& message, std::string permit_id, long long units)
      : Error(message), permit_id_(std::move(permit_id)), units_(units) {}
  ~RequestTooLargeError() override;

  const std::string& permit_id() const noexcept { return permit_id_; }
  long long units() const noexcept { return units_; }

 private:
  std::string permit_id_;
  long long units_;
};

/// An acquire that would have waited behind SemaphoreOptions::max_waiters or more queued
/// requests (of every client) was refused at once; nothing was written. Overload, told at once
/// instead of an unbounded wait: the caller may shed the work or try again later.
class QueueFullError : public Error {
 public:
  QueueFullError(const std::string& message, long long waiting, long long max_waiters)
      : Error(message), waiting_(waiting), max_waiters_(max_waiters) {}
  ~QueueFullError() override;

  /// The requests queued when it was refused, and the bound it was refused by.
  long long waiting() const noexcept { return waiting_; }
  long long max_waiters() const noexcept { return max_waiters_; }

 private:
  long long waiting_;
  long long max_waiters_;
};

/// A permit was granted but fewer replicas than SemaphoreOptions::min_replicas acknowledged
/// it within replica_timeout, so a failover could lose it. The acquire reports failure: the
/// permit was released again (a caller-chosen permit_id is left to expire with its lease).
class ReplicationError : public Error {
 public:
  ReplicationError(const std::string& message, long long acknowledged, long long wanted)
      : Error(message), acknowledged_(acknowledged), wanted_(wanted) {}
  ~ReplicationError() override;

  /// Replicas that acknowledged in time, and how many were asked for.
  long long acknowledged() const noexcept { return acknowledged_; }
  long long wanted() const noexcept { return wanted_; }

 private:
  long long acknowledged_;
  long long wanted_;
};

/// An asynchronous acquire ended without a permit because it was cancelled: by
/// AcquireRequest::cancel, or because its FairSemaphore was destroyed (or assigned to) while it
/// waited. Its queue entry was removed (a permit granted to it in the last instant passed on).
class CancelledError : public Error {
 public:
  using Error::Error;
  ~CancelledError() override;
};

/// A process made by fork() used a Client, semaphore or permit its parent opened: a child has
/// neither its parent's threads nor connections of its own. Nothing was sent. Open a Client in
/// the child (see docs/api.md, "fork()").
class ForkedProcessError : public Error {
 public:
  using Error::Error;
  ~ForkedProcessError() override;
};

/// A moved-from handle (FairSemaphore, SemaphoreAdmin, Client, SemaphoreLock) was used: moving
/// one hands its semaphore or connections to the new object and leaves nothing behind. Nothing
/// was sent. A moved-from handle may be destroyed or assigned to; see each class for the few
/// calls it still answers (name() is empty).
class UsedAfterMoveError : public Error {
 public:
  using Error::Error;
  ~UsedAfterMoveError() override;
};

/// An argument or option was invalid; nothing was sent to Redis.
class InvalidArgument : public Error {
 public:
  using Error::Error;
  ~InvalidArgument() override;
};

/// `text` as a message or a terminal may show it: printable ASCII as is, every other byte
/// (control bytes, DEL, anything above 0x7f) as \xNN. fairsem's messages quote names, ids and
/// server replies this way; use it for any text that came from Redis or from a user.
std::string printable(std::string_view text);

}  // namespace fairsem

#if defined(FAIRSEM_HEADER_ONLY) && defined(FAIRSEM_IMPL_BY_ERRORS_HPP)
#include "fairsem/impl/header_only.hpp"
#endif
