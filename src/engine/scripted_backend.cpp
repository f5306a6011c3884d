#include "engine/scripted_backend.h"

#include <algorithm>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "engine/backend_error.h"
#include "engine/sampler.h"

namespace mkserve {
namespace {

constexpr float kScriptedLogit = 8.0f;  // the scripted token gets almost all the mass

std::vector<int32_t> ReadTokens(const nlohmann::json& value, const EncodeFn& encode,
                                const std::string& where) {
  if (value.is_string()) {
    if (!encode) throw Error(where + " is text, but no tokenizer was given to encode it");
    return encode(value.get<std::string>());
  }
  if (value.is_array() && std::all_of(value.begin(), value.end(),
                                      [](const auto& v) { return v.is_number_integer(); })) {
    return value.get<std::vector<int32_t>>();
  }
  throw Error(where + " must be a string or an array of token ids");
}

void ReadFault(const nlohmann::json& rule, const std::string& where, ScriptRule& parsed) {
  const nlohmann::json& fault = rule["fault"];
  if (fault == "error") {
    parsed.fault = ScriptFault::kError;
  } else if (fault == "fatal") {
    parsed.fault = ScriptFault::kFatal;
  } else if (fault == "hang") {
    parsed.fault = ScriptFault::kHang;
    if (!rule.contains("hang_ms") || !rule["hang_ms"].is_number_integer() ||
        rule["hang_ms"].get<int64_t>() < 0) {
      throw Error(where + " is a hang fault: it needs \"hang_ms\", a number of milliseconds >= 0");
    }
    parsed.hang = std::chrono::milliseconds(rule["hang_ms"].get<int64_t>());
  } else {
    throw Error(where + ".fault must be \"error\", \"fatal\" or \"hang\", got " + fault.dump());
  }
}

}  // namespace

Script LoadScript(const std::filesystem::path& path, const EncodeFn& encode) {
  std::ifstream file(path);
  if (!file) throw Error("cannot open script " + path.string());
  nlohmann::json json = nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object() || !json.contains("rules") ||
      !json["rules"].is_array()) {
    throw Error("script " + path.string() + " must be a JSON object with a \"rules\" array");
  }
  Script script;
  for (size_t i = 0; i < json["rules"].size(); ++i) {
    const nlohmann::json& rule = json["rules"][i];
    std::string where = path.string() + ": rules[" + std::to_string(i) + "]";
    if (!rule.is_object() || (!rule.contains("output") && !rule.contains("fault"))) {
      throw Error(where + " needs \"output\" or \"fault\"");
    }
    ScriptRule parsed;
    if (rule.contains("prompt_contains")) {
      parsed.prompt_contains =
          ReadTokens(rule["prompt_contains"], encode, where + ".prompt_contains");
    }
    if (rule.contains("output")) {
      parsed.output_token_ids = ReadTokens(rule["output"], encode, where + ".output");
    }
    if (rule.contains("fault")) ReadFault(rule, where, parsed);
    script.rules.push_back(std::move(parsed));
  }
  return script;
}

std::unique_ptr<ScriptedBackend> MakeScriptedBackend(const ModelConfig& config, Script script,
                                                     int64_t kv_tokens, int64_t max_batch,
                                                     int64_t prompt_chunk_tokens) {
  // One byte per token per layer: the budget is then simply tokens x layers.
  KvLayout layout = PlanKvLayout(config, kv_tokens * config.num_layers, 1, max_batch);
  return std::make_unique<ScriptedBackend>(config, std::move(layout), std::move(script),
                                           prompt_chunk_tokens);
}

ScriptedBackend::ScriptedBackend(ModelConfig config, KvLayout layout, Script script,
                                 int64_t prompt_chunk_tokens)
    : config_(std::move(config)),
      layout_(std::move(layout)),
      script_(std::move(script)),
      prompt_chunk_tokens_(prompt_chunk_tokens) {
  if (config_.vocab_size <= 0) throw Error("ScriptedBackend needs a positive vocab_size");
  if (prompt_chunk_tokens_ < 0) throw Error("prompt_chunk_tokens must be >= 0");
  for (const ScriptRule& rule : script_.rules) {
    for (int32_t id : rule.output_token_ids) {
      if (id < 0 || id >= config_.vocab_size) {
        throw Error("scripted output token " + std::to_string(id) + " is outside the vocabulary");
      }
    }
  }
}

