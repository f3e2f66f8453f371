#pragma once

// Asio completion tokens for asynchronous acquires and releases (standalone Asio, e.g. Debian's
// libasio-dev): callbacks, asio::use_future, asio::use_awaitable, asio::experimental::deferred,
// asio::experimental::awaitable_operators. Header-only, and optional: only a program that
// includes it needs Asio.
//
//   asio::awaitable<void> handle(fairsem::FairSemaphore& sem) {
//     fairsem::Permit p = co_await fairsem::async_acquire(sem, asio::use_awaitable);
//     ...
//     co_await fairsem::async_release(std::move(p), asio::use_awaitable);
//   }
//
// The completion handler runs on the executor associated with it (for use_awaitable, the
// coroutine's), never on fairsem's worker threads; the operation keeps that executor's work
// going until it completes. The Redis calls run on the Client's worker threads, never on the
// thread that starts the operation. An error (EvictedError, ConnectionError...) is passed as the
// exception_ptr, which use_future and use_awaitable throw.
//
// Acquires honour the cancellation slot associated with their handler
// (asio::bind_cancellation_slot, a timer raced with awaitable_operators' ||, a coroutine's
// cancellation): see async_acquire.
//
// A Permit's destructor waits for its release (a Redis round trip, longer when Redis cannot be
// reached) on the thread that destroys it. On an io_context's thread, release with
// async_release, or open the semaphores through a Client with
// ClientOptions::release_in_background, which hands every destructor's release to the worker
// threads.
//
// Destroy the semaphore before the io_context its handlers run on: a worker thread posts each
// completion there, and the semaphore's destructor waits until those posts are done.

#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/post.hpp>
#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <utility>

#include "fairsem/semaphore.hpp"

namespace fairsem {

namespace detail {

/// One Asio operation of fairsem's: its handler, the work it keeps going on the handler's
/// executor, and for an acquire, the request that the handler's cancellation slot cancels.
/// Completes once: the first of the request's outcome and a cancellation.
template <class Handler, class Result>
class AsioOperation : public std::enable_shared_from_this<AsioOperation<Handler, Result>> {
 public:
  explicit AsioOperation(Handler&& handler)
      : work_(asio::make_work_guard(asio::get_associated_executor(handler))),
        handler_(std::move(handler)),
        slot_(asio::get_associated_cancellation_slot(handler_)) {}

  /// Installs the cancellation handler in the handler's slot, if it has one. Before the request
  /// starts, so that a completion never races with the installation.
  void hook_cancellation() {
    if (!slot_.is_connected()) return;
    hooked_ = true;
    slot_.template emplace<Cancel>(this->weak_from_this());
  }

  /// The request started: a cancellation from now on (or one that came while it started)
  /// cancels it.
  void started(AcquireRequest request) {
    bool cancel_now = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      request_ = std::move(request);
      cancel_now = cancel_asked_ && !completed_;
    }
    if (cancel_now) cancel();
  }

  /// The request could not start (the initiating function throws): the slot is let go of and
  /// the work ends, with no completion.
  void abandon() noexcept {
    if (hooked_) slot_.clear();
    work_.reset();
  }

  /// Completes the handler with (error, result) on its executor, unless completed already.
  void complete(std::exception_ptr error, Result result) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (completed_) return;
      completed_ = true;
    }
    auto executor = work_.get_executor();
    asio::post(executor, [self = this->shared_from_this(), error, r = std::move(result)]() mutable {
      // On the handler's executor, where the slot is used: the cancellation handler goes
      // before the completion handler runs (it must not outlive the operation).
      if (self->hooked_) self->slot_.clear();
      Handler handler = std::move(self->handler_);
      self->work_.reset();
      std::move(handler)(error, std::move(r));
    });
  }

 private:
  /// What the slot holds: cancels the request for every type of cancellation. Terminal and
  /// partial are what it does, and total too, since a cancelled request leaves the semaphore
  /// as if it had never been made (its queue entry removed, a permit it got passed on).
  struct Cancel {
    explicit Cancel(std::weak_ptr<AsioOperation> op) noexcept : operation(std::move(op)) {}
    std::weak_ptr<AsioOperation> operation;
    void operator()(asio::cancellation_type type) const {
      constexpr auto kHandled = asio::cancellation_type::terminal |
                                asio::cancellation_type::partial | asio::cancellation_type::total;
      if ((type & kHandled) == asio::cancellation_type::none) return;
      if (const auto self = operation.lock()) self->cancel();
    }
  };

  void cancel() {
    bool cancelled = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (completed_) return;
      if (!request_) {
        cancel_asked_ = true;  // still starting: started() cancels it
        return;
      }
      // False when the request completed already (its outcome is on its way to complete()).
      cancelled = request_->cancel();
    }
    if (cancelled) {
      // The request ends cancelled whatever its worker thread is doing (see AsyncAcquire): its
      // queue entry is removed there, and a permit granted meanwhile passes on. The handler
      // need not wait for that round trip to Redis.
      complete(std::make_exception_ptr(
                   CancelledError("fairsem: the asynchronous acquire was cancelled through its "
                                  "Asio cancellation slot")),
               Result());
    }
  }

  asio::executor_work_guard<asio::associated_executor_t<Handler>> work_;
  Handler handler_;
  asio::associated_cancellation_slot_t<Handler> slot_;
  bool hooked_ = false;  // set before the operation starts

  std::mutex mu_;  // guards the three below
  std::optional<AcquireRequest> request_;
  bool cancel_asked_ = false;
  bool completed_ = false;
};

