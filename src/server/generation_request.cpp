#include "server/generation_request.h"

#include <algorithm>
#include <limits>

namespace mkserve::server {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

std::vector<std::string> ParseStop(const JsonFields& fields) {
  const Json* stop = fields.Get("stop");
  if (stop == nullptr) return {};
  if (stop->is_string()) {
    if (stop->get<std::string>().empty()) ThrowInvalid("stop", "stop strings must not be empty");
    return {stop->get<std::string>()};
  }
  if (!stop->is_array()) {
    ThrowInvalid("stop", "expected a string or an array of strings, got " + JsonTypeName(*stop));
  }
  std::vector<std::string> strings;
  for (size_t i = 0; i < stop->size(); ++i) {
    const Json& item = (*stop)[i];
    std::string param = "stop[" + std::to_string(i) + "]";
    if (!item.is_string()) ThrowInvalid(param, "expected a string, got " + JsonTypeName(item));
    if (item.get<std::string>().empty()) ThrowInvalid(param, "stop strings must not be empty");
    strings.push_back(item.get<std::string>());
  }
  return strings;
}

std::vector<int32_t> ParseTokenIdList(const JsonFields& fields, const std::string& name) {
  const Json* list = fields.Array(name);
  std::vector<int32_t> ids;
  if (list == nullptr) return ids;
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& item = (*list)[i];
    if (!item.is_number_integer() || item.get<int64_t>() < 0 || item.get<int64_t>() > kInt32Max) {
      ThrowInvalid(name + "[" + std::to_string(i) + "]", "expected a token id (integer >= 0)");
    }
    ids.push_back(item.get<int32_t>());
  }
  return ids;
}

std::vector<std::pair<int32_t, float>> ParseLogitBias(const JsonFields& fields) {
  const Json* bias = fields.Object("logit_bias");
  std::vector<std::pair<int32_t, float>> entries;
  if (bias == nullptr) return entries;
  for (const auto& [key, value] : bias->items()) {
    std::string param = "logit_bias." + key;
    // Plain decimal only: with " 5", "+5" or "05" two keys could name one token.
    const bool decimal =
        !key.empty() && key.size() <= 10 && (key.size() == 1 || key[0] != '0') &&
        std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
    const long long token_id = decimal ? std::stoll(key) : -1;
    if (token_id < 0 || token_id > kInt32Max) {
      ThrowInvalid(param,
                   "keys must be token ids: non-negative integers written in decimal as strings");
    }
    if (!value.is_number() || value.get<double>() < -kMaxLogitBias ||
        value.get<double>() > kMaxLogitBias) {
      ThrowInvalid(param, "bias must be a number between -100 and 100");
    }
    entries.emplace_back(static_cast<int32_t>(token_id), value.get<float>());
  }
  return entries;
}

void ParseStreamFields(const JsonFields& fields, GenerationRequest& request) {
  request.stream = fields.Bool("stream").value_or(false);
  const Json* options = fields.Object("stream_options");
  if (options == nullptr) return;
  JsonFields stream_options(*options, "stream_options");
  request.include_usage = stream_options.Bool("include_usage").value_or(false);
  if (!request.stream) {
    ThrowInvalid("stream_options", "only allowed when 'stream' is true");
  }
}

void ParseLengthFields(const JsonFields& fields, int64_t min_max_tokens,
                       GenerationRequest& request) {
  SamplingParams& sampling = request.sampling;
  // max_completion_tokens is the newer name; it wins when both are sent.
  std::optional<int64_t> max_tokens =
      fields.Integer("max_completion_tokens", min_max_tokens, kInt32Max);
  if (!max_tokens) max_tokens = fields.Integer("max_tokens", min_max_tokens, kInt32Max);
  request.has_max_tokens = max_tokens.has_value();
  if (max_tokens) sampling.max_tokens = static_cast<int32_t>(*max_tokens);
  sampling.min_tokens =
      static_cast<int32_t>(fields.Integer("min_tokens", 0, kInt32Max).value_or(0));
  if (request.has_max_tokens && sampling.min_tokens > sampling.max_tokens) {
    ThrowInvalid("min_tokens",
                 "must not exceed max_tokens (" + std::to_string(sampling.max_tokens) + ")");
  }
  sampling.ignore_eos = fields.Bool("ignore_eos").value_or(false);
  sampling.stop = ParseStop(fields);
  sampling.include_stop_str_in_output = fields.Bool("include_stop_str_in_output").value_or(false);
  sampling.stop_token_ids = ParseTokenIdList(fields, "stop_token_ids");
}

