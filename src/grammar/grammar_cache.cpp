#include "grammar/grammar_cache.h"

namespace mkserve::grammar {

namespace {

template <typename T>
void Put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(value));
}

}  // namespace

std::string GrammarContent(const Grammar& grammar) {
  std::string out;
  Put(out, grammar.root());
  Put(out, grammar.num_rules());
  for (int32_t rule = 0; rule < grammar.num_rules(); ++rule) {
    Put(out, static_cast<int32_t>(grammar.alternatives(rule).size()));
    for (int32_t first : grammar.alternatives(rule)) Put(out, first);
  }
  Put(out, static_cast<int32_t>(grammar.elements().size()));
  for (const Element& element : grammar.elements()) {
    Put(out, static_cast<uint8_t>(element.kind));
    Put(out, element.value);
  }
  Put(out, grammar.num_counted_loops());
  for (int32_t i = 0; i < grammar.num_counted_loops(); ++i) {
    const CountedLoop& loop = grammar.counted_loop(i);
    for (int32_t field : {loop.rule, loop.min, loop.max, loop.probe}) Put(out, field);
  }
  Put(out, grammar.num_byte_sets());
  for (int32_t i = 0; i < grammar.num_byte_sets(); ++i) {
    const ByteSet& set = grammar.byte_set(i);
    for (int word = 0; word < 4; ++word) {
      uint64_t bits = 0;
      for (int b = 0; b < 64; ++b) bits |= static_cast<uint64_t>(set[word * 64 + b]) << b;
      Put(out, bits);
    }
  }
  return out;
}

GrammarCache::GrammarCache(std::shared_ptr<const TokenVocabulary> vocabulary, size_t max_grammars,
                           size_t max_positions)
    : vocabulary_(std::move(vocabulary)),
      max_grammars_(max_grammars),
      max_positions_(max_positions) {}

std::shared_ptr<const CompiledGrammar> GrammarCache::Get(Grammar grammar) {
  std::string content = GrammarContent(grammar);
  std::lock_guard lock(mutex_);
  if (auto it = by_content_.find(content); it != by_content_.end()) {
    entries_.splice(entries_.begin(), entries_, it->second);  // now the most recent
    return it->second->second;
  }
  auto compiled = std::make_shared<const CompiledGrammar>(std::move(grammar), vocabulary_);
  entries_.emplace_front(content, compiled);
  by_content_.emplace(std::move(content), entries_.begin());
  EvictLocked();
  return compiled;
}

size_t GrammarCache::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

// The least recently used go first; the newest grammar stays, whatever its size. A grammar's
// positions grow while requests use it, so the total is taken again at each Get.
void GrammarCache::EvictLocked() {
  size_t positions = 0;
  for (const Entry& entry : entries_) positions += entry.second->cache.size();
  while (entries_.size() > 1 && (entries_.size() > max_grammars_ || positions > max_positions_)) {
    positions -= entries_.back().second->cache.size();
    by_content_.erase(entries_.back().first);
    entries_.pop_back();
  }
}

}  // namespace mkserve::grammar
