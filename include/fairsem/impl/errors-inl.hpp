#pragma once

#include "fairsem/errors.hpp"
#include "fairsem/impl/config.hpp"

// Out-of-line destructors anchor each exception's vtable in the compiled library instead of in
// every translation unit that throws or catches it (header-only, they are inline like the rest).
namespace fairsem {

FAIRSEM_INLINE Error::~Error() = default;
FAIRSEM_INLINE ConnectionError::~ConnectionError() = default;
FAIRSEM_INLINE TimeoutError::~TimeoutError() = default;
FAIRSEM_INLINE AuthError::~AuthError() = default;
FAIRSEM_INLINE ReplyError::~ReplyError() = default;
FAIRSEM_INLINE ProtocolError::~ProtocolError() = default;
FAIRSEM_INLINE DataModelError::~DataModelError() = default;
FAIRSEM_INLINE LimitMismatchError::~LimitMismatchError() = default;
FAIRSEM_INLINE EvictedError::~EvictedError() = default;
FAIRSEM_INLINE RequestTooLargeError::~RequestTooLargeError() = default;
FAIRSEM_INLINE QueueFullError::~QueueFullError() = default;
FAIRSEM_INLINE ReplicationError::~ReplicationError() = default;
FAIRSEM_INLINE CancelledError::~CancelledError() = default;
FAIRSEM_INLINE ForkedProcessError::~ForkedProcessError() = default;
FAIRSEM_INLINE InvalidArgument::~InvalidArgument() = default;
FAIRSEM_INLINE UsedAfterMoveError::~UsedAfterMoveError() = default;

FAIRSEM_INLINE std::string printable(std::string_view text) {
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