/// Starts `start(callback)` (which returns its AcquireRequest) and completes `handler` with
/// (exception_ptr, Result) on the handler's executor; `to_result` turns the callback's optional
/// permit into Result. The handler's cancellation slot cancels the request.
template <class Result, class Handler, class Start, class ToResult>
void asio_acquire(Handler&& handler, Start&& start, ToResult to_result) {
  using Operation = AsioOperation<std::decay_t<Handler>, Result>;
  auto operation = std::make_shared<Operation>(std::forward<Handler>(handler));
  operation->hook_cancellation();
  AcquireRequest request;
  try {
    request = start([operation, to_result](std::exception_ptr error, std::optional<Permit> permit) {
      operation->complete(std::move(error), to_result(std::move(permit)));
    });
  } catch (...) {
    operation->abandon();
    throw;
  }
  operation->started(std::move(request));
}

}  // namespace detail

/// FairSemaphore::acquire(units) as an Asio asynchronous operation with signature
/// void(std::exception_ptr, Permit) (the Permit empty when the exception_ptr is set). Units
/// below 1 or above the limit throw InvalidArgument from this call.
///
/// Cancellation: the handler's associated cancellation slot (asio::bind_cancellation_slot,
/// awaitable_operators, a cancelled coroutine), for the terminal, partial and total types, does
/// what AcquireRequest::cancel() does: unless the request has completed, its queue entry is
/// removed (on a worker thread, right after) and a permit granted to it in that instant passes
/// on to the next waiter; the handler then completes at once with a CancelledError as the
/// exception_ptr, without waiting for Redis. A cancellation that comes after the request
/// completed changes nothing: the handler gets what the request got. The slot's handler is
/// removed when the operation completes.
template <class CompletionToken>
auto async_acquire(FairSemaphore& semaphore, long long units, CompletionToken&& token) {
  return asio::async_initiate<CompletionToken, void(std::exception_ptr, Permit)>(
      [&semaphore, units](auto&& handler) {
        detail::asio_acquire<Permit>(
            std::forward<decltype(handler)>(handler),
            [&semaphore, units](AcquireCallback done) {
              return semaphore.acquire_async(units, std::move(done));
            },
            [](std::optional<Permit>&& permit) { return permit ? std::move(*permit) : Permit(); });
      },
      token);
}

/// One unit: FairSemaphore::acquire().
template <class CompletionToken>
auto async_acquire(FairSemaphore& semaphore, CompletionToken&& token) {
  return async_acquire(semaphore, 1, std::forward<CompletionToken>(token));
}

/// FairSemaphore::try_acquire_for(units, timeout) as an Asio asynchronous operation with
/// signature void(std::exception_ptr, std::optional<Permit>): an empty optional when `timeout`
/// passed. Cancelled as async_acquire is (CancelledError, an empty optional).
template <class Rep, class Period, class CompletionToken>
auto async_acquire_for(FairSemaphore& semaphore, long long units,
                       std::chrono::duration<Rep, Period> timeout, CompletionToken&& token) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout);
  return asio::async_initiate<CompletionToken, void(std::exception_ptr, std::optional<Permit>)>(
      [&semaphore, units, deadline](auto&& handler) {
        detail::asio_acquire<std::optional<Permit>>(
            std::forward<decltype(handler)>(handler),
            [&semaphore, units, deadline](AcquireCallback done) {
              return semaphore.acquire_async_until(units, deadline, std::move(done));
            },
            [](std::optional<Permit>&& permit) { return std::move(permit); });
      },
      token);
}

/// One unit: FairSemaphore::try_acquire_for(timeout).
template <class Rep, class Period, class CompletionToken>
auto async_acquire_for(FairSemaphore& semaphore, std::chrono::duration<Rep, Period> timeout,
                       CompletionToken&& token) {
  return async_acquire_for(semaphore, 1, timeout, std::forward<CompletionToken>(token));
}

/// Permit::release() as an Asio asynchronous operation with signature
/// void(std::exception_ptr, ReleaseResult) (the ReleaseResult to be ignored when the
/// exception_ptr is set: ConnectionError, TimeoutError...). The Permit is moved in: the
/// caller's is empty once this returns (with asio::experimental::deferred too), and the
/// release runs on one of the Client's worker threads (Permit::release_async), never on the
/// caller's, so an io_context's thread goes on with other work while Redis answers. An empty
/// Permit completes with ReleaseResult::already_released. Not cancellable: the handler's
/// cancellation slot is left alone. Throws std::system_error if no worker thread can start.
template <class CompletionToken>
auto async_release(Permit permit, CompletionToken&& token) {
  return asio::async_initiate<CompletionToken, void(std::exception_ptr, ReleaseResult)>(
      [](auto&& handler, Permit held) {
        using Operation = detail::AsioOperation<std::decay_t<decltype(handler)>, ReleaseResult>;
        auto operation = std::make_shared<Operation>(std::forward<decltype(handler)>(handler));
        held.release_async([operation](std::exception_ptr error, ReleaseResult result) {
          operation->complete(std::move(error), result);
        });
      },
      token, std::move(permit));
}

}  // namespace fairsem
