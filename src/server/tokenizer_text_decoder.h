// Adapts src/tokenizer's IncrementalDetokenizer to the engine's TextDecoder. Special tokens are
// kept in the text unless a request hides them (skip_special_tokens); chat requests never hide
// the markers their output parser reads (<|END_THINKING|> and the others).
#pragma once

#include <memory>
#include <span>
#include <string_view>

#include "engine/text_decoder.h"
#include "tokenizer/tokenizer.h"

namespace mkserve::server {

class TokenizerTextDecoder : public TextDecoder {
 public:
  explicit TokenizerTextDecoder(std::shared_ptr<const tokenizer::Tokenizer> tokenizer)
      : tokenizer_(std::move(tokenizer)) {}

  std::unique_ptr<TokenTextStream> NewStream(
      std::span<const int32_t> prompt_token_ids,
      std::shared_ptr<const HiddenTokens> hidden) const override;

 private:
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
};

// What skip_special_tokens leaves out: the tokenizer's special tokens, except those whose text
// is one of `kept`.
std::shared_ptr<const HiddenTokens> HiddenSpecialTokens(const tokenizer::Tokenizer& tokenizer,
                                                        std::span<const std::string_view> kept);

}  // namespace mkserve::server
