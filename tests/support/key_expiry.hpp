#pragma once

// Which keys of a test's semaphores carry no expiry: for the tests of idle expiry, where every
// key of a semaphore that has one must expire, and a semaphore that expired must stay gone.

#include <string>
#include <vector>

#include "fairsem/impl/net/connection.hpp"

namespace fairsem::test {

/// Every key matching `pattern` that has no expiry (PTTL -1), found by SCAN.
inline std::vector<std::string> keys_without_expiry(detail::Connection& admin,
                                                    const std::string& pattern) {
  std::vector<std::string> out;
  std::string cursor = "0";
  do {
    const detail::Reply page = admin.command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    cursor = page.elements.at(0).str;
    for (const detail::Reply& key : page.elements.at(1).elements) {
      if (admin.command({"PTTL", key.str}).integer == -1) out.push_back(key.str);
    }
  } while (cursor != "0");
  return out;
}

}  // namespace fairsem::test
