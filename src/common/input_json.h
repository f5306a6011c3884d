// JSON read as input. A value nested 100,000 deep parses, but copying or printing it (an error
// message quoting it) recurses once per level and overflows the stack: nesting is bounded while
// parsing, before anything deep is built. The HTTP server bounds request bodies this way; the
// CLI reads schedule policies and token id lists with ParseInputJson.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace mkserve {

inline constexpr int kMaxInputJsonDepth = 64;

// Thrown by ParseJsonBounded as soon as a container would open deeper than its bound.
struct JsonTooDeep {};

// nlohmann's parse (JsonType: json or ordered_json), with objects and arrays nested at most
// `max_depth` deep.
template <class JsonType>
JsonType ParseJsonBounded(std::string_view text, int max_depth, bool allow_exceptions) {
  auto bound_depth = [max_depth](int depth, typename JsonType::parse_event_t event, JsonType&) {
    // `depth` counts the containers around the one opening: the top-level one is at 0.
    const bool opens = event == JsonType::parse_event_t::object_start ||
                       event == JsonType::parse_event_t::array_start;
    if (opens && depth >= max_depth) throw JsonTooDeep{};
    return true;
  };
  return JsonType::parse(text, bound_depth, allow_exceptions);
}

// Throws mkserve::Error starting with `what` when `text` is not valid JSON or nests objects and
// arrays more than kMaxInputJsonDepth deep.
nlohmann::json ParseInputJson(std::string_view text, const std::string& what);

}  // namespace mkserve
