// Decoders of tokenizer.json: ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace and
// Sequence. Each rewrites the list of token strings; the final text is their concatenation.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace mkserve::tokenizer {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void DecodeChain(std::vector<std::string>& tokens) const = 0;
};

// Null gives nullptr; an unknown type is an error naming it.
std::unique_ptr<Decoder> MakeDecoder(const nlohmann::json& json);

}  // namespace mkserve::tokenizer
