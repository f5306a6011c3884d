// Checks mkserve's tokenizer against the JS reference output (compare/reference.mjs): identical ids
// with and without special tokens, identical decode, and decode(encode(x)) == x wherever the
// reference round-trips. usage: tokenizer_compare TOKENIZER_DIR REFERENCE.json
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "tokenizer/tokenizer.h"

namespace {

using mkserve::tokenizer::Tokenizer;

std::string Describe(const Tokenizer& tokenizer, const std::vector<int32_t>& ids, size_t at) {
  std::string out;
  for (size_t i = at > 3 ? at - 3 : 0; i < ids.size() && i < at + 4; ++i) {
    out += std::to_string(ids[i]) + "'" + tokenizer.IdToToken(ids[i]) + "' ";
  }
  return out;
}

bool SameIds(const Tokenizer& tokenizer, const std::string& what, const std::string& name,
             const std::vector<int32_t>& expected, const std::vector<int32_t>& actual) {
  if (expected == actual) return true;
  size_t at = 0;
  while (at < expected.size() && at < actual.size() && expected[at] == actual[at]) ++at;
  std::printf(
      "FAIL %s %s: ids differ at %zu (expected %zu ids, got %zu)\n  expected: %s\n  "
      "actual:   %s\n",
      name.c_str(), what.c_str(), at, expected.size(), actual.size(),
      Describe(tokenizer, expected, at).c_str(), Describe(tokenizer, actual, at).c_str());
  return false;
}

int Compare(const std::string& dir, const std::string& reference_path) {
  mkserve::tokenizer::TokenizerOptions options;
  options.apply_config_bos_eos = false;  // the JS port follows tokenizer.json alone
  Tokenizer tokenizer = Tokenizer::Load(dir, options);
  std::ifstream in(reference_path);
  if (!in) throw mkserve::Error("cannot read " + reference_path);
  nlohmann::json reference = nlohmann::json::parse(in);
  int failures = 0, lossless = 0;
  for (const nlohmann::json& c : reference["cases"]) {
    const std::string name = c["name"], text = c["text"], decoded = c["decoded"];
    auto ids = tokenizer.Encode(text, false);
    failures += !SameIds(tokenizer, "encode", name, c["ids"], ids);
    failures +=
        !SameIds(tokenizer, "encode+special", name, c["ids_special"], tokenizer.Encode(text, true));
    std::string ours = tokenizer.Decode(ids, false);
    if (ours != decoded) {
      std::printf("FAIL %s decode differs:\n  expected: %s\n  actual:   %s\n", name.c_str(),
                  nlohmann::json(decoded).dump().c_str(), nlohmann::json(ours).dump().c_str());
      ++failures;
    }
    if (decoded == text) {
      ++lossless;
      if (ours != text) ++failures, std::printf("FAIL %s: decode(encode(x)) != x\n", name.c_str());
    }
  }
  std::printf("%s: %zu cases (%d round-trip exactly), %d failures\n", dir.c_str(),
              reference["cases"].size(), lossless, failures);
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: tokenizer_compare TOKENIZER_DIR REFERENCE.json\n");
    return 2;
  }
  try {
    return Compare(argv[1], argv[2]);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "tokenizer_compare: %s\n", error.what());
    return 1;
  }
}
