#pragma once

// Splitting a line into its space-separated words, for the test support code (ACL rules, inline
// commands).

#include <string>
#include <string_view>
#include <vector>

namespace fairsem::test {

/// The words of `text`, split at spaces (runs of them count as one).
inline std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> words;
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t end = text.find(' ', i);
    const std::size_t stop = end == std::string_view::npos ? text.size() : end;
    if (stop > i) words.emplace_back(text.substr(i, stop - i));
    i = stop + 1;
  }
  return words;
}

}  // namespace fairsem::test
