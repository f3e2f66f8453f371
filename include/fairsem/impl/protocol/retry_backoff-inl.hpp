#pragma once

#include "fairsem/impl/config.hpp"
#include "fairsem/impl/protocol/retry_backoff.hpp"

#include <algorithm>

#include "fairsem/errors.hpp"
#include "fairsem/impl/semaphore/semaphore_core.hpp"
#include "fairsem/impl/text.hpp"

namespace fairsem::detail {

FAIRSEM_INLINE bool passes_reply(std::string_view server_message) noexcept {
  // A script stopped at its first write on a demoted master ("... READONLY You can't write
  // against a read only replica" inside a script error) wrote nothing either.
  return is_transient(server_message) || starts_with(server_message, "READONLY") ||
         starts_with(server_message, "UNBLOCKED") ||
         server_message.find("READONLY You can't write") != std::string_view::npos;
}

FAIRSEM_INLINE bool passes(const std::exception_ptr& error) noexcept {
  if (!error) return false;
  try {
    std::rethrow_exception(error);
  } catch (const AuthError&) {
    return false;  // wrong credentials do not fix themselves
  } catch (const ConnectionError&) {
    return true;  // TimeoutError too
  } catch (const ReplyError& e) {
    return passes_reply(e.server_message());
  } catch (...) {
    return false;
  }
}

FAIRSEM_INLINE RetryBackoff::RetryBackoff(std::uint64_t seed, std::chrono::milliseconds first,
                                          std::chrono::milliseconds cap) noexcept
    : state_(seed),
      first_(std::max(first, std::chrono::milliseconds(1))),
      cap_(std::max(cap, first_)) {}

FAIRSEM_INLINE std::chrono::milliseconds RetryBackoff::next() noexcept {
  auto ceiling = first_;
  for (int i = 0; i < failures_ && ceiling < cap_; ++i) ceiling *= 2;
  ceiling = std::min(ceiling, cap_);
  if (failures_ < 64) ++failures_;
  const auto half = ceiling.count() / 2;
  const auto spread = static_cast<std::uint64_t>(ceiling.count() - half) + 1;
  return std::chrono::milliseconds(half + static_cast<long long>(draw() % spread));
}

FAIRSEM_INLINE std::uint64_t RetryBackoff::draw() noexcept {
  // splitmix64: small, and good enough to spread retries.
  std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace fairsem::detail
