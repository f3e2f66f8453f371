#pragma once

#include "fairsem/impl/config.hpp"
#include "fairsem/impl/thread_reaper.hpp"
#include "fairsem/impl/waker.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <string_view>
#include <utility>
#include <vector>

#include "fairsem/errors.hpp"
#include "fairsem/impl/scripts.hpp"

namespace fairsem::detail {

namespace waker_helpers {

// How long one BRPOP waits. A new wake list is added at once by a kick; this bounds how long a
// lost kick (or a wake list no longer waited for) can go unnoticed.
inline constexpr auto kListenSeconds = std::chrono::seconds(1);
// How long an unpopped kick stays (only when the client is gone before its BRPOP popped it).
inline constexpr auto kKickLifetime = std::chrono::seconds(10);
// How long a semaphore's inbox stays in the BRPOP after its last waiter: a semaphore whose
// queue empties and fills again now and then needs no kick each time.
inline constexpr auto kInboxLinger = std::chrono::seconds(10);
// What names a semaphore's inbox among its wake lists (common.lua's INBOX).
inline constexpr std::string_view kInboxMark = "{inbox}";
// How long a wake-up popped before its waiter listened is kept for it (the waiter subscribes
// right after its call's reply; it polls anyway within one poll interval), and how many are.
inline constexpr auto kUnclaimedLifetime = std::chrono::seconds(5);
inline constexpr std::size_t kMaxUnclaimed = 10'000;
// After a refused BRPOP or a failed reconnect: waiters poll meanwhile.
inline constexpr auto kRetryPause = std::chrono::milliseconds(200);

}  // namespace waker_helpers

// --- Waker ----------------------------------------------------------------------------------

FAIRSEM_INLINE Waker::Waker(ConnectionOptions options, std::shared_ptr<Discovery> discovery,
                            int slot, std::string kick_key, std::string client,
                            std::chrono::milliseconds idle_timeout)
    : options_(std::move(options)),
      discovery_(std::move(discovery)),
      slot_(slot),
      kick_key_(std::move(kick_key)),
      client_(std::move(client)),
      inbox_suffix_(std::string(waker_helpers::kInboxMark) + client_),
      idle_timeout_(idle_timeout) {}

FAIRSEM_INLINE std::string Waker::inbox(const std::string& wake_prefix) const {
  return wake_prefix + inbox_suffix_;
}

FAIRSEM_INLINE Waker::~Waker() { stop(); }

FAIRSEM_INLINE void Waker::stop() noexcept {
  std::thread thread;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    thread = std::move(thread_);
    // Ends a BRPOP in progress at once: its read fails, and the thread sees stop_. Under the
    // lock, so the socket is the one the BRPOP waits on, never one closed and reused meanwhile.
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
  }
  cv_.notify_all();
  // Stopped from its own thread (a wake-up's hook dropped the last reference to the runtime):
  // that thread is parked rather than joining itself.
  join_or_park(thread);
}

FAIRSEM_INLINE bool Waker::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return thread_.joinable() && !retired_;
}

FAIRSEM_INLINE std::unique_ptr<WakeSubscription> Waker::subscribe(const std::string& wake_prefix,
                                                                  const std::string& id,
                                                                  Connection& conn,
                                                                  std::function<void()> hook) {
  std::unique_ptr<WakeSubscription> sub(new WakeSubscription(shared_from_this(), wake_prefix + id,
                                                             inbox(wake_prefix), std::move(hook)));
  list(*sub, conn);
  return sub;
}

FAIRSEM_INLINE void Waker::list(WakeSubscription& sub, Connection& conn) {
  bool kick = false;
  bool hook_due = false;
  bool handed = false;
  std::thread retired;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (retired_) {
      // Ended idle: it has let go of the lock for good, and closes its connection; joined
      // after the lock, which the other waiters need meanwhile.
      retired = std::move(thread_);
      retired_ = false;
    }
    if (!thread_.joinable() && !stop_) thread_ = std::thread(&Waker::run, this);
    const auto it = subs_.emplace(sub.key_, &sub);
    sub.listed_ = true;
    ++inboxes_[sub.inbox_].listed;
    // Its promotion may have been popped already: between the reply that queued it and this
    // call, or since the wake-up that ended its listening.
    const auto early = unclaimed_.find(sub.key_);
    if (early != unclaimed_.end()) {
      std::string message = std::move(early->second.message);
      unclaimed_.erase(early);
      hook_due = hand_over(it, std::move(message));
      handed = true;
    } else {
      // A BRPOP under way that lacks this inbox: end it with a push to the kick list, its
      // first key. Otherwise the BRPOP under way has it, or the thread's next one will.
      kick = listening_ && in_brpop_.count(sub.inbox_) == 0;
      // Once: the subscriptions through this inbox that come before the next BRPOP need none.
      if (kick) in_brpop_.insert(sub.inbox_);
    }
  }
  cv_.notify_all();
  if (retired.joinable()) retired.join();
  if (handed) {
    if (hook_due) {
      try {
        sub.hook_();
      } catch (...) {
        // As on the waker's thread: that waiter learns of it at its next poll.
      }
    }
    return;
  }
  if (!kick) return;
  try {
    conn.eval(scripts::kick, {kick_key_},
              {std::to_string(std::chrono::milliseconds(waker_helpers::kKickLifetime).count())});
  } catch (const Error&) {
    // The next BRPOP, at most kListenSeconds away, has the key; the waiter polls anyway.
  }
}

