#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/utf8.h"
#include "tokenizer/json_util.h"

namespace mkserve::tokenizer {

namespace {

constexpr int32_t kNoId = -1;
constexpr char32_t kCharTableSize = 0x10000;  // the BMP: every char of common vocabularies

const std::string kEmpty;

}  // namespace

BpeModel::BpeModel() = default;

std::unique_ptr<BpeModel> BpeModel::FromJson(const nlohmann::json& model) {
  std::string type = model.is_object() && model.contains("type") ? model["type"].get<std::string>()
                                                                 : std::string("BPE");
  if (type != "BPE") throw Error("unsupported model type '" + type + "' (only BPE is supported)");
  if (model.contains("dropout") && !model["dropout"].is_null() &&
      model["dropout"].get<double>() != 0.0) {
    throw Error("BPE model: dropout is not supported (it makes encoding random)");
  }
  std::unique_ptr<BpeModel> bpe(new BpeModel());
  const std::string what = "BPE model";
  if (!model.contains("vocab") || !model["vocab"].is_object()) {
    throw Error(what + ": \"vocab\" must be an object of token -> id");
  }
  bpe->LoadVocab(model["vocab"]);
  if (model.contains("unk_token") && !model["unk_token"].is_null()) {
    bpe->unk_token_ = RequireString(model, "unk_token", what);
  }
  if (model.contains("continuing_subword_prefix") &&
      !model["continuing_subword_prefix"].is_null()) {
    bpe->continuing_subword_prefix_ = RequireString(model, "continuing_subword_prefix", what);
  }
  if (model.contains("end_of_word_suffix") && !model["end_of_word_suffix"].is_null()) {
    bpe->end_of_word_suffix_ = RequireString(model, "end_of_word_suffix", what);
  }
  bpe->byte_fallback_ = OptionalBool(model, "byte_fallback", false, what);
  bpe->fuse_unk_ = OptionalBool(model, "fuse_unk", false, what);
  bpe->ignore_merges_ = OptionalBool(model, "ignore_merges", false, what);
  bpe->LoadMerges(model.contains("merges") ? model["merges"] : nlohmann::json::array());
  bpe->BuildCharTable();
  return bpe;
}

void BpeModel::LoadVocab(const nlohmann::json& vocab) {
  vocab_.reserve(vocab.size());
  int32_t max_id = -1;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const int32_t id = RequireTokenId(it.value(), "BPE model: vocab entry '" + it.key() + "'");
    vocab_.emplace(it.key(), id);
    max_id = std::max(max_id, id);
  }
  id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
  for (const auto& [token, id] : vocab_) id_to_token_[id] = token;
}

namespace {

// A merge is "left right" (tokenizers < 0.20) or ["left", "right"].
std::pair<std::string, std::string> ParseMerge(const nlohmann::json& merge, size_t rank) {
  if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
    return {merge[0].get<std::string>(), merge[1].get<std::string>()};
  }
  if (merge.is_string()) {
    const std::string& text = merge.get_ref<const std::string&>();
    size_t space = text.find(' ', 1);
    if (space != std::string::npos) return {text.substr(0, space), text.substr(space + 1)};
  }
  throw Error("BPE model: merge #" + std::to_string(rank) + " is malformed: " + merge.dump());
}

}  // namespace

void BpeModel::LoadMerges(const nlohmann::json& merges) {
  if (!merges.is_array()) throw Error("BPE model: \"merges\" must be an array");
  merges_ = std::make_unique<MergeTable>(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    auto [left, right] = ParseMerge(merges[rank], rank);
    auto left_id = TokenToId(left), right_id = TokenToId(right);
    if (!left_id || !right_id) {
      throw Error("BPE model: merge #" + std::to_string(rank) + " '" + left + " " + right +
                  "' uses a token that is not in the vocab");
    }
    std::string merged =
        left + right.substr(std::min(right.size(), continuing_subword_prefix_.size()));
    auto merged_id = TokenToId(merged);
    if (!merged_id) {
      throw Error("BPE model: merge #" + std::to_string(rank) + " makes '" + merged +
                  "', which is not in the vocab");
    }
    merges_->Insert(*left_id, *right_id, {static_cast<int32_t>(rank), *merged_id});
  }
}

void BpeModel::BuildCharTable() {
  char_ids_.assign(kCharTableSize, kNoId);
  for (const auto& [token, id] : vocab_) {
    size_t pos = 0;
    if (token.empty()) continue;
    char32_t c = NextCodePoint(token, pos);
    if (pos == token.size() && c < kCharTableSize) char_ids_[c] = id;
  }
  byte_ids_.assign(256, kNoId);
  if (!byte_fallback_) return;
  for (int byte = 0; byte < 256; ++byte) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", byte);
    if (auto id = TokenToId(name)) byte_ids_[byte] = *id;
  }
}

std::optional<int32_t> BpeModel::TokenToId(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string& BpeModel::IdToToken(int32_t id) const {
  if (id < 0 || id >= id_limit()) return kEmpty;
  return id_to_token_[id];
}

int32_t BpeModel::UnkId() const {
  auto id = TokenToId(*unk_token_);
  if (!id) throw Error("BPE model: unk_token '" + *unk_token_ + "' is not in the vocab");
  return *id;
}

}  // namespace mkserve::tokenizer