void ParseSamplingFields(const JsonFields& fields, SamplingParams& sampling) {
  sampling.temperature = static_cast<float>(fields.Number("temperature", 0.0, 2.0).value_or(1.0));
  sampling.top_p = static_cast<float>(fields.Number("top_p", 0.0, 1.0).value_or(1.0));
  if (sampling.top_p <= 0.0f) ThrowInvalid("top_p", "must be greater than 0 and at most 1");
  sampling.top_k = static_cast<int32_t>(fields.Integer("top_k", -1, kInt32Max).value_or(0));
  sampling.min_p = static_cast<float>(fields.Number("min_p", 0.0, 1.0).value_or(0.0));
  if (std::optional<int64_t> seed = fields.Integer("seed", std::numeric_limits<int64_t>::min(),
                                                   std::numeric_limits<int64_t>::max())) {
    sampling.seed = static_cast<uint64_t>(*seed);
  }
  sampling.presence_penalty =
      static_cast<float>(fields.Number("presence_penalty", -2.0, 2.0).value_or(0.0));
  sampling.frequency_penalty =
      static_cast<float>(fields.Number("frequency_penalty", -2.0, 2.0).value_or(0.0));
  sampling.repetition_penalty =
      static_cast<float>(fields.Number("repetition_penalty", 0.0, 10.0).value_or(1.0));
  if (sampling.repetition_penalty <= 0.0f) {
    ThrowInvalid("repetition_penalty", "must be greater than 0");
  }
  sampling.logit_bias = ParseLogitBias(fields);
}

// vLLM's extensions to the request that change the output and that mkserve does not implement
// are refused by name, as the OpenAI fields it cannot honour are (chat_request.cpp): a client
// written for vLLM must not get unconstrained or differently cut text without knowing. A value
// that asks for what mkserve does anyway (use_beam_search false) is accepted; vLLM extensions
// that are implemented (top_k, min_p, repetition_penalty, min_tokens, ignore_eos,
// stop_token_ids, include_stop_str_in_output, skip_special_tokens, return_tokens_as_token_ids,
// chat_template_kwargs, add_special_tokens, documents) are parsed with the other fields.
void RejectUnhonouredVllmFields(const JsonFields& fields) {
  struct Refusal {
    const char* field;
    const char* why;
  };
  constexpr const char* kGuided =
      "vLLM's guided decoding is not supported; constrain the output with 'response_format' "
      "(json_object or json_schema) or with 'tools' and 'tool_choice'";
  constexpr const char* kUseLogitBias =
      "is not supported; 'logit_bias' can ban or favour token ids";
  // Refused whenever present (null counts as absent).
  constexpr Refusal kPresent[] = {
      {"guided_json", kGuided},
      {"guided_regex", kGuided},
      {"guided_choice", kGuided},
      {"guided_grammar", kGuided},
      {"structural_tag", kGuided},
      {"allowed_token_ids", kUseLogitBias},
      {"bad_words", kUseLogitBias},
      {"truncate_prompt_tokens",
       "prompts are never truncated: one over the context is refused whole"},
      {"prompt_logprobs",
       "is not supported; /v1/completions scores a prompt with 'echo': true and 'logprobs'"},
      {"logits_processors", "custom logits processors are not supported"},
  };
  // Switches refused when true; false is what mkserve does.
  constexpr Refusal kWhenTrue[] = {
      {"use_beam_search", "beam search is not supported; send false or leave it out"},
  };
  for (const Refusal& r : kPresent) {
    if (fields.Get(r.field) != nullptr) ThrowInvalid(r.field, r.why);
  }
  for (const Refusal& r : kWhenTrue) {
    if (fields.Bool(r.field).value_or(false)) ThrowInvalid(r.field, r.why);
  }
}

}  // namespace

GenerationRequest ParseGenerationFields(const JsonFields& fields, int64_t min_max_tokens) {
  GenerationRequest request;
  request.model = fields.String("model").value_or("");
  request.user = fields.String("user").value_or("");
  request.n = static_cast<int32_t>(fields.Integer("n", 1, kMaxChoices).value_or(1));
  RejectUnhonouredVllmFields(fields);
  request.skip_special_tokens = fields.Bool("skip_special_tokens").value_or(false);
  request.tokens_as_ids = fields.Bool("return_tokens_as_token_ids").value_or(false);
  ParseSamplingFields(fields, request.sampling);
  ParseLengthFields(fields, min_max_tokens, request);
  ParseStreamFields(fields, request);
  return request;
}

}  // namespace mkserve::server