FAIRSEM_INLINE void Waker::unsubscribe(const WakeSubscription& sub) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  const auto range = subs_.equal_range(sub.key_);
  for (auto it = range.first; it != range.second; ++it) {
    if (it->second == &sub) {
      unlist(it);
      return;
    }
  }
}

FAIRSEM_INLINE void Waker::unlist(
    std::unordered_multimap<std::string, WakeSubscription*>::iterator it) {
  WakeSubscription& sub = *it->second;
  subs_.erase(it);
  sub.listed_ = false;
  const auto inbox = inboxes_.find(sub.inbox_);
  if (inbox != inboxes_.end() && --inbox->second.listed == 0) {
    inbox->second.idle_since = std::chrono::steady_clock::now();
  }
}

FAIRSEM_INLINE void Waker::collect_keys(std::vector<std::string>& keys) {
  keys.clear();
  keys.push_back(kick_key_);
  in_brpop_.clear();
  const auto now = std::chrono::steady_clock::now();
  forget_unclaimed(now);
  for (auto it = inboxes_.begin(); it != inboxes_.end();) {
    if (it->second.listed == 0 && now - it->second.idle_since >= waker_helpers::kInboxLinger) {
      it = inboxes_.erase(it);
      continue;
    }
    keys.push_back(it->first);
    in_brpop_.insert(it->first);
    ++it;
  }
}

FAIRSEM_INLINE void Waker::report(const std::string& error) {
  notify_every([&](WakeSubscription& sub) { sub.error_ = error; });
}

FAIRSEM_INLINE void Waker::interrupted() {
  notify_every([](WakeSubscription& sub) { sub.interrupted_ = true; });
}

FAIRSEM_INLINE void Waker::notify_every(const std::function<void(WakeSubscription&)>& mark) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& entry : subs_) {
      mark(*entry.second);
      entry.second->cv_.notify_all();
      if (entry.second->hook_) due_hooks_.push_back(entry.second->hook_);
    }
  }
}

FAIRSEM_INLINE void Waker::pause() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, waker_helpers::kRetryPause, [&] { return stop_; });
}

FAIRSEM_INLINE bool Waker::call_due_hooks(const std::weak_ptr<Waker>& weak) {
  if (due_hooks_.empty()) return true;
  std::vector<std::function<void()>> hooks = std::move(due_hooks_);
  due_hooks_.clear();
  // A hook may drop the last reference to the runtime, and so to this Waker: kept alive until
  // the hooks are done, and then, if that was the last reference, left alone.
  std::shared_ptr<Waker> self = weak.lock();
  if (!self) return false;  // being destroyed on another thread, which joins this one
  for (const auto& hook : hooks) {
    try {
      hook();
    } catch (...) {
      // Out of memory or threads to post the step: that waiter learns of it at its next poll.
    }
  }
  hooks.clear();
  self.reset();
  return !weak.expired();
}

FAIRSEM_INLINE void Waker::run() {
  mark_as_fairsems_thread();
  const std::weak_ptr<Waker> weak = weak_from_this();
  std::unique_ptr<Connection> conn;
  std::vector<std::string> keys;
  bool failed_before = false;  // the last BRPOP (or connect) failed too
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      listening_ = false;
      if (!cv_.wait_for(lock, idle_timeout_, [&] { return stop_ || !subs_.empty(); })) {
        // Nobody has listened for the idle timeout: the thread ends and, after the lock, its
        // connection closes. A semaphore per tenant on a Cluster must not keep a thread and a
        // connection per slot it once waited on.
        retired_ = true;
        return;
      }
      if (stop_) return;
      collect_keys(keys);
      listening_ = true;  // from here on, a subscription through another inbox kicks
    }
    bool pause_after = false;
    try {
      if (!conn) conn = std::make_unique<Connection>(options_, discovery_, slot_);
      pause_after = listen(*conn, keys);
      failed_before = false;
    } catch (const std::exception&) {
      // Unreachable or broken (or out of memory): made again (or reconnected) for the next
      // BRPOP; the waiters poll meanwhile. A BRPOP cut off may have popped a wake-up whose
      // reply is lost: its waiter (whichever it is) polls at once. Nothing escapes the thread.
      conn.reset();
      const bool cut = std::exchange(cut_, false);
      if (cut) {
        bool stopping = false;
        {
          std::lock_guard<std::mutex> lock(mu_);
          stopping = stop_;
        }
        if (!stopping) interrupted();
      }
      // A BRPOP that was listening, cut off (its connection killed or reset), listens again at
      // once on a new connection: the waiters' polls just now found them queued, and the
      // wake-up of a promotion pushed during a pause would reach its waiter only after it (an
      // acquire granted that late enters after requests queued behind it). A failure that
      // follows a failure (a server down) pauses.
      pause_after = !cut || failed_before;
      failed_before = true;
    }
    // The waiters hear of what came before the pause; a hook that destroyed this Waker (its
    // runtime's last reference dropped on this thread) ends the thread here.
    if (!call_due_hooks(weak)) return;
    if (pause_after) pause();
  }
}

