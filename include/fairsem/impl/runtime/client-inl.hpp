#pragma once

// Client (client.hpp): a handle on its Runtime (runtime.hpp), and ClientOptions::validate().

#include "fairsem/client.hpp"
#include "fairsem/impl/config.hpp"

#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <utility>

#include "fairsem/impl/runtime/runtime.hpp"
#include "fairsem/impl/threads/fork.hpp"

namespace fairsem {

FAIRSEM_INLINE void ClientOptions::validate() const {
  if (max_connections < 1) {
    throw InvalidArgument(
        fmt::format("fairsem: max_connections must be at least 1, got {}", max_connections));
  }
  if (worker_threads < 1) {
    throw InvalidArgument(
        fmt::format("fairsem: worker_threads must be at least 1, got {}", worker_threads));
  }
  if (idle_timeout <= std::chrono::milliseconds(0) || idle_timeout > std::chrono::hours(24)) {
    throw InvalidArgument(
        fmt::format("fairsem: idle_timeout must be more than 0 ms and at most a day, got {} ms",
                    idle_timeout.count()));
  }
}

FAIRSEM_INLINE Client::Client(ConnectionOptions connection, ClientOptions options)
    : runtime_(std::make_shared<detail::Runtime>(std::move(connection), std::move(options))) {}

FAIRSEM_INLINE Client::Client(const Client&) = default;
FAIRSEM_INLINE Client::Client(Client&&) noexcept = default;
FAIRSEM_INLINE Client& Client::operator=(const Client&) = default;
FAIRSEM_INLINE Client& Client::operator=(Client&&) noexcept = default;

FAIRSEM_INLINE Client::~Client() {
  if (!runtime_) return;
  if (!runtime_->owner().here()) {
    detail::abandon(std::move(runtime_));  // a child's copy of its parent's (fork.hpp)
    return;
  }
  runtime_->wait_for_releases();
}

FAIRSEM_INLINE const ConnectionOptions& Client::connection() const { return runtime()->options(); }

FAIRSEM_INLINE const std::shared_ptr<detail::Runtime>& Client::runtime() const {
  if (!runtime_) {
    throw UsedAfterMoveError(
        "fairsem: a Client was used after it was moved from; a moved-from Client may only be "
        "destroyed or assigned to");
  }
  return runtime_;
}

}  // namespace fairsem
