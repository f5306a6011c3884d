#include "grammar/grammar_matcher.h"

#include <algorithm>
#include <functional>
#include <string>
#include <string_view>

#include "common/error.h"

namespace mkserve::grammar {
namespace {

enum class Verdict { kRejected, kAccepted, kUndecided };

size_t LargestStack(const StackSet& set) {
  size_t largest = 0;
  for (const Stack& stack : set.stacks()) largest = std::max(largest, stack.size());
  return largest;
}

size_t SharedPrefix(const std::string& a, const std::string& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

// Runs the tokens `ids` (in the vocabulary's sorted order) from `start`, reusing the states of the
// prefix each shares with the previous token and skipping every token under a dead prefix.
// `on_verdict` hears of accepted and undecided tokens only, with the state the token's bytes
// reached (the accepted tokens' complete state) and the largest stack any state on the way held.
// `within_frame`: `start` is one element with nothing below it, so a parse that completes with
// bytes left over makes the verdict kUndecided (the real stack may continue it); otherwise
// `start` is the whole state and such a parse simply fails.
template <typename OnVerdict>
void WalkSorted(const Grammar& grammar, const TokenVocabulary& vocabulary,
                std::span<const int32_t> ids, const StackSet& start, bool within_frame,
                OnVerdict on_verdict) {
  std::vector<StackSet> level{start};
  std::vector<bool> ended_before{false};  // [k]: some parse completed after fewer than k bytes
  std::vector<size_t> peak{LargestStack(start)};  // [k]: the largest stack of level[0..k]
  size_t valid = 0;  // level[0..valid] hold the previous token's prefix
  const std::string* previous = nullptr;
  size_t i = 0;
  while (i < ids.size()) {
    const std::string& text = vocabulary.bytes(ids[i]);
    size_t k = previous ? std::min(valid, SharedPrefix(*previous, text)) : 0;
    if (level.size() < text.size() + 1) {
      level.resize(text.size() + 1);
      ended_before.resize(text.size() + 1);
      peak.resize(text.size() + 1);
    }
    while (k < text.size() && !level[k].empty()) {
      level[k + 1] = level[k].AdvanceByte(grammar, static_cast<unsigned char>(text[k]));
      ended_before[k + 1] = ended_before[k] || (within_frame && level[k].can_end());
      peak[k + 1] = std::max(peak[k], LargestStack(level[k + 1]));
      ++k;
    }
    valid = k;
    previous = &text;
    if (k == text.size() && !level[k].empty()) {
      on_verdict(ids[i], Verdict::kAccepted, level[k], peak[k]);
      ++i;
      continue;
    }
    // Every token that starts with text[0..k) ends the same way. They are contiguous in sorted
    // order; rejected ones need no callback, so their block is skipped by binary search.
    const Verdict verdict = ended_before[k] ? Verdict::kUndecided : Verdict::kRejected;
    const std::string_view prefix(text.data(), k);
    auto starts_with_prefix = [&](int32_t id) {
      return std::string_view(vocabulary.bytes(id)).substr(0, k) == prefix;
    };
    if (verdict == Verdict::kRejected) {
      i = std::partition_point(ids.begin() + i, ids.end(), starts_with_prefix) - ids.begin();
      continue;
    }
    for (; i < ids.size() && starts_with_prefix(ids[i]); ++i) {
      on_verdict(ids[i], verdict, level[k], peak[k]);
    }
  }
}

void SetBit(std::span<uint32_t> mask, int32_t id) { mask[id >> 5] |= 1u << (id & 31); }
void ClearBit(std::span<uint32_t> mask, int32_t id) { mask[id >> 5] &= ~(1u << (id & 31)); }

// The rounds a token began, from the state it reached under a probe counter at the bottom: the
// fewest over its parses that are still in the loop (0 when none is).
int32_t RoundsBegun(const StackSet& state) {
  int32_t fewest = -1;
  for (const Stack& stack : state.stacks()) {
    if (stack.empty() || !IsCounter(stack.front())) continue;
    const int32_t rounds = CounterRounds(stack.front());
    if (fewest < 0 || rounds < fewest) fewest = rounds;
  }
  return std::max(fewest, 0);
}

void NoteGrowth(PositionCache& cache, const StackSet& start, size_t peak) {
  const size_t base = LargestStack(start);
  if (peak > base) cache.max_growth = std::max(cache.max_growth, static_cast<int32_t>(peak - base));
}

}  // namespace

PositionCache BuildPositionCache(const Grammar& grammar, const TokenVocabulary& vocabulary,
                                 int32_t position) {
  PositionCache cache;
  cache.accepted.assign(MaskWords(vocabulary.size()), 0);
  const StackSet start = StackSet::At(grammar, position);
  WalkSorted(grammar, vocabulary, vocabulary.sorted_ids(), start,
             /*within_frame=*/true, [&](int32_t id, Verdict verdict, const StackSet&, size_t peak) {
               if (verdict == Verdict::kAccepted) {
                 SetBit(cache.accepted, id);
                 NoteGrowth(cache, start, peak);
               }
               if (verdict == Verdict::kUndecided) cache.undecided.push_back(id);
             });
  return cache;
}

PositionCache BuildCountedPositionCache(const Grammar& grammar, const TokenVocabulary& vocabulary,
                                        int32_t position, int32_t probe) {
  PositionCache cache;
  const int32_t words = MaskWords(vocabulary.size());
  cache.accepted.assign(words, 0);
  cache.within_rounds.assign(kRoundBuckets, std::vector<uint32_t>(words, 0));
  const StackSet start = StackSet::Of(Stack{CounterEntry(probe, 0), position});
  WalkSorted(grammar, vocabulary, vocabulary.sorted_ids(), start, /*within_frame=*/true,
             [&](int32_t id, Verdict verdict, const StackSet& state, size_t peak) {
               if (verdict == Verdict::kUndecided) cache.undecided.push_back(id);
               if (verdict != Verdict::kAccepted) return;
               SetBit(cache.accepted, id);
               NoteGrowth(cache, start, peak);
               const int32_t rounds = RoundsBegun(state);
               for (int32_t r = rounds; r < kRoundBuckets; ++r) SetBit(cache.within_rounds[r], id);
               if (rounds >= kRoundBuckets) cache.long_tokens.emplace_back(rounds, id);
             });
  std::sort(cache.long_tokens.begin(), cache.long_tokens.end(), std::greater<>());
  return cache;
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar)
    : compiled_(std::move(grammar)), stacks_(StackSet::Start(compiled_->grammar)) {}

bool GrammarMatcher::Accept(int32_t token_id) {
  const TokenVocabulary& vocabulary = *compiled_->vocabulary;
  if (token_id < 0 || token_id >= vocabulary.size()) return false;
  StackSet next;
  if (vocabulary.is_special(token_id)) {
    next = stacks_.AdvanceToken(compiled_->grammar, token_id);
  } else {
    const std::string& text = vocabulary.bytes(token_id);
    if (text.empty()) return false;
    next = stacks_;
    for (char c : text) {
      next = next.AdvanceByte(compiled_->grammar, static_cast<unsigned char>(c));
      if (next.empty()) break;
    }
  }
  if (next.empty()) return false;
  stacks_ = std::move(next);
  return true;
}

std::shared_ptr<const PositionCache> GrammarMatcher::CacheAt(int32_t position) const {
  const Grammar& grammar = compiled_->grammar;
  const TokenVocabulary& vocabulary = *compiled_->vocabulary;
  auto build = [&] { return BuildPositionCache(grammar, vocabulary, position); };
  if (position < grammar.prelude_size()) return vocabulary.prelude_cache().Get(position, build);
  return compiled_->cache.Get(position, build);
}

// Keyed ~position beside the plain caches. Every loop of one rule has the same probe rounds, so
// the prelude's loops share their counted caches across grammars as their plain ones.
std::shared_ptr<const PositionCache> GrammarMatcher::CountedCacheAt(int32_t position,
                                                                    int32_t probe) const {
  const Grammar& grammar = compiled_->grammar;
  const TokenVocabulary& vocabulary = *compiled_->vocabulary;
  auto build = [&] { return BuildCountedPositionCache(grammar, vocabulary, position, probe); };
  if (position < grammar.prelude_size()) return vocabulary.prelude_cache().Get(~position, build);
  return compiled_->cache.Get(~position, build);
}

void GrammarMatcher::FillMask(std::span<const int32_t> end_token_ids,
                              std::span<uint32_t> mask) const {
  const Grammar& grammar = compiled_->grammar;
  const TokenVocabulary& vocabulary = *compiled_->vocabulary;
  if (static_cast<int32_t>(mask.size()) < MaskWords(vocabulary.size())) {
    throw Error("grammar mask of " + std::to_string(mask.size()) + " words for a vocabulary of " +
                std::to_string(vocabulary.size()) + " tokens");
  }
  const int64_t mask_ids = static_cast<int64_t>(mask.size()) * 32;
  std::fill(mask.begin(), mask.end(), 0u);
  for (const Stack& stack : stacks_.stacks()) {
    if (stack.empty()) {
      for (int32_t id : end_token_ids) {
        if (id >= 0 && id < mask_ids) SetBit(mask, id);
      }
      continue;
    }
    const Element& top = grammar.elements()[stack.back()];
    if (top.kind == Element::Kind::kToken) {
      if (top.value >= 0 && top.value < vocabulary.size()) SetBit(mask, top.value);
      continue;
    }
    std::shared_ptr<const PositionCache> cache;
    const int32_t at = CounterBelowTop(stack);
    cache = at < 0
                ? CacheAt(stack.back())
                : CountedCacheAt(stack.back(), grammar.counted_loop(CounterLoop(stack[at])).probe);
    if (stack.size() + static_cast<size_t>(cache->max_growth) > kMaxStackDepth) {
      // Near the depth limit some accepted tokens' parses are cut off: try every token here.
      WalkSorted(grammar, vocabulary, vocabulary.sorted_ids(), StackSet::Of(stack),
                 /*within_frame=*/false, [&](int32_t id, Verdict verdict, const StackSet&, size_t) {
                   if (verdict == Verdict::kAccepted) SetBit(mask, id);
                 });
      continue;
    }
    if (at < 0) {
      for (size_t w = 0; w < cache->accepted.size(); ++w) mask[w] |= cache->accepted[w];
    } else {  // inside a counted loop's round: the tokens that begin no more rounds than it has
      const CountedLoop& loop = grammar.counted_loop(CounterLoop(stack[at]));
      const int32_t room = loop.max - CounterRounds(stack[at]);
      if (room < kRoundBuckets) {
        const std::vector<uint32_t>& within = cache->within_rounds[room];
        for (size_t w = 0; w < within.size(); ++w) mask[w] |= within[w];
      } else {
        std::vector<uint32_t> allowed = cache->accepted;  // other stacks may allow what this drops
        for (const auto& [rounds, id] : cache->long_tokens) {
          if (rounds <= room) break;
          ClearBit(allowed, id);
        }
        for (size_t w = 0; w < allowed.size(); ++w) mask[w] |= allowed[w];
      }
    }
    WalkSorted(grammar, vocabulary, cache->undecided, StackSet::Of(stack), /*within_frame=*/false,
               [&](int32_t id, Verdict verdict, const StackSet&, size_t) {
                 if (verdict == Verdict::kAccepted) SetBit(mask, id);
               });
  }
}

}  // namespace mkserve::grammar
