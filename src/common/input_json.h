// JSON that mkserve reads as input outside HTTP (schedule policies, token id lists on stdin). A
// value nested 100,000 deep parses, but printing it in an error message recurses once per level
// and overflows the stack: the nesting is bounded while parsing, before anything deep is built.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace mkserve {

inline constexpr int kMaxInputJsonDepth = 64;

// Throws mkserve::Error starting with `what` when `text` is not valid JSON or nests objects and
// arrays more than kMaxInputJsonDepth deep.
nlohmann::json ParseInputJson(std::string_view text, const std::string& what);

}  // namespace mkserve
