// One exception type for every user-facing failure (bad checkpoint, bad config, bad flag).
// Its message says what was wrong and, where it helps, what to do about it.
#pragma once

#include <stdexcept>
#include <string>

namespace mkserve {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace mkserve
