#include "server/tokenizer_text_decoder.h"

#include <algorithm>

#include "tokenizer/incremental_detokenizer.h"

namespace mkserve::server {
namespace {

class DetokenizerStream : public TokenTextStream {
 public:
  DetokenizerStream(std::shared_ptr<const tokenizer::Tokenizer> tokenizer,
                    std::shared_ptr<const std::vector<bool>> whole,
                    std::shared_ptr<const HiddenTokens> hidden)
      : tokenizer_(std::move(tokenizer)),
        whole_(std::move(whole)),
        hidden_(std::move(hidden)),
        detokenizer_(*tokenizer_, /*skip_special_tokens=*/false) {}

  // A model's vocabulary may be larger than its tokenizer's (padded embedding rows); such ids
  // carry no text, as HF tokenizers skip them when decoding. A hidden id is never appended,
  // which decodes the rest exactly as Decode with it skipped would. A whole token's text ends
  // the delta (after any held-back bytes it releases).
  TokenText Append(int32_t token_id) override {
    if (token_id < 0 || token_id >= tokenizer_->vocab_size()) return {};
    if (IsHidden(hidden_.get(), token_id)) return {};
    TokenText out{detokenizer_.Next(token_id)};
    if ((*whole_)[token_id]) {
      const std::string text = tokenizer_->IdToToken(token_id);
      if (out.text.ends_with(text)) out.whole_bytes = text.size();
    }
    return out;
  }
  std::string Flush() override { return detokenizer_.Flush(); }

 private:
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;  // keeps the detokenizer's target alive
  std::shared_ptr<const std::vector<bool>> whole_;
  std::shared_ptr<const HiddenTokens> hidden_;
  tokenizer::IncrementalDetokenizer detokenizer_;
};

}  // namespace

TokenizerTextDecoder::TokenizerTextDecoder(std::shared_ptr<const tokenizer::Tokenizer> tokenizer,
                                           std::span<const std::string_view> markers)
    : tokenizer_(std::move(tokenizer)) {
  auto whole = std::make_shared<std::vector<bool>>(tokenizer_->vocab_size(), false);
  for (std::string_view marker : markers) {
    std::optional<int32_t> id = tokenizer_->TokenToId(marker);
    if (id && *id >= 0 && *id < tokenizer_->vocab_size()) (*whole)[*id] = true;
  }
  for (int32_t id = 0; id < tokenizer_->vocab_size(); ++id) {
    if (tokenizer_->IsSpecial(id)) (*whole)[id] = true;
  }
  whole_ = std::move(whole);
}

// The prompt is not needed as context: byte-level decoding has no first-token rules.
std::unique_ptr<TokenTextStream> TokenizerTextDecoder::NewStream(
    std::span<const int32_t>, std::shared_ptr<const HiddenTokens> hidden) const {
  return std::make_unique<DetokenizerStream>(tokenizer_, whole_, std::move(hidden));
}

std::shared_ptr<const HiddenTokens> HiddenSpecialTokens(const tokenizer::Tokenizer& tokenizer,
                                                        std::span<const std::string_view> kept) {
  auto hidden = std::make_shared<HiddenTokens>(tokenizer.vocab_size(), false);
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (!tokenizer.IsSpecial(id)) continue;
    const std::string text = tokenizer.IdToToken(id);
    (*hidden)[id] = std::find(kept.begin(), kept.end(), text) == kept.end();
  }
  return hidden;
}

}  // namespace mkserve::server
