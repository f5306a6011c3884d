#include "model/detail/json_file.h"

#include <fstream>

#include "common/error.h"
#include "common/regular_file.h"

namespace mkserve::detail {

nlohmann::json ReadJsonFile(const std::filesystem::path& path) {
  RequireRegularFile(path);
  std::ifstream in(path);
  if (!in) throw Error("cannot open " + path.string());
  nlohmann::json parsed = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) throw Error(path.string() + ": not valid JSON");
  return parsed;
}

}  // namespace mkserve::detail
