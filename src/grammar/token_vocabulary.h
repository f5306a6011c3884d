// TokenVocabulary: what each token id of the model spells, as the grammar matcher sees it: raw
// bytes for ordinary tokens (byte-level BPE: a token may end inside a UTF-8 character or a JSON
// escape), or "special" for control tokens, which a grammar allows only by id. Ordinary tokens are
// also kept sorted by their bytes, so a walk over the sorted list shares work between tokens with
// a common prefix (an implicit trie).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "grammar/position_cache.h"

namespace mkserve::grammar {

class TokenVocabulary {
 public:
  // `bytes[id]` is token id's text; `special[id]` marks control tokens. Empty ordinary tokens
  // (unused ids) are never allowed. Throws mkserve::Error when the sizes differ.
  TokenVocabulary(std::vector<std::string> bytes, std::vector<bool> special);

  int32_t size() const { return static_cast<int32_t>(bytes_.size()); }
  const std::string& bytes(int32_t id) const { return bytes_[id]; }
  bool is_special(int32_t id) const { return special_[id]; }
  // Ordinary non-empty tokens sorted by bytes.
  std::span<const int32_t> sorted_ids() const { return sorted_ids_; }

  // Token sets of JsonPrelude() positions, shared by every grammar built on the prelude.
  PositionCacheTable& prelude_cache() const { return prelude_cache_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<bool> special_;
  std::vector<int32_t> sorted_ids_;
  mutable PositionCacheTable prelude_cache_;
};

}  // namespace mkserve::grammar
