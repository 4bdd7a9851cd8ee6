#pragma once
// The message of the meridian::Error that f throws, after checking its kind (a test failure when
// f throws nothing).
#include <doctest/doctest.h>

#include <string>

#include "core/util/error.hpp"

namespace meridian::testing {

template <class F>
std::string error_of(ErrorKind kind, F&& f) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(e.kind() == kind);
    return e.what();
  }
  FAIL("no Error thrown");
  return {};
}

}  // namespace meridian::testing
