// Normalizers of tokenizer.json: NFC, NFD, NFKC, NFKD, Lowercase, Replace, Prepend, Strip and
// Sequence. Each maps text to text; offsets are not tracked because mkserve never returns them.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace mkserve::tokenizer {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string Normalize(std::string_view text) const = 0;
};

// Builds the normalizer described by `json`; null gives nullptr. An unknown type is an error
// naming it.
std::unique_ptr<Normalizer> MakeNormalizer(const nlohmann::json& json);

}  // namespace mkserve::tokenizer
