// Pre-tokenizers of tokenizer.json: Split, ByteLevel, Digits, Metaspace, Whitespace,
// WhitespaceSplit, Punctuation and Sequence. They cut normalized text into the words the model
// encodes one at a time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace mkserve::tokenizer {

struct PreToken {
  std::string text;
  // True when the piece starts at offset 0 of the input (Metaspace's prepend_scheme "first").
  bool at_start = false;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` by their sub-pieces, dropping empty ones.
  virtual void PreTokenize(std::vector<PreToken>& pieces) const = 0;
};

// Builds the pre-tokenizer described by `json`; null gives nullptr. An unknown type is an error
// naming it.
std::unique_ptr<PreTokenizer> MakePreTokenizer(const nlohmann::json& json);

}  // namespace mkserve::tokenizer
