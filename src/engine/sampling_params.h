// SamplingParams: how one request picks its next token. One semantics for every backend
// (the CPU sampler in sampler.h is its definition; GPU samplers must match it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mkserve {

struct SamplingParams {
  float temperature = 1.0f;  // 0 means greedy
  int32_t top_k = 0;         // 0 or -1: disabled
  float top_p = 1.0f;
  float min_p = 0.0f;
  std::optional<uint64_t> seed;  // same request + same seed = same tokens, whatever its batch slot
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;
  std::vector<std::pair<int32_t, float>> logit_bias;  // token id -> added to its logit
  int32_t num_logprobs = -1;         // -1: none; k >= 0: the sampled token's logprob plus top k
  int32_t num_prompt_logprobs = -1;  // -1: none; k >= 0: prompt tokens' logprobs plus top k

  int32_t max_tokens = 16;
  int32_t min_tokens = 0;
  bool ignore_eos = false;
  std::vector<std::string> stop;
  bool include_stop_str_in_output = false;  // a matched stop string ends the text, not cut off
  std::vector<int32_t> stop_token_ids;
  // Filled by the engine, not the client: EOS (unless ignore_eos) and stop_token_ids, whose
  // logits the sampler masks while fewer than min_tokens tokens have been generated (as vLLM).
  std::vector<int32_t> min_tokens_suppressed_ids;

  bool is_greedy() const { return temperature <= 0.0f; }
};

}  // namespace mkserve
