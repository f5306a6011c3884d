// Helpers for grammar tests: a vocabulary of the 256 single bytes (so any text can be fed byte by
// byte) and whole-text matching.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar_matcher.h"
#include "grammar/json_schema.h"

namespace mkserve::grammar {

inline std::shared_ptr<const TokenVocabulary> ByteVocabulary() {
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
  return std::make_shared<TokenVocabulary>(bytes, std::vector<bool>(256, false));
}

inline std::shared_ptr<const CompiledGrammar> CompileSchema(const Json& schema) {
  JsonGrammarBuilder builder;
  int32_t root = builder.AddSchema(schema, "schema");
  return std::make_shared<CompiledGrammar>(std::move(builder).Finish(root), ByteVocabulary());
}

// Whether `text` is a complete string of the grammar.
inline bool Matches(std::shared_ptr<const CompiledGrammar> grammar, std::string_view text) {
  GrammarMatcher matcher(std::move(grammar));
  for (char c : text) {
    if (!matcher.Accept(static_cast<unsigned char>(c))) return false;
  }
  return matcher.can_end();
}

}  // namespace mkserve::grammar
