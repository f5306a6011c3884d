// GrammarCache: recent requests' compiled grammars, found by their content. Requests whose
// constraints compile to the same grammar (an application's one response_format or tool set, sent
// with every request) share one CompiledGrammar, so the token caches of its own positions (past
// the JSON prelude, 0.1-0.15 s each for 262K tokens, docs/performance.md) are built once instead
// of once per request. Thread-safe. It keeps the most recently used grammars while their cached
// positions total at most `max_positions` (each holds a vocabulary-wide bitmask: 32 KB for 262K
// tokens), and at most `max_grammars` of them.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "grammar/grammar_matcher.h"

namespace mkserve::grammar {

class GrammarCache {
 public:
  GrammarCache(std::shared_ptr<const TokenVocabulary> vocabulary, size_t max_grammars,
               size_t max_positions);

  // The compiled grammar of `grammar`: the one already kept for the same content, or a new one.
  std::shared_ptr<const CompiledGrammar> Get(Grammar grammar);
  size_t size() const;

 private:
  using Entry = std::pair<std::string, std::shared_ptr<const CompiledGrammar>>;
  void EvictLocked();

  std::shared_ptr<const TokenVocabulary> vocabulary_;
  size_t max_grammars_, max_positions_;
  mutable std::mutex mutex_;
  std::list<Entry> entries_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> by_content_;
};

// Every rule, element, byte set and the root of `grammar`, as bytes: equal for equal grammars.
std::string GrammarContent(const Grammar& grammar);

}  // namespace mkserve::grammar
