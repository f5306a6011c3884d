// Adapts src/tokenizer's IncrementalDetokenizer to the engine's TextDecoder. Special tokens are
// kept in the text unless a request hides them (skip_special_tokens); chat requests never hide
// the markers their output parser reads (<|END_THINKING|> and the others). Special tokens and
// the tokens whose text is one of `markers` (chat's, some of which North's tokenizer does not
// mark special) are whole tokens to the stop checker: a stop string never cuts one in two.
#pragma once

#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "engine/text_decoder.h"
#include "tokenizer/tokenizer.h"

namespace mkserve::server {

class TokenizerTextDecoder : public TextDecoder {
 public:
  TokenizerTextDecoder(std::shared_ptr<const tokenizer::Tokenizer> tokenizer,
                       std::span<const std::string_view> markers);

  std::unique_ptr<TokenTextStream> NewStream(
      std::span<const int32_t> prompt_token_ids,
      std::shared_ptr<const HiddenTokens> hidden) const override;

 private:
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
  std::shared_ptr<const std::vector<bool>> whole_;  // by id
};

// What skip_special_tokens leaves out: the tokenizer's special tokens, except those whose text
// is one of `kept`.
std::shared_ptr<const HiddenTokens> HiddenSpecialTokens(const tokenizer::Tokenizer& tokenizer,
                                                        std::span<const std::string_view> kept);

}  // namespace mkserve::server
