#pragma once

// SemaphoreOptions::validate() (semaphore_options.hpp), and the checks and defaults a semaphore
// shares with it: names and permit ids checked, random ids, the default owner info.

#include "fairsem/impl/config.hpp"
#include "fairsem/semaphore_options.hpp"

#include <fmt/format.h>
#include <sys/random.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <system_error>
#include <utility>

#include "fairsem/impl/semaphore/semaphore_core.hpp"
#include "fairsem/impl/text.hpp"

namespace fairsem {

namespace semaphore_helpers {

constexpr std::size_t kMaxNameBytes = 200;
constexpr std::size_t kMaxOwnerInfoBytes = 1024;

}  // namespace semaphore_helpers

FAIRSEM_INLINE void validate_name(std::string_view value, std::string_view what) {
  if (value.empty()) throw InvalidArgument(fmt::format("fairsem: {} must not be empty", what));
  if (value.size() > semaphore_helpers::kMaxNameBytes) {
    throw InvalidArgument(fmt::format("fairsem: {} is {} bytes long; at most {} are allowed", what,
                                      value.size(), semaphore_helpers::kMaxNameBytes));
  }
  for (std::size_t i = 0; i < value.size(); ++i) {
    const auto c = static_cast<unsigned char>(value[i]);
    const bool brace = c == '{' || c == '}';
    if (brace || detail::has_space_or_control(value.substr(i, 1))) {
      throw InvalidArgument(fmt::format(
          "fairsem: {} \"{}\" contains {} at byte {}; names may not contain '{{', '}}', "
          "whitespace or control bytes",
          what, printable(value),
          brace ? fmt::format("'{}'", value[i]) : printable(value.substr(i, 1)), i));
    }
  }
}

FAIRSEM_INLINE std::string default_owner_info() {
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
  std::string name = host[0] != '\0' ? std::string(host.data()) : std::string("unknown-host");
  return fmt::format("{}:{}", name, static_cast<long>(getpid()));
}

// From the kernel, not a seeded generator: a forked child never repeats its parent's ids (a
// generator copied by fork() would).
FAIRSEM_INLINE std::string random_id() {
  std::array<std::uint64_t, 2> bits{};
  std::size_t got = 0;
  auto* bytes = reinterpret_cast<unsigned char*>(bits.data());
  while (got < sizeof(bits)) {
    const ssize_t n = getrandom(bytes + got, sizeof(bits) - got, 0);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
    } else if (errno != EINTR) {
      throw std::system_error(errno, std::generic_category(), "fairsem: getrandom");
    }
  }
  return fmt::format("{:016x}{:016x}", bits[0], bits[1]);
}

FAIRSEM_INLINE void validate_tenant(std::string_view tenant) {
  if (tenant.size() > kMaxTenantLength) {
    throw InvalidArgument(fmt::format("fairsem: a tenant must be at most {} bytes, got {}",
                                      kMaxTenantLength, tenant.size()));
  }
  for (const char c : tenant) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      throw InvalidArgument(
          fmt::format("fairsem: tenant '{}' has a control byte", detail::printable(tenant)));
    }
  }
}

FAIRSEM_INLINE void SemaphoreOptions::validate() const {
  if (limit < 1 || limit > kMaxLimit) {
    throw InvalidArgument(
        fmt::format("fairsem: limit must be at least 1 and at most {}, got {}", kMaxLimit, limit));
  }
  if (lease.count() <= 0) {
    throw InvalidArgument(fmt::format("fairsem: lease must be positive, got {} ms", lease.count()));
  }
  if (lease > detail::kMaxLease) {
    throw InvalidArgument(fmt::format("fairsem: lease must be at most {} ms (30 days), got {} ms",
                                      std::chrono::milliseconds(detail::kMaxLease).count(),
                                      lease.count()));
  }
  if (renew_interval.count() < 0) {
    throw InvalidArgument(fmt::format("fairsem: renew_interval must not be negative, got {} ms",
                                      renew_interval.count()));
  }
  const std::chrono::milliseconds renew = effective_renew_interval();
  if (renew.count() == 0) {
    throw InvalidArgument(fmt::format(
        "fairsem: a lease of {} ms is too short to renew (the renew interval, lease / 3, "
        "would be 0 ms)",
        lease.count()));
  }
  if (renew >= lease) {
    throw InvalidArgument(
        fmt::format("fairsem: renew_interval ({} ms) must be shorter than the lease ({} ms)",
                    renew.count(), lease.count()));
  }
  if (min_replicas < 0) {
    throw InvalidArgument(
        fmt::format("fairsem: min_replicas must not be negative, got {}", min_replicas));
  }
  if (min_replicas > 0 && replica_timeout.count() <= 0) {
    throw InvalidArgument(fmt::format("fairsem: replica_timeout must be positive, got {} ms",
                                      replica_timeout.count()));
  }
  // A granted permit is not renewed while its WAIT runs, and waits up to one renew interval
  // for the watchdog's first round after it: both must fit in the lease with room to spare.
  if (min_replicas > 0 && replica_timeout > (lease - renew) / 2) {
    throw InvalidArgument(fmt::format(
        "fairsem: replica_timeout ({} ms) must be at most half of lease - renew_interval ({} ms "
        "here), so that a permit outlives the WAIT that confirms it",
        replica_timeout.count(), ((lease - renew) / 2).count()));
  }
  if (max_waiters < 0) {
    throw InvalidArgument(
        fmt::format("fairsem: max_waiters must not be negative, got {}", max_waiters));
  }
  if (idle_expiry.count() != 0 && (idle_expiry < lease || idle_expiry > kMaxIdleExpiry)) {
    throw InvalidArgument(fmt::format(
        "fairsem: idle_expiry must be 0 (keys never expire) or from the lease ({} ms) to {} ms, "
        "got {} ms",
        lease.count(), kMaxIdleExpiry.count(), idle_expiry.count()));
  }
  validate_tenant(tenant);
  validate_name(key_prefix, "key_prefix");
  if (!permit_id.empty()) validate_name(permit_id, "permit_id");
  if (owner_info.size() > semaphore_helpers::kMaxOwnerInfoBytes) {
    throw InvalidArgument(
        fmt::format("fairsem: owner_info is {} bytes long; at most {} are allowed",
                    owner_info.size(), semaphore_helpers::kMaxOwnerInfoBytes));
  }
}

}  // namespace fairsem