FAIRSEM_INLINE bool Waker::listen(Connection& conn, const std::vector<std::string>& keys) {
  Args argv;
  argv.reserve(keys.size() + 2);
  argv.emplace_back("BRPOP");
  for (const std::string& k : keys) argv.emplace_back(k);
  const std::string timeout = std::to_string(waker_helpers::kListenSeconds.count());
  argv.emplace_back(timeout);
  if (conn.broken()) conn.reconnect();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return false;  // stop() came before the socket was published
    fd_ = conn.socket_fd();
  }
  Reply reply;
  try {
    // On the socket as it is (no reconnect, no redirection), so that stop() may shut it down.
    reply = conn.command_in_place(argv, waker_helpers::kListenSeconds + options_.command_timeout);
  } catch (...) {
    cut_ = true;
    std::lock_guard<std::mutex> lock(mu_);
    fd_ = -1;
    throw;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    fd_ = -1;  // from here on the connection may reconnect or move to another node
  }
  if (reply.is_error()) {
    const std::string& message = reply.str;
    // Not this node's to answer (MOVED, ASK; a master turned replica: READONLY, UNBLOCKED): a
    // kick through the routed path follows the redirection, and the next BRPOP goes there.
    for (const char* redirect : {"MOVED ", "ASK ", "READONLY", "UNBLOCKED"}) {
      if (message.rfind(redirect, 0) == 0) {
        conn.eval(
            scripts::kick, {kick_key_},
            {std::to_string(std::chrono::milliseconds(waker_helpers::kKickLifetime).count())});
        return false;
      }
    }
    // Refused (an ACL without BRPOP, a slot in migration, a renamed command): each waiter
    // hears of it and polls, as it does when no wake-up comes.
    report(message);
    return true;
  }
  if (reply.is_nil() || reply.elements.size() != 2) return false;  // timed out
  if (reply.elements[0].str == kick_key_) return false;  // a new inbox: the next BRPOP has it
  deliver(std::move(reply));
  return false;
}

FAIRSEM_INLINE void Waker::deliver(Reply reply) {
  const std::string& inbox = reply.elements[0].str;
  std::string& pushed = reply.elements[1].str;
  // "ID MESSAGE": a permit id has no whitespace. Anything else was not pushed by fairsem.
  const std::size_t space = pushed.find(' ');
  if (space == std::string::npos || inbox.size() < inbox_suffix_.size() ||
      inbox.compare(inbox.size() - inbox_suffix_.size(), std::string::npos, inbox_suffix_) != 0) {
    return;
  }
  std::string key = inbox.substr(0, inbox.size() - inbox_suffix_.size());
  key.append(pushed, 0, space);
  std::string message = pushed.substr(space + 1);
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = subs_.find(key);
  if (it == subs_.end()) {
    // Its waiter is not listening: not yet (its call's reply and this promotion crossed), or
    // between a wake-up and its next poll, or never again (it left; the entry is gone).
    keep_unclaimed(std::move(key), std::move(message));
    return;
  }
  WakeSubscription& sub = *it->second;
  if (hand_over(it, std::move(message))) due_hooks_.push_back(sub.hook_);
}

FAIRSEM_INLINE bool Waker::hand_over(
    std::unordered_multimap<std::string, WakeSubscription*>::iterator it, std::string message) {
  // One wake-up ends the listening (a promotion or an eviction is the last word on an entry).
  WakeSubscription& sub = *it->second;
  std::vector<Reply> woken;
  woken.push_back(Reply::make_string(it->first));
  woken.push_back(Reply::make_string(std::move(message)));
  unlist(it);
  sub.woken_ = Reply::make_array(std::move(woken));
  sub.cv_.notify_all();
  return static_cast<bool>(sub.hook_);
}

FAIRSEM_INLINE void Waker::forget_unclaimed(std::chrono::steady_clock::time_point now) {
  for (auto it = unclaimed_.begin(); it != unclaimed_.end();) {
    if (now - it->second.at >= waker_helpers::kUnclaimedLifetime) {
      it = unclaimed_.erase(it);
    } else {
      ++it;
    }
  }
}

FAIRSEM_INLINE void Waker::keep_unclaimed(std::string key, std::string message) {
  const auto now = std::chrono::steady_clock::now();
  if (unclaimed_.size() >= waker_helpers::kMaxUnclaimed) {
    forget_unclaimed(now);
    // Still full of recent ones: one makes room (its waiter, if any, polls).
    if (unclaimed_.size() >= waker_helpers::kMaxUnclaimed) unclaimed_.erase(unclaimed_.begin());
  }
  unclaimed_.insert_or_assign(std::move(key), Unclaimed{std::move(message), now});
}

}  // namespace fairsem::detail
