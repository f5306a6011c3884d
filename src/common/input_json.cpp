#include "common/input_json.h"

#include "common/error.h"

namespace mkserve {
namespace {

struct TooDeep {};

}  // namespace

nlohmann::json ParseInputJson(std::string_view text, const std::string& what) {
  auto bound_depth = [](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) {
    const bool opens = event == nlohmann::json::parse_event_t::object_start ||
                       event == nlohmann::json::parse_event_t::array_start;
    if (opens && depth >= kMaxInputJsonDepth) throw TooDeep{};
    return true;
  };
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text, bound_depth, /*allow_exceptions=*/false);
  } catch (const TooDeep&) {
    throw Error(what + ": nests JSON objects and arrays more than " +
                std::to_string(kMaxInputJsonDepth) + " levels deep");
  }
  if (json.is_discarded()) throw Error(what + ": not valid JSON");
  return json;
}

}  // namespace mkserve
