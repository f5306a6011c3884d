#include "tokenizer/test_util.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace mkserve::tokenizer::testing {

std::vector<std::string> CorpusCases() {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(
           std::filesystem::path(MKSERVE_SOURCE_DIR) / "tests/tokenizer/corpus")) {
    if (entry.path().extension() == ".txt") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<std::string> cases;
  const std::string separator = "\n%%%%\n";
  for (const auto& file : files) {
    std::ifstream in(file, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    std::string all = text.str();
    size_t begin = 0;
    for (size_t at; (at = all.find(separator, begin)) != std::string::npos;) {
      cases.push_back(all.substr(begin, at - begin));
      begin = at + separator.size();
    }
    cases.push_back(all.substr(begin));
  }
  return cases;
}

}  // namespace mkserve::tokenizer::testing
