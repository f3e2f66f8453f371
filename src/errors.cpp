#include "fairsem/errors.hpp"

namespace fairsem {

// Out-of-line destructors anchor each exception's vtable in the library instead of in every
// translation unit that throws or catches it.

Error::~Error() = default;
ConnectionError::~ConnectionError() = default;
TimeoutError::~TimeoutError() = default;
AuthError::~AuthError() = default;
ReplyError::~ReplyError() = default;
ProtocolError::~ProtocolError() = default;
LimitMismatchError::~LimitMismatchError() = default;
EvictedError::~EvictedError() = default;
RequestTooLargeError::~RequestTooLargeError() = default;
ReplicationError::~ReplicationError() = default;
CancelledError::~CancelledError() = default;
InvalidArgument::~InvalidArgument() = default;

std::string printable(std::string_view text) {
  constexpr std::string_view hex = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f) {
      out.push_back(ch);
    } else {
      out += "\\x";
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 0xf]);
    }
  }
  return out;
}

}  // namespace fairsem
