#include "engine/request_validation.h"

#include <cmath>
#include <string>

namespace mkserve {
namespace {

using std::to_string;

std::optional<std::string> ValidateSampling(const SamplingParams& p, int64_t vocab) {
  if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature)) {
    return "temperature must be >= 0, got " + to_string(p.temperature);
  }
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f))
    return "top_p must be in (0, 1], got " + to_string(p.top_p);
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f))
    return "min_p must be in [0, 1], got " + to_string(p.min_p);
  if (p.top_k < -1) return "top_k must be -1, 0 or positive, got " + to_string(p.top_k);
  if (!(p.repetition_penalty > 0.0f)) {
    return "repetition_penalty must be > 0, got " + to_string(p.repetition_penalty);
  }
  if (p.max_tokens < 0) return "max_tokens must be >= 0, got " + to_string(p.max_tokens);
  if (p.min_tokens < 0 || p.min_tokens > p.max_tokens) {
    return "min_tokens must be in [0, max_tokens], got " + to_string(p.min_tokens);
  }
  for (auto [id, bias] : p.logit_bias) {
    if (id < 0 || id >= vocab)
      return "logit_bias token id " + to_string(id) + " is not in the vocabulary";
  }
  for (int32_t id : p.stop_token_ids) {
    if (id < 0 || id >= vocab)
      return "stop_token_ids entry " + to_string(id) + " is not in the vocabulary";
  }
  for (const std::string& stop : p.stop) {
    if (stop.empty()) return "stop strings must not be empty";
  }
  return std::nullopt;
}

// A constrained output ends only with EOS or a stop token id, allowed once its text is complete.
std::optional<std::string> ValidateGrammar(const EngineRequest& request, int64_t vocab) {
  if (request.grammar->vocabulary->size() > vocab) {
    return "the output grammar's vocabulary has " + to_string(request.grammar->vocabulary->size()) +
           " tokens, more than the model's " + to_string(vocab);
  }
  const char* kConstrained =
      " cannot be combined with a constrained output (response_format or a "
      "forced tool call): ";
  if (request.sampling.ignore_eos) {
    return std::string("ignore_eos") + kConstrained + "the output could never end";
  }
  if (request.sampling.min_tokens > 0) {
    return std::string("min_tokens") + kConstrained + "the output ends where its grammar does";
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> ValidateRequest(const EngineRequest& request,
                                           const RequestLimits& limits) {
  const int64_t num_prompt = static_cast<int64_t>(request.prompt_token_ids.size());
  const int64_t vocab = limits.config->vocab_size;
  if (num_prompt == 0) return "the prompt is empty";
  if (request.n < 1) return "n must be >= 1, got " + to_string(request.n);
  for (int32_t id : request.prompt_token_ids) {
    if (id < 0 || id >= vocab) {
      return "prompt token id " + to_string(id) + " is outside the vocabulary [0, " +
             to_string(vocab) + ")";
    }
  }
  if (auto error = ValidateSampling(request.sampling, vocab)) return error;
  bool prompt_only = request.sampling.max_tokens == 0;
  if (num_prompt > limits.max_model_len || (num_prompt == limits.max_model_len && !prompt_only)) {
    return "the prompt has " + to_string(num_prompt) + " tokens but the context limit is " +
           to_string(limits.max_model_len) + " tokens, leaving no room to generate";
  }
  if (!request.sampling.stop.empty() && !limits.has_text_decoder) {
    return "stop strings need a text decoder, and this engine has none";
  }
  if (request.grammar) return ValidateGrammar(request, vocab);
  return std::nullopt;
}

SamplingParams SiblingParams(const EngineRequest& request, int32_t index, uint64_t random_seed,
                             const ModelConfig& config) {
  SamplingParams params = request.sampling;
  params.seed = request.sampling.seed ? *request.sampling.seed + index : random_seed;
  params.min_tokens_suppressed_ids = params.stop_token_ids;
  if (!params.ignore_eos) {
    params.min_tokens_suppressed_ids.insert(params.min_tokens_suppressed_ids.end(),
                                            config.eos_token_ids.begin(),
                                            config.eos_token_ids.end());
  }
  if (index > 0) params.num_prompt_logprobs = -1;
  return params;
}

}  // namespace mkserve
