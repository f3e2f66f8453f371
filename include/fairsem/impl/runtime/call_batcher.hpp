#pragma once

// The script calls of a Client's threads to one node, carried in batches (ClientOptions::
// batch_calls): while one thread's batch is out, the calls of the others queue, and the next
// batch carries all of them, written in one write on the socket of the thread that sends it and
// answered in order. Redis then reads, parses and answers many calls per system call instead of
// one, which is most of what an unpipelined call costs it. Internal.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <variant>

#include "fairsem/impl/net/connection.hpp"
#include "fairsem/impl/protocol/reply.hpp"
#include "fairsem/impl/protocol/scripts.hpp"

namespace fairsem::detail {

class CallBatcher {
 public:
  /// At most `max_batch` calls a batch (at least 1).
  explicit CallBatcher(std::size_t max_batch);
  CallBatcher(const CallBatcher&) = delete;
  CallBatcher& operator=(const CallBatcher&) = delete;

  /// As conn.eval(script, keys, args), same replies and exceptions: run alone on `conn` when
  /// nobody else calls, else in a batch, sent on the connection of the thread whose turn it
  /// is (this one's, `conn`, or another's). Every call of one batch shares the fate of its
  /// socket: when it fails, each gets the ConnectionError (the script may have run, as for any
  /// lost reply). A call whose reply says it did not run runs again with conn.eval(). `conn`
  /// must have no deadline set; an interrupt it has (an acquire's cancel) takes the call out
  /// while it is queued (TimeoutError, as Connection says of a call not attempted). With
  /// `batched`, sets *batched to whether the call went in one write with others.
  Reply eval(Connection& conn, const Script& script, const Args& keys, const Args& args,
             bool* batched = nullptr);

  /// Calls that went out in a batch of more than one, so far.
  std::uint64_t batched_calls() const noexcept;

 private:
  friend struct CallBatcherPeer;  // tests/support/call_batcher_peer.hpp: its batches, queue, turn
  /// A queued call, on its caller's stack. Its caller sleeps on `wake` until its batch is
  /// back (`done`) or its turn to send has come (`turn`), and nobody else wakes for it: a
  /// finished batch wakes its own callers and the next sender, not every thread queued.
  struct Call {
    enum class Stage {
      waiting,      // queued, or out in a batch
      turn,         // the oldest queued call, nothing out: its caller sends the next batch
      done,         // its batch is back, and with it the outcome
      done_batched  // the same, from a batch that carried other calls too (one write)
    };
    /// Did not run: the caller runs it with conn.eval().
    struct Rerun {};
    using Outcome = std::variant<std::monostate, Reply, std::exception_ptr, Rerun>;

    const Script* script;
    const Args* keys;
    const Args* args;
    Stage stage = Stage::waiting;  // guarded by mu_
    // Set by the sender while the batch is out, read by the caller once it is done: none yet,
    // the reply, the error, or Rerun.
    Outcome outcome{};
    std::condition_variable wake{};

    bool done() const noexcept { return stage == Stage::done || stage == Stage::done_batched; }
  };
  /// How often a queued call whose connection has an interrupt looks whether it was cancelled.
  static constexpr std::chrono::milliseconds kCancelCheck{5};
  /// eval() of a call that goes alone (sending_ set already), on `conn`.
  Reply eval_alone(Connection& conn, const Script& script, const Args& keys, const Args& args);
  /// Takes `me` out of the queue unsent and throws TimeoutError, if it is still queued; `lock`
  /// holds mu_ (released when it throws).
  void withdraw(std::unique_lock<std::mutex>& lock, const Connection& conn, Call& me);
  /// `me` has the turn: sends every queued call (at most max_batch_) on `conn`, marks them done
  /// and passes the turn on. `lock` holds mu_, and holds it again on return.
  void send_turn(std::unique_lock<std::mutex>& lock, Connection& conn, Call& me);
  /// Sends `batch` on `conn` and fills in each call's outcome. Never throws.
  static void send(Connection& conn, Call* const* batch, std::size_t n) noexcept;
  /// With nothing out, gives the turn to send to the oldest queued call, if any, and wakes its
  /// caller. Under mu_ (a queued Call lives until its caller, woken, takes mu_ again).
  void pass_turn();

  const std::size_t max_batch_;
  mutable std::mutex mu_;    // guards everything below, and every queued Call
  std::deque<Call*> queue_;  // not sent yet, oldest first
  bool sending_ = false;     // a batch is out
  std::uint64_t batched_calls_ = 0;
  std::uint64_t batches_ = 0;
};

}  // namespace fairsem::detail
