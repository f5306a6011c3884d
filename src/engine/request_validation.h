// The engine's own checks of a submitted request. The server validates the OpenAI fields first and
// with better parameter names; these keep the engine safe whoever calls it.
#pragma once

#include <optional>
#include <string>

#include "engine/engine_events.h"
#include "model/model_config.h"

namespace mkserve {

struct RequestLimits {
  const ModelConfig* config = nullptr;
  int64_t max_model_len = 0;
  bool has_text_decoder = false;
};

// The reason `request` cannot run, naming the field and value, or nullopt when it can.
std::optional<std::string> ValidateRequest(const EngineRequest& request,
                                           const RequestLimits& limits);

// Sibling `index`'s sampling parameters: its seed (seed + index; `random_seed` when the client
// gave none), the ids masked before min_tokens, and prompt logprobs only on sibling 0.
SamplingParams SiblingParams(const EngineRequest& request, int32_t index, uint64_t random_seed,
                             const ModelConfig& config);

}  // namespace mkserve
