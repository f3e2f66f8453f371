#pragma once

// Whether a callback's std::exception_ptr holds an exception of a given type (a CancelledError,
// say), for tests and the stress harness, which get errors that way.

#include <exception>

namespace fairsem::test {

/// True when `error` holds an exception of type E (or one derived from it).
template <class E>
bool exception_is(const std::exception_ptr& error) {
  if (!error) return false;
  try {
    std::rethrow_exception(error);
  } catch (const E&) {
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace fairsem::test
