#include "server/request_limits.h"

#include <algorithm>

#include "server/json_fields.h"

namespace mkserve::server {

void CheckTokenIds(const ServedModel& model, std::span<const int32_t> ids,
                   const std::string& param) {
  int32_t vocab_size = model.tokenizer->vocab_size();
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size) {
      ThrowInvalid(param + "[" + std::to_string(i) + "]", "token id " + std::to_string(ids[i]) +
                                                              " is outside the vocabulary (size " +
                                                              std::to_string(vocab_size) + ")");
    }
  }
}

void ApplyModelLimits(const ServedModel& model, int64_t prompt_tokens, const PromptFields& fields,
                      GenerationRequest& request) {
  SamplingParams& sampling = request.sampling;
  for (const auto& [token_id, bias] : sampling.logit_bias) {
    if (token_id >= model.tokenizer->vocab_size()) {
      ThrowInvalid("logit_bias." + std::to_string(token_id),
                   "token id is outside the vocabulary (size " +
                       std::to_string(model.tokenizer->vocab_size()) + ")");
    }
  }
  CheckTokenIds(model, sampling.stop_token_ids, "stop_token_ids");
  int64_t context = model.engine->max_model_len();
  // A prompt only scored (max_tokens 0, echo) may fill the whole context, as the engine allows.
  const bool prompt_only = request.has_max_tokens && sampling.max_tokens == 0;
  if (prompt_tokens > context || (prompt_tokens == context && !prompt_only)) {
    ThrowInvalid(fields.prompt, "the prompt is " + std::to_string(prompt_tokens) +
                                    " tokens, which leaves no room in the context of " +
                                    std::to_string(context) + " tokens");
  }
  int64_t room = context - prompt_tokens;
  if (!request.has_max_tokens && fields.default_to_context) {
    sampling.max_tokens = static_cast<int32_t>(std::min<int64_t>(room, INT32_MAX));
  }
  if (sampling.max_tokens > room) {
    ThrowInvalid(request.has_max_tokens ? fields.max_tokens : fields.prompt,
                 "the prompt (" + std::to_string(prompt_tokens) + " tokens) plus " +
                     fields.max_tokens + " (" + std::to_string(sampling.max_tokens) +
                     ") exceeds the context of " + std::to_string(context) + " tokens");
  }
}

}  // namespace mkserve::server
