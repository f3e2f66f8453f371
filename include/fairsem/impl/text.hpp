#pragma once

// Small string helpers shared by option parsing and reply decoding. No I/O, no hiredis.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fairsem/errors.hpp"

namespace fairsem::detail {

inline bool starts_with(std::string_view s, std::string_view prefix) noexcept {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

/// Case-insensitive (ASCII) prefix test, for URL schemes.
inline bool starts_with_nocase(std::string_view s, std::string_view prefix) noexcept {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    char c = s[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != prefix[i]) return false;
  }
  return true;
}

/// Parses an unsigned decimal number made of digits only (no sign, no spaces).
/// Returns nullopt for anything else, or when the value exceeds `max`.
inline std::optional<std::uint64_t> parse_decimal(std::string_view s, std::uint64_t max) noexcept {
  if (s.empty() || s.size() > 19) return std::nullopt;
  std::uint64_t value = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (value > max) return std::nullopt;
  return value;
}

inline bool all_digits(std::string_view s) noexcept {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

/// True when `s` holds a byte that is ASCII whitespace or a control character.
inline bool has_space_or_control(std::string_view s) noexcept {
  return std::any_of(s.begin(), s.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return c <= 0x20 || c == 0x7f;
  });
}

/// Renders bytes for a message (errors.hpp).
using fairsem::printable;

/// Decodes %XX escapes. Returns nullopt when a '%' is not followed by two hex digits.
inline std::optional<std::string> percent_decode(std::string_view s) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    if (i + 2 >= s.size()) return std::nullopt;
    int hi = hex(s[i + 1]);
    int lo = hex(s[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

}  // namespace fairsem::detail
