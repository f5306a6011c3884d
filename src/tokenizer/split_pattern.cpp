#include "tokenizer/split_pattern.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/utf8.h"

namespace mkserve::tokenizer {

SplitBehavior ParseSplitBehavior(const std::string& name) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  throw Error("unsupported split behavior '" + name + "'");
}

Pattern Pattern::FromJson(const nlohmann::json& json, const std::string& owner) {
  if (json.is_object() && json.contains("String") && json["String"].is_string()) {
    return Literal(json["String"].get<std::string>());
  }
  if (json.is_object() && json.contains("Regex") && json["Regex"].is_string()) {
    return FromRegex(json["Regex"].get<std::string>());
  }
  throw Error(owner + ": pattern must be {\"String\": ...} or {\"Regex\": ...}, got " +
              json.dump());
}

Pattern Pattern::Literal(std::string literal) {
  Pattern pattern;
  pattern.literal_ = std::move(literal);
  return pattern;
}

Pattern Pattern::FromRegex(std::string_view regex) {
  Pattern pattern;
  pattern.regex_ = std::make_shared<const Regex>(regex);
  return pattern;
}

Pattern Pattern::CodePoints(std::function<bool(char32_t)> predicate) {
  Pattern pattern;
  pattern.predicate_ = std::move(predicate);
  return pattern;
}

std::vector<Span> Pattern::FindAll(std::string_view text) const {
  if (regex_) return regex_->FindAll(text);
  std::vector<Span> matches;
  if (predicate_) {
    for (size_t pos = 0; pos < text.size();) {
      size_t begin = pos;
      if (predicate_(NextCodePoint(text, pos))) matches.push_back({begin, pos});
    }
    return matches;
  }
  if (literal_.empty()) return matches;
  for (size_t pos = text.find(literal_); pos != std::string_view::npos;
       pos = text.find(literal_, pos + literal_.size())) {
    matches.push_back({pos, pos + literal_.size()});
  }
  return matches;
}

std::vector<MatchSpan> Pattern::Cover(std::string_view text, bool invert) const {
  std::vector<MatchSpan> cover;
  if (text.empty()) return {{{0, 0}, invert}};
  size_t previous = 0;
  for (Span match : FindAll(text)) {
    if (match.begin > previous) cover.push_back({{previous, match.begin}, invert});
    cover.push_back({match, !invert});
    previous = match.end;
  }
  if (previous < text.size()) cover.push_back({{previous, text.size()}, invert});
  return cover;
}

namespace {

// Glues each match to the neighbour on one side; used for both merge directions.
std::vector<Span> MergeMatches(const std::vector<MatchSpan>& cover, bool with_previous) {
  std::vector<Span> pieces;
  bool previous_match = false;
  auto visit = [&](const MatchSpan& piece) {
    if (piece.is_match && !previous_match && !pieces.empty()) {
      if (with_previous) {
        pieces.back().end = piece.span.end;
      } else {
        pieces.back().begin = piece.span.begin;
      }
    } else {
      pieces.push_back(piece.span);
    }
    previous_match = piece.is_match;
  };
  if (with_previous) {
    std::for_each(cover.begin(), cover.end(), visit);
  } else {
    std::for_each(cover.rbegin(), cover.rend(), visit);
    std::reverse(pieces.begin(), pieces.end());
  }
  return pieces;
}

std::vector<Span> MergeContiguous(const std::vector<MatchSpan>& cover) {
  std::vector<Span> pieces;
  bool previous_match = false;
  for (const MatchSpan& piece : cover) {
    if (piece.is_match == previous_match && !pieces.empty()) {
      pieces.back().end = piece.span.end;
    } else {
      pieces.push_back(piece.span);
    }
    previous_match = piece.is_match;
  }
  return pieces;
}

}  // namespace

std::vector<Span> ApplySplitBehavior(std::vector<MatchSpan> cover, SplitBehavior behavior) {
  std::vector<Span> pieces;
  switch (behavior) {
    case SplitBehavior::kRemoved:
      for (const MatchSpan& piece : cover) {
        if (!piece.is_match) pieces.push_back(piece.span);
      }
      break;
    case SplitBehavior::kIsolated:
      for (const MatchSpan& piece : cover) pieces.push_back(piece.span);
      break;
    case SplitBehavior::kMergedWithPrevious:
      pieces = MergeMatches(cover, /*with_previous=*/true);
      break;
    case SplitBehavior::kMergedWithNext:
      pieces = MergeMatches(cover, /*with_previous=*/false);
      break;
    case SplitBehavior::kContiguous:
      pieces = MergeContiguous(cover);
      break;
  }
  std::erase_if(pieces, [](Span span) { return span.end == span.begin; });
  return pieces;
}

std::string ReplaceAll(const Pattern& pattern, std::string_view text, std::string_view content) {
  std::string out;
  size_t previous = 0;
  for (Span match : pattern.FindAll(text)) {
    out.append(text.substr(previous, match.begin - previous));
    out.append(content);
    previous = match.end;
  }
  out.append(text.substr(previous));
  return out;
}

}  // namespace mkserve::tokenizer
