#pragma once

// The message of the error a call must throw, for tests that check what it says.

#include <gtest/gtest.h>

#include <string>

#include "fairsem/errors.hpp"

namespace fairsem::test {

/// what() of the exception of type E (any fairsem::Error by default) that `f` throws; fails the
/// test, and returns "", if it throws none.
template <class E = Error, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "no exception of the expected type was thrown";
  return "";
}

}  // namespace fairsem::test
