// Added tokens of tokenizer.json (special or not) and how they are cut out of the input before
// the normalizer and pre-tokenizer run: tokens with normalized=false match the raw text, the others
// match the normalized text; lstrip/rstrip absorb neighbouring whitespace and single_word
// rejects matches inside words. Matching is leftmost-longest, as HF's Aho-Corasick does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/normalizer.h"
#include "tokenizer/word_cache.h"

namespace mkserve::tokenizer {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool special = false;
};

// A piece of input: either an added token (id >= 0) or text still to be tokenized.
struct Segment {
  std::string text;
  int32_t added_id = -1;
  bool at_start = false;  // begins at offset 0 of the input
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer* normalizer);

  // Cuts added tokens out of `text`, normalizing the text between them.
  std::vector<Segment> Split(std::string_view text, const Normalizer* normalizer) const;

  const AddedToken* FindById(int32_t id) const;
  const AddedToken* FindByContent(std::string_view content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  // Byte trie over token contents, for leftmost-longest matching.
  class Matcher {
   public:
    void Add(std::string_view pattern, int32_t token_index);
    // Longest pattern starting at `pos`: {token index, length}, or {-1, 0}.
    std::pair<int32_t, size_t> LongestAt(std::string_view text, size_t pos) const;
    bool empty() const { return nodes_.size() <= 1; }

   private:
    struct Node {
      std::vector<std::pair<unsigned char, int32_t>> children;  // sorted by byte
      int32_t token_index = -1;
    };
    std::vector<Node> nodes_{Node{}};
    bool first_bytes_[256] = {};
  };

  struct Match {
    int32_t token_index;
    size_t begin, end;
  };
  std::vector<Match> FindMatches(std::string_view text, const Matcher& matcher) const;
  void SplitWith(const Segment& segment, const Matcher& matcher, std::vector<Segment>& out) const;

  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> index_by_id_;
  std::unordered_map<std::string, size_t, StringHash, std::equal_to<>> index_by_content_;
  Matcher raw_matcher_;         // normalized == false
  Matcher normalized_matcher_;  // normalized == true, matched on normalized text
};

}  // namespace mkserve::tokenizer
