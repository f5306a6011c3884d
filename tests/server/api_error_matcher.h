// Helpers for tests that expect request parsing to fail with an ApiError.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "server/error.h"

namespace mkserve::server {

// Runs `body`; returns the ApiError it throws, or fails the test when it throws none.
template <typename Body>
ApiError ExpectApiError(Body body) {
  try {
    body();
  } catch (const ApiError& error) {
    return error;
  }
  ADD_FAILURE() << "expected an ApiError";
  return ApiError(ErrorKind::kInternal, "no error was thrown");
}

inline bool Mentions(const ApiError& error, const std::string& text) {
  return std::string(error.what()).find(text) != std::string::npos;
}

}  // namespace mkserve::server
