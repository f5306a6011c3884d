// Internal state of a Tokenizer, shared by the loader and the encode/decode code.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace mkserve::tokenizer {

struct Tokenizer::Impl {
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<BpeModel> model;
  std::unique_ptr<PostProcessor> post_processor;
  std::unique_ptr<Decoder> decoder;
  AddedVocabulary added;
  int32_t vocab_size = 0;
  std::optional<NamedToken> bos, eos, pad;
  std::optional<std::string> chat_template;
};

}  // namespace mkserve::tokenizer
