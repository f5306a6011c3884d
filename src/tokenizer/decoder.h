// Decoders of tokenizer.json: ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace and
// Sequence. Each rewrites the list of token strings; the final text is their concatenation.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace mkserve::tokenizer {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void DecodeChain(std::vector<std::string>& tokens) const = 0;
  // The bytes one vocabulary token stands for, before any UTF-8 check, where this decoder maps
  // tokens to bytes (ByteLevel, ByteFallback, a Sequence holding one); nullopt where it works on
  // text, or the token is not one it maps.
  virtual std::optional<std::string> TokenBytes(const std::string& token) const {
    (void)token;
    return std::nullopt;
  }
};

// Null gives nullptr; an unknown type is an error naming it.
std::unique_ptr<Decoder> MakeDecoder(const nlohmann::json& json);

}  // namespace mkserve::tokenizer
