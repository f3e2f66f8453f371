#pragma once

// Waker (waker.hpp), its subscriptions: a waiter listed in its lane, a wake-up handed to the
// waiter it is for (or kept for one that listens later), the hooks of asynchronous requests.
// Its thread is in waker_loop-inl.hpp.

#include "fairsem/impl/config.hpp"
#include "fairsem/impl/threads/thread_reaper.hpp"
#include "fairsem/impl/wake/waker.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string_view>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

#include "fairsem/errors.hpp"
#include "fairsem/impl/protocol/scripts.hpp"

namespace fairsem::detail {

// --- Waker ----------------------------------------------------------------------------------

FAIRSEM_INLINE Waker::Waker(ConnectionOptions options, std::shared_ptr<Discovery> discovery,
                            std::string kick_id, std::string client,
                            std::chrono::milliseconds idle_timeout,
                            std::shared_ptr<WakerGroup> group)
    : options_(std::move(options)),
      discovery_(std::move(discovery)),
      kick_id_(std::move(kick_id)),
      client_(std::move(client)),
      inbox_suffix_(std::string(waker_helpers::kInboxMark) + client_),
      idle_timeout_(idle_timeout),
      group_(std::move(group)) {
  if (::pipe2(poke_.data(), O_CLOEXEC | O_NONBLOCK) != 0) {
    throw std::system_error(errno, std::generic_category(), "fairsem: the waker's pipe");
  }
}

FAIRSEM_INLINE std::string Waker::inbox(const std::string& wake_prefix) const {
  return wake_prefix + inbox_suffix_;
}

FAIRSEM_INLINE Waker::~Waker() {
  stop();
  for (int fd : poke_) {
    if (fd >= 0) ::close(fd);
  }
}

FAIRSEM_INLINE void Waker::poke() noexcept {
  const char byte = 0;
  // Full (the thread has pokes to read already) is as good as written.
  [[maybe_unused]] const ssize_t n = ::write(poke_[1], &byte, 1);
}

FAIRSEM_INLINE void Waker::stop() noexcept {
  // Stopped from its own thread (a wake-up's hook dropped the last reference to the runtime):
  // that thread is parked rather than joining itself.
  stop_threads(
      mu_,
      [&](std::vector<OwnedThread>& ending) {
        stop_ = true;
        ending.push_back(thread_.take());
      },
      [&] { poke(); });  // ends a wait for the BRPOPs under way at once
}

FAIRSEM_INLINE bool Waker::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return thread_.running();
}

FAIRSEM_INLINE bool Waker::serves(int slot) const {
  std::lock_guard<std::mutex> lock(mu_);
  return lanes_.count(slot) != 0;
}

FAIRSEM_INLINE std::unique_ptr<WakeSubscription> Waker::subscribe(
    int slot, const std::string& wake_prefix, const std::string& id, Connection& conn,
    std::function<void()> hook, std::chrono::steady_clock::time_point since) {
  std::unique_ptr<WakeSubscription> sub(new WakeSubscription(
      shared_from_this(), slot, wake_prefix + id, inbox(wake_prefix), std::move(hook)));
  list(*sub, conn, since);
  return sub;
}

