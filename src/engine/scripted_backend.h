// ScriptedBackend: a Backend without a model. Each sequence emits a fixed token sequence chosen
// by its prompt, then EOS, whatever the sampling parameters say; logprobs come from a synthetic
// distribution peaked on the scripted token. It lets engine and server tests (and
// `mkserve serve --backend scripted:FILE`) run deterministic flows: reasoning, tool calls, stop
// strings, n > 1, preemption. A rule may instead inject a backend fault, so the failure paths of
// the engine and the server are tested through the real serving code.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend.h"

namespace mkserve {

// What a step that holds a sequence of the rule's prompt does instead of running.
enum class ScriptFault {
  kNone,
  kError,  // throws mkserve::Error: a transient failure of that step
  kFatal,  // throws BackendFatalError: the backend cannot run another step
  kHang,   // sleeps for `hang` before returning normally: a wedged device, for the watchdog
};

struct ScriptRule {
  std::vector<int32_t> prompt_contains;  // matches prompts holding this run of ids; empty: any
  std::vector<int32_t> output_token_ids;
  ScriptFault fault = ScriptFault::kNone;
  std::chrono::milliseconds hang{0};
};

struct Script {
  std::vector<ScriptRule> rules;  // the first matching rule wins; no match: EOS at once
};

// Reads {"rules": [{"prompt_contains": "text" or [ids], "output": "text" or [ids]}, ...]}; a
// fault rule has "fault": "error" | "fatal" | "hang" (with "hang_ms") instead of "output".
// Text goes through `encode` (the server passes its tokenizer). Throws mkserve::Error naming the
// file and the bad entry.
using EncodeFn = std::function<std::vector<int32_t>(const std::string&)>;
Script LoadScript(const std::filesystem::path& path, const EncodeFn& encode);

class ScriptedBackend;
// For `mkserve serve --backend scripted:FILE`: a scripted backend with `config`'s layers whose KV
// pools hold about `kv_tokens` tokens per layer (sliding groups sized for max_batch first), and
// prompt chunks beside the steps of up to `prompt_chunk_tokens` (0: none).
std::unique_ptr<ScriptedBackend> MakeScriptedBackend(const ModelConfig& config, Script script,
                                                     int64_t kv_tokens, int64_t max_batch,
                                                     int64_t prompt_chunk_tokens = 0);

class ScriptedBackend : public Backend {
 public:
  // How long a prompt chunk beside the steps runs (a rule's hang adds to it).
  static constexpr std::chrono::milliseconds kChunkTime{20};

  // config.eos_token_ids[0] ends every script (token 0 when the model has no EOS). Prompt chunks
  // beside the steps take up to `prompt_chunk_tokens` (0: none); a matching rule's fault hits a
  // chunk when it starts (an error or a fatal error is thrown there; a hang lengthens it).
  ScriptedBackend(ModelConfig config, KvLayout layout, Script script,
                  int64_t prompt_chunk_tokens = 0);

  std::string name() const override { return "scripted"; }
  const ModelConfig& config() const override { return config_; }
  const KvLayout& kv_layout() const override { return layout_; }
  StepOutputs Step(const StepInputs& inputs) override;
  int64_t max_prompt_chunk_tokens() const override { return prompt_chunk_tokens_; }
  std::unique_ptr<PendingChunk> StartPromptChunk(const SequenceStep& chunk) override;

  // The token a sequence with this prompt emits as its output number `index`.
  int32_t ScriptedToken(std::span<const int32_t> prompt_token_ids, int64_t index) const;

 private:
  const ScriptRule* MatchingRule(std::span<const int32_t> prompt_token_ids) const;
  // Throws a rule's error or fatal error for this step; returns how long its hang lasts.
  std::chrono::milliseconds Fault(const SequenceStep& step) const;
  void InjectFaults(const StepInputs& inputs) const;
  std::vector<float> PeakedLogits(int32_t token_id) const;

  ModelConfig config_;
  KvLayout layout_;
  Script script_;
  int64_t prompt_chunk_tokens_;
};

}  // namespace mkserve
