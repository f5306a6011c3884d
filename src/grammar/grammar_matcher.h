// GrammarMatcher: one generated sequence's progress through a compiled grammar, and the set of
// tokens it may sample next as a bitmask over the whole vocabulary (bit id % 32 of word id / 32).
//
//   auto compiled = std::make_shared<CompiledGrammar>(std::move(grammar), vocabulary);
//   GrammarMatcher matcher(compiled);
//   matcher.FillMask(eos_ids, mask);   // before sampling
//   matcher.Accept(sampled_token);     // after it
//
// A token is allowed when its bytes (or, for a special token, its id) extend the text so far to a
// prefix of some string of the grammar. End tokens are allowed only once the text is complete.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "grammar/grammar.h"
#include "grammar/position_cache.h"
#include "grammar/stack_set.h"
#include "grammar/token_vocabulary.h"

namespace mkserve::grammar {

inline int32_t MaskWords(int32_t vocab_size) { return (vocab_size + 31) / 32; }
inline bool MaskAllows(std::span<const uint32_t> mask, int32_t id) {
  return (mask[id >> 5] >> (id & 31)) & 1u;
}

// A grammar ready to match against one vocabulary; shared by the siblings of a request.
struct CompiledGrammar {
  CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocabulary> vocabulary)
      : grammar(std::move(grammar)), vocabulary(std::move(vocabulary)) {}
  Grammar grammar;
  std::shared_ptr<const TokenVocabulary> vocabulary;
  mutable PositionCacheTable cache;  // positions past the prelude
};

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);

  // Advances by `token_id`; false (and no change) when the grammar does not allow it. End tokens
  // are not passed here: the caller checks can_end().
  bool Accept(int32_t token_id);
  // Whether the text so far is complete, so an end token may follow.
  bool can_end() const { return stacks_.can_end(); }

  // Writes the allowed-token bitmask. `mask` has at least MaskWords(vocabulary size) words (a
  // model may have more ids than its tokenizer); ids past the vocabulary are allowed only as end
  // tokens.
  void FillMask(std::span<const int32_t> end_token_ids, std::span<uint32_t> mask) const;

 private:
  std::shared_ptr<const PositionCache> CacheAt(int32_t position) const;
  std::shared_ptr<const PositionCache> CountedCacheAt(int32_t position, int32_t probe) const;

  std::shared_ptr<const CompiledGrammar> compiled_;
  StackSet stacks_;
};

// The verdicts for every ordinary token at `position`, ignoring what lies below it.
PositionCache BuildPositionCache(const Grammar& grammar, const TokenVocabulary& vocabulary,
                                 int32_t position);
// The same for `position` inside a round of counted loop `probe` (the loop's CountedLoop::probe,
// which has no bounds), with the rounds each accepted token begins.
PositionCache BuildCountedPositionCache(const Grammar& grammar, const TokenVocabulary& vocabulary,
                                        int32_t position, int32_t probe);

}  // namespace mkserve::grammar
