#pragma once

#include "fairsem/impl/config.hpp"
#include "fairsem/impl/runtime/call_batcher.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "fairsem/errors.hpp"
#include "fairsem/impl/scope_exit.hpp"
#include "fairsem/impl/text.hpp"

namespace fairsem::detail {

// A reply moved into a call's outcome cannot leave it valueless, which send() would then take
// for an outcome set.
static_assert(std::is_nothrow_move_constructible_v<Reply>);

namespace call_batcher_helpers {

/// A new exception like the one `error` holds, of the same type and message, for the kinds a
/// socket's failure throws (ConnectionError and its subclasses, ProtocolError); any other is
/// shared as it is.
FAIRSEM_INLINE std::exception_ptr copy_of(const std::exception_ptr& error) noexcept {
  try {
    try {
      std::rethrow_exception(error);
    } catch (const AuthError& e) {
      return std::make_exception_ptr(AuthError(e.what()));
    } catch (const TimeoutError& e) {
      return std::make_exception_ptr(TimeoutError(e.what()));
    } catch (const ConnectionError& e) {
      return std::make_exception_ptr(ConnectionError(e.what()));
    } catch (const ProtocolError& e) {  // a reply the reader could not parse
      return std::make_exception_ptr(ProtocolError(e.what()));
    }
  } catch (...) {
    // Another kind, or no memory for the copy's message.
  }
  return error;
}

}  // namespace call_batcher_helpers

FAIRSEM_INLINE CallBatcher::CallBatcher(std::size_t max_batch)
    : max_batch_(std::max<std::size_t>(max_batch, 1)) {}

FAIRSEM_INLINE Reply CallBatcher::eval(Connection& conn, const Script& script, const Args& keys,
                                       const Args& args, bool* batched) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!sending_ && queue_.empty()) {
    // Nobody else calls: this call goes alone, as without batching, while the next ones queue.
    if (batched != nullptr) *batched = false;
    sending_ = true;
    lock.unlock();
    return eval_alone(conn, script, keys, args);
  }
  Call me{&script, &keys, &args};
  queue_.push_back(&me);
  // A cancel (the connection's interrupt) takes a call out while it is still queued; once sent,
  // it waits for its batch, which the sender's command timeout bounds.
  const bool interruptible = conn.interrupt() != nullptr;
  while (!me.done()) {
    if (interruptible && conn.deadline_passed()) withdraw(lock, conn, me);
    if (me.stage == Call::Stage::turn) {
      send_turn(lock, conn, me);
    } else if (interruptible) {
      me.wake.wait_for(lock, kCancelCheck);
    } else {
      me.wake.wait(lock);
    }
  }
  lock.unlock();
  if (batched != nullptr) *batched = me.stage == Call::Stage::done_batched;
  if (const auto* error = std::get_if<std::exception_ptr>(&me.outcome)) {
    std::rethrow_exception(*error);
  }
  if (std::holds_alternative<Call::Rerun>(me.outcome)) return conn.eval(script, keys, args);
  return std::move(std::get<Reply>(me.outcome));
}

FAIRSEM_INLINE Reply CallBatcher::eval_alone(Connection& conn, const Script& script,
                                             const Args& keys, const Args& args) {
  const ScopeExit done([this] {
    std::lock_guard<std::mutex> done_lock(mu_);
    sending_ = false;
    pass_turn();
  });
  return conn.eval(script, keys, args);
}

FAIRSEM_INLINE void CallBatcher::withdraw(std::unique_lock<std::mutex>& lock,
                                          const Connection& conn, Call& me) {
  const auto it = std::find(queue_.begin(), queue_.end(), &me);
  if (it == queue_.end()) return;  // sent already
  queue_.erase(it);
  if (me.stage == Call::Stage::turn) pass_turn();  // the next call's caller sends instead
  lock.unlock();
  throw TimeoutError(
      fmt::format("fairsem: script {} to {} not attempted: the request it was for was cancelled",
                  me.script->name, conn.endpoint()));
}

FAIRSEM_INLINE void CallBatcher::send_turn(std::unique_lock<std::mutex>& lock, Connection& conn,
                                           Call& me) {
  // Everything queued goes, oldest first (`me` is the oldest), on this caller's connection.
  me.stage = Call::Stage::waiting;  // for the batch it sends
  sending_ = true;
  std::vector<Call*> batch;
  const std::size_t n = std::min(queue_.size(), max_batch_);
  try {
    batch.assign(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
  } catch (...) {
    // Out of memory: this call leaves unsent; the others queued go with the next turn.
    queue_.erase(std::find(queue_.begin(), queue_.end(), &me));
    sending_ = false;
    pass_turn();
    throw;
  }
  queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
  lock.unlock();
  {
    // The batch carries other threads' calls: a cancel of this one must not cut it short.
    const std::atomic<bool>* interrupt = conn.interrupt();
    conn.set_interrupt(nullptr);
    send(conn, batch.data(), batch.size());
    conn.set_interrupt(interrupt);
  }
  lock.lock();
  if (batch.size() > 1) {
    batched_calls_ += batch.size();
    ++batches_;
  }
  for (Call* call : batch) {
    call->stage = batch.size() > 1 ? Call::Stage::done_batched : Call::Stage::done;
    if (call != &me) call->wake.notify_one();
  }
  sending_ = false;
  pass_turn();
}

FAIRSEM_INLINE void CallBatcher::pass_turn() {
  if (sending_ || queue_.empty() || queue_.front()->stage == Call::Stage::turn) return;
  queue_.front()->stage = Call::Stage::turn;
  queue_.front()->wake.notify_one();
}

FAIRSEM_INLINE void CallBatcher::send(Connection& conn, Call* const* batch,
                                      std::size_t n) noexcept {
  try {
    // As eval() would send each first (a call on a server without functions, or whose ACL
    // refuses them, comes back "did not run" and runs again with EVALSHA through eval()).
    std::vector<std::string> numkeys;
    std::vector<Args> commands;
    numkeys.reserve(n);  // never reallocated: the commands point into it
    commands.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      numkeys.push_back(std::to_string(batch[i]->keys->size()));
      commands.push_back(
          conn.script_command(*batch[i]->script, *batch[i]->keys, *batch[i]->args, numkeys.back()));
    }
    std::vector<Reply> replies = conn.pipeline(commands);
    for (std::size_t i = 0; i < n; ++i) {
      Call& call = *batch[i];
      Reply& reply = replies[i];
      if (!reply.is_error()) {
        call.outcome = std::move(reply);
      } else if (script_did_not_run(reply.str)) {
        call.outcome = Call::Rerun{};
      } else {
        call.outcome = std::make_exception_ptr(
            ReplyError(fmt::format("fairsem: script {} on {} failed: {}", call.script->name,
                                   conn.endpoint(), reply.str),
                       reply.str));
      }
    }
  } catch (...) {
    // The socket failed (every reply still to come is lost with it), or no memory: each call
    // of the batch fails as a call alone would have, with an exception of its own (one object
    // thrown in several threads at once would be read in one while another frees it).
    const std::exception_ptr error = std::current_exception();
    for (std::size_t i = 0; i < n; ++i) {
      if (std::holds_alternative<std::monostate>(batch[i]->outcome)) {
        // A whole outcome moved in: setting the alternative alone (emplace) may throw.
        batch[i]->outcome = Call::Outcome(std::in_place_type<std::exception_ptr>,
                                          call_batcher_helpers::copy_of(error));
      }
    }
  }
}

FAIRSEM_INLINE std::uint64_t CallBatcher::batched_calls() const noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  return batched_calls_;
}

}  // namespace fairsem::detail
