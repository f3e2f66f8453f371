#pragma once

// Asio completion tokens for asynchronous acquires (standalone Asio, e.g. Debian's
// libasio-dev): callbacks, asio::use_future, asio::use_awaitable, asio::experimental::deferred.
// Header-only, and optional: only a program that includes it needs Asio.
//
//   asio::awaitable<void> handle(fairsem::FairSemaphore& sem) {
//     fairsem::Permit p = co_await fairsem::async_acquire(sem, asio::use_awaitable);
//     ...  // released when p goes out of scope
//   }
//
// The completion handler runs on the executor associated with it (for use_awaitable, the
// coroutine's), never on fairsem's worker thread; the operation keeps that executor's work
// going until it completes. An error (EvictedError, ConnectionError...) is passed as the
// exception_ptr, which use_future and use_awaitable throw. To cancel a waiting request, use
// FairSemaphore::acquire_async with a callback, whose AcquireRequest can cancel().
// Destroy the semaphore before the io_context its handlers run on: a worker thread posts each
// completion there, and the semaphore's destructor waits until those posts are done.

#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/post.hpp>
#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <utility>

#include "fairsem/semaphore.hpp"

namespace fairsem {

namespace detail {

/// Starts `start(callback)` and completes `handler` with (exception_ptr, Result) on the
/// handler's executor; `result` turns the callback's optional permit into Result.
template <class Result, class Handler, class Start, class ToResult>
void asio_initiate(Handler&& handler, Start&& start, ToResult result) {
  using HandlerType = std::decay_t<Handler>;
  struct State {
    explicit State(HandlerType&& h)
        : work(asio::make_work_guard(asio::get_associated_executor(h))), handler(std::move(h)) {}
    asio::executor_work_guard<asio::associated_executor_t<HandlerType>> work;
    HandlerType handler;
  };
  auto state = std::make_shared<State>(std::forward<Handler>(handler));
  start([state, result](std::exception_ptr error, std::optional<Permit> permit) {
    auto executor = state->work.get_executor();
    asio::post(executor, [state, error, value = result(std::move(permit))]() mutable {
      HandlerType complete = std::move(state->handler);
      state->work.reset();
      std::move(complete)(error, std::move(value));
    });
  });
}

}  // namespace detail

/// FairSemaphore::acquire(units) as an Asio asynchronous operation with signature
/// void(std::exception_ptr, Permit) (the Permit empty when the exception_ptr is set). Units
/// below 1 or above the limit throw InvalidArgument from this call.
template <class CompletionToken>
auto async_acquire(FairSemaphore& semaphore, long long units, CompletionToken&& token) {
  return asio::async_initiate<CompletionToken, void(std::exception_ptr, Permit)>(
      [&semaphore, units](auto&& handler) {
        detail::asio_initiate<Permit>(
            std::forward<decltype(handler)>(handler),
            [&semaphore, units](AcquireCallback done) {
              semaphore.acquire_async(units, std::move(done));
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
/// passed.
template <class Rep, class Period, class CompletionToken>
auto async_acquire_for(FairSemaphore& semaphore, long long units,
                       std::chrono::duration<Rep, Period> timeout, CompletionToken&& token) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout);
  return asio::async_initiate<CompletionToken, void(std::exception_ptr, std::optional<Permit>)>(
      [&semaphore, units, deadline](auto&& handler) {
        detail::asio_initiate<std::optional<Permit>>(
            std::forward<decltype(handler)>(handler),
            [&semaphore, units, deadline](AcquireCallback done) {
              semaphore.acquire_async_until(units, deadline, std::move(done));
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

}  // namespace fairsem
