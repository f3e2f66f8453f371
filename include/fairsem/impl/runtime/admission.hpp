#pragma once

// Call order is queue order: the requests of one semaphore (through one Client) reach Redis
// in the order they were made. A request gets its ticket from its first script call, so a
// request made after another returned must not send that call before the other's has been
// answered. An asynchronous request returns at once, long before that answer: later requests
// line up behind it here. Internal.
//
// The rule, for one Admission:
//   - an asynchronous request is submitted as a job; jobs run one at a time, on the Client's
//     worker threads, in submission order, each once the one before it is done with its turn
//     (its first call answered, or failed, or the request withdrawn);
//   - a blocking request waits for its turn only while earlier ones are pending: with none
//     pending it goes at once, in parallel with other blocking requests (no request that
//     returned before it can be behind, so no order is at stake).

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

namespace fairsem::detail {

class Admission;
class Executor;

/// The right to send a request's first call ahead of every request submitted after it. done()
/// (or the destructor) hands it to the next request. An empty turn holds nothing: given to a
/// blocking request that found nobody ahead of it.
class AdmissionTurn {
 public:
  AdmissionTurn() noexcept = default;
  AdmissionTurn(AdmissionTurn&& other) noexcept = default;
  AdmissionTurn& operator=(AdmissionTurn&& other) noexcept;
  AdmissionTurn(const AdmissionTurn&) = delete;
  AdmissionTurn& operator=(const AdmissionTurn&) = delete;
  ~AdmissionTurn() { done(); }

  /// The first call was answered (or will never be sent): the next request may go.
  void done() noexcept;
  /// True until done(); false for an empty turn.
  bool held() const noexcept { return admission_ != nullptr; }

 private:
  friend class Admission;
  explicit AdmissionTurn(std::shared_ptr<Admission> admission) noexcept
      : admission_(std::move(admission)) {}

  std::shared_ptr<Admission> admission_;
};

class Admission : public std::enable_shared_from_this<Admission> {
 public:
  using Clock = std::chrono::steady_clock;
  /// An asynchronous request's first step: given its turn, on a worker thread. It must not
  /// throw, and it hands the turn on by letting go of it.
  using Job = std::function<void(AdmissionTurn)>;

  /// Jobs run on `executor`, which must outlive every turn (a turn is held by a request or a
  /// caller that keeps its semaphore, and so its Client, alive).
  explicit Admission(Executor& executor) : executor_(executor) {}
  Admission(const Admission&) = delete;
  Admission& operator=(const Admission&) = delete;

  /// Runs `job` on a worker thread once every request submitted before it is done with its
  /// turn. Throws std::system_error if no worker thread can start (nothing is then submitted).
  void submit(Job job);
  /// For a blocking request: its turn, once every request submitted before it is done with
  /// theirs; at once, and empty, when none is pending. Nullopt when `deadline` passes first
  /// (the request is then withdrawn from the line).
  std::optional<AdmissionTurn> wait(std::optional<Clock::time_point> deadline);

  /// Requests in line behind the turn's holder (for tests).
  std::size_t waiting() const;

 private:
  friend class AdmissionTurn;

  /// A blocking request in line: told by pass() when its turn has come.
  struct Waiter {
    std::condition_variable cv;
    bool ready = false;
  };
  /// One request in line: a job, or a blocking request's Waiter (the other one empty).
  struct Entry {
    Job job;
    Waiter* waiter = nullptr;
  };

  /// The turn's holder is done: the next request in line gets it.
  void pass() noexcept;
  /// Posts `job` with the turn to a worker thread.
  void dispatch(Job job);

  Executor& executor_;
  mutable std::mutex mu_;  // guards busy_, line_ and each Waiter
  bool busy_ = false;      // a turn is held: a request that comes now lines up
  std::deque<Entry> line_;
};

}  // namespace fairsem::detail