const ScriptRule* ScriptedBackend::MatchingRule(std::span<const int32_t> prompt) const {
  for (const ScriptRule& rule : script_.rules) {
    auto& needle = rule.prompt_contains;
    if (needle.empty() ||
        std::search(prompt.begin(), prompt.end(), needle.begin(), needle.end()) != prompt.end()) {
      return &rule;
    }
  }
  return nullptr;
}

int32_t ScriptedBackend::ScriptedToken(std::span<const int32_t> prompt, int64_t index) const {
  const ScriptRule* rule = MatchingRule(prompt);
  if (rule && index < static_cast<int64_t>(rule->output_token_ids.size())) {
    return rule->output_token_ids[index];
  }
  return config_.eos_token_ids.empty() ? 0 : config_.eos_token_ids[0];
}

std::chrono::milliseconds ScriptedBackend::Fault(const SequenceStep& step) const {
  const ScriptRule* rule = MatchingRule(step.prompt_token_ids);
  if (!rule) return std::chrono::milliseconds(0);
  switch (rule->fault) {
    case ScriptFault::kNone:
      break;
    case ScriptFault::kError:
      throw Error("scripted transient backend error");
    case ScriptFault::kFatal:
      throw BackendFatalError("scripted fatal backend error");
    case ScriptFault::kHang:
      return rule->hang;
  }
  return std::chrono::milliseconds(0);
}

void ScriptedBackend::InjectFaults(const StepInputs& inputs) const {
  for (const SequenceStep& step : inputs.sequences) std::this_thread::sleep_for(Fault(step));
}

namespace {

// Finishes at its deadline, like a chunk on another stream.
class ScriptedChunk : public PendingChunk {
 public:
  explicit ScriptedChunk(std::chrono::steady_clock::time_point done) : done_(done) {}
  ~ScriptedChunk() override { std::this_thread::sleep_until(done_); }
  bool Wait(std::chrono::microseconds timeout) override {
    std::this_thread::sleep_until(std::min(done_, std::chrono::steady_clock::now() + timeout));
    return std::chrono::steady_clock::now() >= done_;
  }

 private:
  std::chrono::steady_clock::time_point done_;
};

}  // namespace

std::unique_ptr<PendingChunk> ScriptedBackend::StartPromptChunk(const SequenceStep& chunk) {
  CheckPromptChunk(chunk, prompt_chunk_tokens_);
  const auto hang = Fault(chunk);
  return std::make_unique<ScriptedChunk>(std::chrono::steady_clock::now() + kChunkTime + hang);
}

std::vector<float> ScriptedBackend::PeakedLogits(int32_t token_id) const {
  std::vector<float> logits(config_.vocab_size, 0.0f);
  if (token_id >= 0 && token_id < config_.vocab_size) logits[token_id] = kScriptedLogit;
  return logits;
}

StepOutputs ScriptedBackend::Step(const StepInputs& inputs) {
  InjectFaults(inputs);
  StepOutputs outputs;
  for (const SequenceStep& step : inputs.sequences) {
    SequenceResult& result = outputs.results.emplace_back();
    int32_t k = step.sampling ? step.sampling->num_prompt_logprobs : -1;
    for (int32_t next : step.next_token_ids) {
      if (next >= 0) result.prompt_logprobs.push_back(ComputeLogprobs(PeakedLogits(next), next, k));
    }
    if (!step.sample) continue;
    result.token_id = ScriptedToken(step.prompt_token_ids, step.sample_index);
    if (step.sampling && step.sampling->num_logprobs >= 0) {
      result.logprobs = ComputeLogprobs(PeakedLogits(result.token_id), result.token_id,
                                        step.sampling->num_logprobs);
    }
  }
  return outputs;
}

}  // namespace mkserve
