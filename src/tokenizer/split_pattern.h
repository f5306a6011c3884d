// The HF `Pattern` (a literal string or a regex) and the split behaviours (Removed, Isolated,
// MergedWithPrevious, MergedWithNext, Contiguous) shared by the Split, Digits and Metaspace
// pre-tokenizers and by the Replace normalizer and decoder.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/regex.h"

namespace mkserve::tokenizer {

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

SplitBehavior ParseSplitBehavior(const std::string& name);

// A piece of text that either matched the pattern or lies between matches.
struct MatchSpan {
  Span span;
  bool is_match = false;
};

class Pattern {
 public:
  // `json` is {"String": "..."} or {"Regex": "..."}; anything else is an error naming `owner`.
  static Pattern FromJson(const nlohmann::json& json, const std::string& owner);
  static Pattern Literal(std::string literal);
  static Pattern FromRegex(std::string_view regex);
  // Matches every code point for which `predicate` holds, one code point per match.
  static Pattern CodePoints(std::function<bool(char32_t)> predicate);

  std::vector<Span> FindAll(std::string_view text) const;
  // Matches and the gaps between them, covering all of `text` (one non-match for empty text).
  std::vector<MatchSpan> Cover(std::string_view text, bool invert) const;

 private:
  std::string literal_;
  std::shared_ptr<const Regex> regex_;
  std::function<bool(char32_t)> predicate_;
};

// Applies `behavior` to the covering spans and returns the non-empty pieces to keep.
std::vector<Span> ApplySplitBehavior(std::vector<MatchSpan> cover, SplitBehavior behavior);

// Replaces every match of `pattern` in `text` by `content`.
std::string ReplaceAll(const Pattern& pattern, std::string_view text, std::string_view content);

}  // namespace mkserve::tokenizer
