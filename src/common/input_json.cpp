#include "common/input_json.h"

#include "common/error.h"

namespace mkserve {

nlohmann::json ParseInputJson(std::string_view text, const std::string& what) {
  nlohmann::json json;
  try {
    json = ParseJsonBounded<nlohmann::json>(text, kMaxInputJsonDepth, /*allow_exceptions=*/false);
  } catch (const JsonTooDeep&) {
    throw Error(what + ": nests JSON objects and arrays more than " +
                std::to_string(kMaxInputJsonDepth) + " levels deep");
  }
  if (json.is_discarded()) throw Error(what + ": not valid JSON");
  return json;
}

}  // namespace mkserve
