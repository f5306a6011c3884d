#include "server/prompt_set.h"

#include <fstream>

#include "common/error.h"
#include "server/json.h"

namespace mkserve::server {

std::vector<std::string> LoadPromptSet(const std::filesystem::path& path) {
  std::ifstream file(path);
  if (!file) throw Error("cannot open the prompt set " + path.string());
  std::vector<std::string> prompts;
  std::string line;
  for (int line_number = 1; std::getline(file, line); ++line_number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    Json entry = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (entry.is_discarded() || !entry.is_object() || !entry.contains("prompt") ||
        !entry["prompt"].is_string() || entry["prompt"].get<std::string>().empty()) {
      throw Error(path.string() + ":" + std::to_string(line_number) +
                  ": each line must be a JSON object with a non-empty string \"prompt\"");
    }
    prompts.push_back(entry["prompt"].get<std::string>());
  }
  if (prompts.empty()) throw Error("the prompt set " + path.string() + " holds no prompt");
  return prompts;
}

}  // namespace mkserve::server
