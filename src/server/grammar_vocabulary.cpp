#include "server/grammar_vocabulary.h"

#include <string>
#include <vector>

#include "grammar/grammar_matcher.h"
#include "grammar/json_prelude.h"
#include "tokenizer/byte_level.h"

namespace mkserve::server {
namespace {

// Chat-format markers such as <|START_TEXT|>: North's are ordinary (not "special") added tokens,
// yet a grammar must place them only where it names them, never inside a JSON string.
bool IsControlMarker(const std::string& token) {
  return token.size() > 4 && token.starts_with("<|") && token.ends_with("|>");
}

}  // namespace

std::shared_ptr<const grammar::TokenVocabulary> BuildGrammarVocabulary(
    const tokenizer::Tokenizer& tokenizer) {
  const int32_t size = tokenizer.vocab_size();
  const tokenizer::ByteLevelMap& byte_level = tokenizer::ByteLevelMap::Get();
  std::vector<std::string> bytes(size);
  std::vector<bool> special(size, false);
  for (int32_t id = 0; id < size; ++id) {
    std::string token = tokenizer.IdToToken(id);
    special[id] = tokenizer.IsSpecial(id) || IsControlMarker(token);
    if (special[id] || token.empty()) {
      bytes[id] = token;
      continue;
    }
    std::optional<std::string> raw = byte_level.Decode(token);
    const int32_t ids[] = {id};
    bytes[id] = raw ? *raw : tokenizer.Decode(ids, /*skip_special_tokens=*/false);
  }
  return std::make_shared<const grammar::TokenVocabulary>(std::move(bytes), std::move(special));
}

void WarmJsonPreludeCaches(const grammar::TokenVocabulary& vocabulary) {
  const grammar::JsonPrelude& json = grammar::JsonPreludeGrammar();
  const grammar::Grammar& prelude = json.grammar;
  // The length-counted strings' characters take counted caches (their plain ones are never
  // asked for).
  std::vector<bool> in_code_points(prelude.prelude_size(), false);
  for (int32_t first : prelude.alternatives(json.rules.code_points)) {
    for (int32_t at = first; prelude.elements()[at].kind != grammar::Element::Kind::kEnd; ++at) {
      in_code_points[at] = true;
    }
  }
  for (int32_t position = 0; position < prelude.prelude_size(); ++position) {
    if (prelude.elements()[position].kind != grammar::Element::Kind::kBytes) continue;
    if (in_code_points[position]) {
      vocabulary.prelude_cache().Get(~position, [&] {
        return grammar::BuildCountedPositionCache(prelude, vocabulary, position,
                                                  json.rules.code_points_probe);
      });
    } else {
      vocabulary.prelude_cache().Get(
          position, [&] { return grammar::BuildPositionCache(prelude, vocabulary, position); });
    }
  }
}

}  // namespace mkserve::server
