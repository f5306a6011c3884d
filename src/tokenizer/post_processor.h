// Post-processors of tokenizer.json: TemplateProcessing (single-sequence template), ByteLevel
// (nothing to do on ids), BertProcessing, RobertaProcessing and Sequence. They add special tokens
// around an encoding when the caller asks for special tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace mkserve::tokenizer {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void Process(std::vector<int32_t>& ids, bool add_special_tokens) const = 0;
};

// Null gives nullptr; an unknown type is an error naming it.
std::unique_ptr<PostProcessor> MakePostProcessor(const nlohmann::json& json);

// The template transformers builds from add_bos_token / add_eos_token: [bos] $A [eos].
std::unique_ptr<PostProcessor> MakeBosEosProcessor(std::optional<int32_t> bos_id,
                                                   std::optional<int32_t> eos_id);

}  // namespace mkserve::tokenizer
