// The BPE model of tokenizer.json: vocabulary, ranked merges, byte fallback, unk handling,
// ignore_merges and the continuing-subword prefix / end-of-word suffix. Tokenize() is const and
// thread-safe; repeated words are served from a shared cache.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/merge_table.h"
#include "tokenizer/word_cache.h"

namespace mkserve::tokenizer {

class BpeModel {
 public:
  // Parses the "model" object; any type but BPE is an error naming it.
  static std::unique_ptr<BpeModel> FromJson(const nlohmann::json& model);

  // Appends the ids of one pre-tokenized word to `out`.
  void Tokenize(std::string_view word, std::vector<int32_t>& out) const;

  std::optional<int32_t> TokenToId(std::string_view token) const;
  // Empty when `id` has no vocabulary entry.
  const std::string& IdToToken(int32_t id) const;
  // One past the largest id in the vocabulary.
  int32_t id_limit() const { return static_cast<int32_t>(id_to_token_.size()); }

 private:
  BpeModel();
  void LoadVocab(const nlohmann::json& vocab);
  void LoadMerges(const nlohmann::json& merges);
  void BuildCharTable();
  void InitialSymbols(std::string_view word, std::vector<int32_t>& ids) const;
  void MergeSymbols(std::vector<int32_t>& ids) const;
  int32_t SymbolId(std::string_view word, size_t begin, size_t end) const;
  int32_t UnkId() const;

  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> vocab_;
  std::vector<std::string> id_to_token_;
  std::unique_ptr<MergeTable> merges_;
  std::vector<int32_t> char_ids_;  // code point < 0x10000 -> id of its one-character token, or -1
  std::vector<int32_t> byte_ids_;  // byte -> id of "<0xXX>" when byte_fallback, or -1
  std::optional<std::string> unk_token_;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  mutable WordCache cache_;
};

}  // namespace mkserve::tokenizer