FAIRSEM_INLINE void Waker::list(WakeSubscription& sub, Connection& conn,
                                std::chrono::steady_clock::time_point since) {
  bool kick = false;
  bool wake_thread = false;
  bool hook_due = false;
  bool handed = false;
  std::string kick_key;
  // One that ended idle has let go of the lock for good, and closes its connections: joined
  // after the lock, which the other waiters need meanwhile.
  OwnedThread retired;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stop_) retired = thread_.start([this] { run(); });
    auto lane_at = lanes_.find(sub.slot_);
    if (lane_at == lanes_.end()) {
      // Its kick list is under the wake prefix of the semaphore that opens it (inbox less the
      // suffix), which the user may write.
      std::string list_name = sub.inbox_.substr(0, sub.inbox_.size() - inbox_suffix_.size());
      list_name += "kick-" + kick_id_;
      lane_at = lanes_
                    .emplace(std::piecewise_construct, std::forward_as_tuple(sub.slot_),
                             std::forward_as_tuple(sub.slot_, std::move(list_name)))
                    .first;
    }
    Lane& lane = lane_at->second;
    const auto it = subs_.emplace(sub.key_, &sub);
    sub.listed_ = true;
    ++lane.listed;
    ++lane.inboxes[sub.inbox_].listed;
    // Its promotion may have been popped already: between the reply that queued it and this
    // call, or since the wake-up that ended its listening.
    const auto early = unclaimed_.find(sub.key_);
    if (early != unclaimed_.end()) {
      std::string message = std::move(early->second.message);
      unclaimed_.erase(early);
      hook_due = hand_over(it, std::move(message));
      handed = true;
    } else {
      // Not listening when its lane's BRPOP was cut off after the call it acts on was sent
      // (notify_lane did not reach it): what that BRPOP lost may be its promotion.
      if (lane.cut_at >= since && !sub.interrupted_) {
        sub.interrupted_ = true;
        sub.interrupted_at_ = lane.cut_at;
        hook_due = static_cast<bool>(sub.hook_);
      }
      // A BRPOP under way that lacks this inbox: end it with a push to the kick list, its
      // first key. Otherwise the BRPOP under way has it, or the lane's next one will: the
      // thread, perhaps waiting on other lanes, is told to send it.
      kick = lane.listening && lane.in_brpop.count(sub.inbox_) == 0;
      wake_thread = !lane.listening;
      // Once: the subscriptions through this inbox that come before the next BRPOP need none.
      if (kick) {
        lane.in_brpop.insert(sub.inbox_);
        kick_key = lane.kick_key;
      }
    }
  }
  if (wake_thread) poke();
  retired.let_go();
  if (hook_due) {
    try {
      sub.hook_();
    } catch (...) {
      // As on the waker's thread: that waiter learns of it at its next poll.
    }
  }
  if (!handed) claim_from_group(sub);
  if (handed || !kick) return;
  try {
    conn.eval(scripts::kick, {kick_key},
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

FAIRSEM_INLINE void Waker::unlist(SubIt it) {
  WakeSubscription& sub = *it->second;
  subs_.erase(it);
  sub.listed_ = false;
  const auto lane = lanes_.find(sub.slot_);
  if (lane == lanes_.end()) return;
  const auto now = std::chrono::steady_clock::now();
  if (--lane->second.listed == 0) lane->second.idle_since = now;
  const auto inbox = lane->second.inboxes.find(sub.inbox_);
  if (inbox != lane->second.inboxes.end() && --inbox->second.listed == 0) {
    inbox->second.idle_since = now;
  }
}

FAIRSEM_INLINE void Waker::notify_lane(int slot,
                                       const std::function<void(WakeSubscription&)>& mark) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& entry : subs_) {
    WakeSubscription& sub = *entry.second;
    if (sub.slot_ != slot) continue;
    mark(sub);
    sub.cv_.notify_all();
    if (sub.hook_) due_hooks_.push_back(sub.hook_);
  }
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
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = subs_.find(key);
    if (it != subs_.end()) {
      WakeSubscription& sub = *it->second;
      if (hand_over(it, std::move(message))) due_hooks_.push_back(sub.hook_);
      return;
    }
    // Its waiter is not listening here: not yet (its call's reply and this promotion crossed),
    // or between a wake-up and its next poll, or never again (it left; the entry is gone), or
    // through another waker of the Client. Kept first, so that a subscription listing here
    // meanwhile finds it.
    keep_unclaimed(key, message);
  }
  if (!group_ || !group_->offer(this, key, message)) return;
  std::lock_guard<std::mutex> lock(mu_);
  const auto kept = unclaimed_.find(key);
  if (kept != unclaimed_.end() && kept->second.message == message) unclaimed_.erase(kept);
}

FAIRSEM_INLINE bool Waker::take_offer(const std::string& key, const std::string& message) {
  bool hook_due = false;
  std::function<void()> hook;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = subs_.find(key);
    if (it == subs_.end()) return false;
    hook = it->second->hook_;
    hook_due = hand_over(it, message);
  }
  if (hook_due) {
    try {
      hook();
    } catch (...) {
      // As on this waker's thread: that waiter learns of it at its next poll.
    }
  }
  return true;
}

FAIRSEM_INLINE std::optional<std::string> Waker::take_unclaimed(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto kept = unclaimed_.find(key);
  if (kept == unclaimed_.end()) return std::nullopt;
  std::string message = std::move(kept->second.message);
  unclaimed_.erase(kept);
  return message;
}

FAIRSEM_INLINE void Waker::claim_from_group(WakeSubscription& sub) {
  if (!group_) return;
  std::optional<std::string> message = group_->claim(this, sub.key_);
  if (!message) return;
  bool hook_due = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!sub.listed_) return;  // woken meanwhile (this wake-up, offered by the other waker)
    const auto range = subs_.equal_range(sub.key_);
    for (auto it = range.first; it != range.second; ++it) {
      if (it->second == &sub) {
        hook_due = hand_over(it, std::move(*message));
        break;
      }
    }
  }
  if (hook_due) {
    try {
      sub.hook_();
    } catch (...) {
      // As on the waker's thread: that waiter learns of it at its next poll.
    }
  }
}

FAIRSEM_INLINE bool Waker::hand_over(SubIt it, std::string message) {
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
