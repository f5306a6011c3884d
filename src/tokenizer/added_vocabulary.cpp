#include "tokenizer/added_vocabulary.h"

#include <algorithm>

#include "common/utf8.h"
#include "tokenizer/unicode_properties.h"

namespace mkserve::tokenizer {

void AddedVocabulary::Matcher::Add(std::string_view pattern, int32_t token_index) {
  if (pattern.empty()) return;
  first_bytes_[static_cast<unsigned char>(pattern[0])] = true;
  int32_t node = 0;
  for (char c : pattern) {
    auto byte = static_cast<unsigned char>(c);
    auto& children = nodes_[node].children;
    auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(byte, int32_t{0}),
                               [](const auto& a, const auto& b) { return a.first < b.first; });
    if (it != children.end() && it->first == byte) {
      node = it->second;
      continue;
    }
    auto child = static_cast<int32_t>(nodes_.size());
    children.insert(it, {byte, child});
    nodes_.emplace_back();
    node = child;
  }
  // A duplicate content keeps its first token, like HF's map from content to id.
  if (nodes_[node].token_index < 0) nodes_[node].token_index = token_index;
}

std::pair<int32_t, size_t> AddedVocabulary::Matcher::LongestAt(std::string_view text,
                                                               size_t pos) const {
  std::pair<int32_t, size_t> best{-1, 0};
  if (!first_bytes_[static_cast<unsigned char>(text[pos])]) return best;
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    auto byte = static_cast<unsigned char>(text[i]);
    const auto& children = nodes_[node].children;
    auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(byte, int32_t{0}),
                               [](const auto& a, const auto& b) { return a.first < b.first; });
    if (it == children.end() || it->first != byte) break;
    node = it->second;
    if (nodes_[node].token_index >= 0) best = {nodes_[node].token_index, i + 1 - pos};
  }
  return best;
}

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer* normalizer)
    : tokens_(std::move(tokens)) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const AddedToken& token = tokens_[i];
    index_by_id_.emplace(token.id, i);
    index_by_content_.emplace(token.content, i);
    if (!token.normalized) {
      raw_matcher_.Add(token.content, static_cast<int32_t>(i));
    } else {
      std::string pattern = normalizer ? normalizer->Normalize(token.content) : token.content;
      normalized_matcher_.Add(pattern, static_cast<int32_t>(i));
    }
  }
}

const AddedToken* AddedVocabulary::FindById(int32_t id) const {
  auto it = index_by_id_.find(id);
  return it == index_by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedVocabulary::FindByContent(std::string_view content) const {
  auto it = index_by_content_.find(content);
  return it == index_by_content_.end() ? nullptr : &tokens_[it->second];
}

namespace {

char32_t LastCodePoint(std::string_view text) {
  size_t start = text.size() - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  return NextCodePoint(text, start);
}

// Start of the whitespace run that ends `text` (text.size() when there is none).
size_t TrailingSpaceStart(std::string_view text) {
  size_t end = text.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    size_t pos = start;
    if (!IsWhitespace(NextCodePoint(text, pos))) break;
    end = start;
  }
  return end;
}

// Length of the whitespace run that starts `text`.
size_t LeadingSpaceLength(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t next = pos;
    if (!IsWhitespace(NextCodePoint(text, next))) break;
    pos = next;
  }
  return pos;
}

}  // namespace

std::vector<AddedVocabulary::Match> AddedVocabulary::FindMatches(std::string_view text,
                                                                 const Matcher& matcher) const {
  std::vector<Match> matches;
  size_t previous_end = 0;
  for (size_t pos = 0; pos < text.size();) {
    auto [index, length] = matcher.LongestAt(text, pos);
    if (index < 0) {
      ++pos;
      continue;
    }
    size_t begin = pos, end = pos + length;
    pos = end;
    const AddedToken& token = tokens_[index];
    if (token.single_word) {
      bool word_before = begin > 0 && IsWordChar(LastCodePoint(text.substr(0, begin)));
      size_t after = end;
      bool word_after = end < text.size() && IsWordChar(NextCodePoint(text, after));
      if (word_before || word_after) continue;
    }
    if (token.lstrip) begin = std::max(TrailingSpaceStart(text.substr(0, begin)), previous_end);
    if (token.rstrip) end += LeadingSpaceLength(text.substr(end));
    matches.push_back({index, begin, end});
    previous_end = end;
    pos = std::max(pos, end);
  }
  return matches;
}

void AddedVocabulary::SplitWith(const Segment& segment, const Matcher& matcher,
                                std::vector<Segment>& out) const {
  std::string_view text = segment.text;
  size_t previous = 0;
  auto emit_text = [&](size_t begin, size_t end) {
    if (end > begin) {
      out.push_back(
          {std::string(text.substr(begin, end - begin)), -1, segment.at_start && begin == 0});
    }
  };
  for (const Match& match : matcher.empty() ? std::vector<Match>{} : FindMatches(text, matcher)) {
    emit_text(previous, match.begin);
    out.push_back({std::string(text.substr(match.begin, match.end - match.begin)),
                   tokens_[match.token_index].id, false});
    previous = match.end;
  }
  emit_text(previous, text.size());
}

std::vector<Segment> AddedVocabulary::Split(std::string_view text,
                                            const Normalizer* normalizer) const {
  std::vector<Segment> raw;
  SplitWith({std::string(text), -1, true}, raw_matcher_, raw);
  std::vector<Segment> out;
  out.reserve(raw.size());
  for (Segment& segment : raw) {
    if (segment.added_id >= 0) {
      out.push_back(std::move(segment));
      continue;
    }
    if (normalizer) segment.text = normalizer->Normalize(segment.text);
    SplitWith(segment, normalized_matcher_, out);
  }
  return out;
}

}  // namespace mkserve::tokenizer
