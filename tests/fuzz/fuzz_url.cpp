// libFuzzer target: ConnectionOptions::from_url on arbitrary bytes.
//
// connection_options.hpp documents InvalidArgument as the only error from_url throws, so that
// is the only exception caught here: anything else escapes and libFuzzer reports it, as it does
// sanitizer findings. The target also checks two promises of the header: a parsed URL passes
// validate(), and no message contains the password (checked as "nothing depends on it").

#include <fairsem/connection_options.hpp>
#include <fairsem/impl/text.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace {

using fairsem::ConnectionOptions;

void require(bool ok) {
  if (!ok) std::abort();
}

/// The outcome of one from_url call: the options, or the InvalidArgument message.
struct Outcome {
  std::optional<ConnectionOptions> options;
  std::string message;
};

Outcome parse(std::string_view url) {
  Outcome out;
  try {
    out.options = ConnectionOptions::from_url(url);
  } catch (const fairsem::InvalidArgument& e) {
    out.message = e.what();
    require(out.message.rfind("fairsem: ", 0) == 0);
  }
  return out;
}

/// Where the password is, as the parser splits the URL: from the first ':' of the user info
/// to the '@' that ends it (the last '@', or for unix:// the last "@/"). nullopt: none.
std::optional<std::pair<std::size_t, std::size_t>> password_span(std::string_view url) {
  using fairsem::detail::starts_with_nocase;
  std::size_t start = 0;
  std::size_t at = std::string_view::npos;
  // The TCP schemes, plain and TLS: the user info ends at the last '@'.
  for (const std::string_view scheme :
       {"redis://", "rediss://", "redis-cluster://", "rediss-cluster://", "redis-sentinel://",
        "rediss-sentinel://"}) {
    if (starts_with_nocase(url, scheme)) {
      start = scheme.size();
      at = url.rfind('@');
    }
  }
  if (starts_with_nocase(url, "unix://")) {
    start = 7;
    if (url.size() > start && url[start] == '/') return std::nullopt;  // no user info
    at = url.rfind("@/");
  }
  if (start == 0 || at == std::string_view::npos || at < start) return std::nullopt;
  const std::size_t colon = url.find(':', start);
  if (colon == std::string_view::npos || colon > at) return std::nullopt;
  return std::make_pair(colon + 1, at);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string url(reinterpret_cast<const char*>(data), size);
  const Outcome first = parse(url);
  if (first.options) {
    first.options->validate();  // would throw: from_url must only return valid options
    require(!first.options->endpoint().empty());
    (void)first.options->redacted_url();
  }

  // Replace a well-formed password by another of the same length: the parse must end the
  // same way, with the same message or the same redacted URL. A message that quoted the
  // password would differ.
  const auto span = password_span(url);
  if (!span || span->first == span->second) return 0;
  const std::string_view password =
      std::string_view(url).substr(span->first, span->second - span->first);
  if (!fairsem::detail::percent_decode(password)) return 0;  // rejected for its own sake
  std::string other = url;
  other.replace(span->first, password.size(), password.size(), 'x');
  const Outcome second = parse(other);
  require(first.options.has_value() == second.options.has_value());
  require(first.message == second.message);
  if (first.options) {
    require(first.options->redacted_url() == second.options->redacted_url());
    require(first.options->user == second.options->user);
    require(first.options->host == second.options->host);
    require(first.options->unix_path == second.options->unix_path);
    require(first.options->db == second.options->db);
  }
  return 0;
}
