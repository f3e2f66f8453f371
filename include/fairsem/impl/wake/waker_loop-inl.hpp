#pragma once

// Waker (waker.hpp), its thread: a BRPOP per lane sent, the lanes' sockets and the poke pipe
// waited on together (poll(2)), each reply read as it comes and handed on; a lane whose BRPOP
// fails pauses alone, and one idle for the idle timeout closes. The subscriptions are in
// waker-inl.hpp.

#include "fairsem/impl/config.hpp"
#include "fairsem/impl/threads/thread_reaper.hpp"
#include "fairsem/impl/wake/waker.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <string>
#include <utility>
#include <vector>

#include "fairsem/errors.hpp"
#include "fairsem/impl/protocol/scripts.hpp"

namespace fairsem::detail {

FAIRSEM_INLINE void Waker::run() {
  mark_as_fairsems_thread();
  const std::weak_ptr<Waker> weak = weak_from_this();
  std::vector<Lane*> due;
  std::vector<Lane*> under_way;
  std::vector<std::unique_ptr<Connection>> closing;
  for (;;) {
    auto next = std::chrono::steady_clock::time_point::max();
    bool go_on = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      go_on = plan(due, next, closing);
    }
    closing.clear();  // the connections of lanes closed (or of all, stopping), without the lock
    if (!go_on) return;
    // Lanes are erased by this thread only: these pointers stay good without the lock.
    for (Lane* lane : due) {
      send(*lane);
      // Failed without a pause: it listens again at once.
      if (!lane->sent) next = std::min(next, lane->resume_at);
    }
    under_way.clear();
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& entry : lanes_) {
        if (entry.second.sent) under_way.push_back(&entry.second);
      }
    }
    wait(under_way, next);
    // The waiters hear of what came before the next round; a hook that destroyed this Waker
    // (its runtime's last reference dropped on this thread) ends the thread here.
    if (!call_due_hooks(weak)) return;
  }
}

FAIRSEM_INLINE bool Waker::plan(std::vector<Lane*>& due,
                                std::chrono::steady_clock::time_point& next,
                                std::vector<std::unique_ptr<Connection>>& closing) {
  due.clear();
  if (stop_) {
    for (auto& entry : lanes_) {
      if (entry.second.conn) closing.push_back(std::move(entry.second.conn));
    }
    return false;
  }
  const auto now = std::chrono::steady_clock::now();
  forget_unclaimed(now);
  for (auto it = lanes_.begin(); it != lanes_.end();) {
    Lane& lane = it->second;
    if (lane.sent) {
      next = std::min(next, lane.reply_by);
    } else if (lane.listed == 0) {
      // Nobody has listened through it for the idle timeout: its connection closes. A
      // semaphore per tenant on a Cluster must not keep a connection per slot it once waited on.
      const auto close_at = lane.idle_since + idle_timeout_;
      if (now >= close_at) {
        if (lane.conn) closing.push_back(std::move(lane.conn));
        it = lanes_.erase(it);
        continue;
      }
      next = std::min(next, close_at);
    } else if (now < lane.resume_at) {
      next = std::min(next, lane.resume_at);
    } else {
      collect_keys(lane);
      lane.listening = true;  // from here on, a subscription through another inbox kicks
      due.push_back(&lane);
    }
    ++it;
  }
  if (lanes_.empty()) {
    // Idle: the thread ends (it is joined by the next subscription, or by stop()).
    thread_.retire();
    return false;
  }
  return true;
}

FAIRSEM_INLINE void Waker::collect_keys(Lane& lane) {
  lane.keys.clear();
  lane.keys.push_back(lane.kick_key);
  lane.in_brpop.clear();
  const auto now = std::chrono::steady_clock::now();
  for (auto it = lane.inboxes.begin(); it != lane.inboxes.end();) {
    if (it->second.listed == 0 && now - it->second.idle_since >= waker_helpers::kInboxLinger) {
      it = lane.inboxes.erase(it);
      continue;
    }
    lane.keys.push_back(it->first);
    lane.in_brpop.insert(it->first);
    ++it;
  }
}

FAIRSEM_INLINE void Waker::send(Lane& lane) {
  try {
    if (!lane.conn) lane.conn = std::make_unique<Connection>(options_, discovery_, lane.slot);
    if (lane.conn->broken()) lane.conn->reconnect();
  } catch (const std::exception&) {
    // Unreachable (or out of memory): tried again after a pause; the waiters poll meanwhile.
    failed(lane, false);
    return;
  }
  Args argv;
  argv.reserve(lane.keys.size() + 2);
  argv.emplace_back("BRPOP");
  for (const std::string& k : lane.keys) argv.emplace_back(k);
  const std::string timeout = std::to_string(waker_helpers::kListenSeconds.count());
  argv.emplace_back(timeout);
  try {
    // On the socket as it is (no reconnect, no redirection): the reply is read when it comes.
    lane.conn->send_in_place(argv);
  } catch (const std::exception&) {
    failed(lane, true);
    return;
  }
  lane.sent = true;
  lane.reply_by =
      std::chrono::steady_clock::now() + waker_helpers::kListenSeconds + options_.command_timeout;
}

