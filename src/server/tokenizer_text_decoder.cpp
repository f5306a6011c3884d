#include "server/tokenizer_text_decoder.h"

#include "tokenizer/incremental_detokenizer.h"

namespace mkserve::server {
namespace {

class DetokenizerStream : public TokenTextStream {
 public:
  explicit DetokenizerStream(std::shared_ptr<const tokenizer::Tokenizer> tokenizer)
      : tokenizer_(std::move(tokenizer)),
        detokenizer_(*tokenizer_, /*skip_special_tokens=*/false) {}

  // A model's vocabulary may be larger than its tokenizer's (padded embedding rows); such ids
  // carry no text, as HF tokenizers skip them when decoding.
  std::string Append(int32_t token_id) override {
    if (token_id < 0 || token_id >= tokenizer_->vocab_size()) return {};
    return detokenizer_.Next(token_id);
  }
  std::string Flush() override { return detokenizer_.Flush(); }

 private:
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;  // keeps the detokenizer's target alive
  tokenizer::IncrementalDetokenizer detokenizer_;
};

}  // namespace

// The prompt is not needed as context: byte-level decoding has no first-token rules.
std::unique_ptr<TokenTextStream> TokenizerTextDecoder::NewStream(std::span<const int32_t>) const {
  return std::make_unique<DetokenizerStream>(tokenizer_);
}

}  // namespace mkserve::server
