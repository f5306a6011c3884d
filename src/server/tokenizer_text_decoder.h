// Adapts src/tokenizer's IncrementalDetokenizer to the engine's TextDecoder. Special tokens are
// kept in the text: the Command-4 output parser needs <|END_THINKING|> and the other markers.
#pragma once

#include <memory>

#include "engine/text_decoder.h"
#include "tokenizer/tokenizer.h"

namespace mkserve::server {

class TokenizerTextDecoder : public TextDecoder {
 public:
  explicit TokenizerTextDecoder(std::shared_ptr<const tokenizer::Tokenizer> tokenizer)
      : tokenizer_(std::move(tokenizer)) {}

  std::unique_ptr<TokenTextStream> NewStream(
      std::span<const int32_t> prompt_token_ids) const override;

 private:
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
};

}  // namespace mkserve::server