FAIRSEM_INLINE void Waker::wait(const std::vector<Lane*>& under_way,
                                std::chrono::steady_clock::time_point next) {
  std::vector<pollfd> fds;
  fds.reserve(under_way.size() + 1);
  fds.push_back(pollfd{poke_[0], POLLIN, 0});
  for (const Lane* lane : under_way) {
    fds.push_back(pollfd{lane->conn->socket_fd(), POLLIN, 0});
    next = std::min(next, lane->reply_by);
  }
  int timeout_ms = -1;
  if (next != std::chrono::steady_clock::time_point::max()) {
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(next - std::chrono::steady_clock::now());
    timeout_ms = static_cast<int>(std::clamp<long long>(left.count(), 0, INT_MAX));
  }
  // An error (EINTR, or ENOMEM) is a round with nothing read: the lanes are looked at again.
  if (::poll(fds.data(), fds.size(), timeout_ms) > 0) {
    if (fds[0].revents != 0) {
      std::array<char, 64> drained{};
      while (::read(poke_[0], drained.data(), drained.size()) > 0) {
      }
    }
    for (std::size_t i = 0; i < under_way.size(); ++i) {
      if (fds[i + 1].revents != 0) receive(*under_way[i]);
    }
  }
  const auto now = std::chrono::steady_clock::now();
  for (Lane* lane : under_way) {
    // No reply within the BRPOP's own timeout and the command timeout: the node hangs, or the
    // reply was lost on the way. Whatever it popped is lost with it.
    if (lane->sent && now >= lane->reply_by) failed(*lane, true);
  }
}

FAIRSEM_INLINE void Waker::receive(Lane& lane) {
  std::optional<Reply> reply;
  try {
    reply = lane.conn->read_available("BRPOP");
  } catch (const std::exception&) {
    failed(lane, true);
    return;
  }
  if (!reply) return;  // more to come
  lane.sent = false;
  lane.failed_before = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    lane.listening = false;
  }
  handle(lane, std::move(*reply));
}

FAIRSEM_INLINE void Waker::failed(Lane& lane, bool cut) {
  // Made again (or reconnected) for the next BRPOP; the waiters poll meanwhile.
  lane.conn.reset();
  lane.sent = false;
  bool stopping = false;
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    lane.listening = false;
    stopping = stop_;
    // Also for the waiters not listening now (between a call's reply and their listening):
    // list() tells them.
    if (cut) lane.cut_at = now;
  }
  // A BRPOP cut off may have popped a wake-up whose reply is lost: its waiter (whichever it is)
  // polls at once.
  if (cut && !stopping) {
    notify_lane(lane.slot, [now](WakeSubscription& sub) {
      sub.interrupted_ = true;
      sub.interrupted_at_ = now;
    });
  }
  // A BRPOP that was listening, cut off (its connection killed or reset), listens again at once
  // on a new connection: the waiters' polls just now found them queued, and the wake-up of a
  // promotion pushed during a pause would reach its waiter only after it (an acquire granted
  // that late enters after requests queued behind it). A failure that follows a failure (a
  // server down) pauses.
  const bool pause = !cut || lane.failed_before;
  lane.failed_before = true;
  lane.resume_at =
      pause ? now + waker_helpers::kRetryPause : std::chrono::steady_clock::time_point();
}

FAIRSEM_INLINE void Waker::handle(Lane& lane, Reply reply) {
  if (reply.is_error()) {
    const std::string& message = reply.str;
    // Not this node's to answer (MOVED, ASK; a master turned replica: READONLY, UNBLOCKED): a
    // kick through the routed path follows the redirection, and the next BRPOP goes there.
    for (const char* redirect : {"MOVED ", "ASK ", "READONLY", "UNBLOCKED"}) {
      if (message.rfind(redirect, 0) == 0) {
        try {
          lane.conn->eval(
              scripts::kick, {lane.kick_key},
              {std::to_string(std::chrono::milliseconds(waker_helpers::kKickLifetime).count())});
        } catch (const std::exception&) {
          failed(lane, false);
        }
        return;
      }
    }
    // Refused (an ACL without BRPOP, a slot in migration, a renamed command): each waiter
    // hears of it and polls, as it does when no wake-up comes; the lane pauses.
    notify_lane(lane.slot, [&](WakeSubscription& sub) { sub.error_ = message; });
    lane.resume_at = std::chrono::steady_clock::now() + waker_helpers::kRetryPause;
    return;
  }
  if (reply.is_nil() || reply.elements.size() != 2) return;  // timed out
  if (reply.elements[0].str == lane.kick_key) return;        // a new inbox: the next BRPOP has it
  deliver(std::move(reply));
}

}  // namespace fairsem::detail
