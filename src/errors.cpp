#include "fairsem/errors.hpp"

// Out-of-line destructors anchor each exception's vtable in the library instead of in every
// translation unit that throws or catches it.
namespace fairsem {

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

}  // namespace fairsem
