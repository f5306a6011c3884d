// CpuBackend: the fp32 reference implementation of Backend. Weights are converted to fp32 once at
// construction; every step runs the cohere2_moe forward pass exactly as HF transformers defines it
// (parallel block x = x + attn(norm x) + ffn(norm x), final norm, tied head times logit_scale)
// over a paged KV cache. Clarity comes before speed: this is the oracle for every faster path.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/cpu/cpu_weights.h"
#include "backends/cpu/kv_cache.h"
#include "backends/cpu/rope.h"
#include "common/thread_pool.h"
#include "engine/backend.h"
#include "model/model_weights.h"

namespace mkserve {

struct CpuBackendOptions {
  int64_t kv_bytes_budget = 0;  // split by PlanKvLayout when num_blocks is 0
  int64_t num_blocks = 0;       // when > 0: exactly this many blocks in every KV group
  int64_t max_batch = 1;
  int num_threads = 0;  // 0: the hardware concurrency
};

class CpuBackend : public Backend {
 public:
  // `weights` is only read during construction (it is copied to fp32).
  CpuBackend(ModelConfig config, const ModelWeights& weights, CpuBackendOptions options);

  std::string name() const override { return "cpu"; }
  const ModelConfig& config() const override { return config_; }
  const KvLayout& kv_layout() const override { return cache_.layout(); }
  StepOutputs Step(const StepInputs& inputs) override;

  // Runs one sequence's chunk exactly as Step does (its K/V enter the cache) and returns the
  // scaled logits: [num_tokens, vocab] when all_positions, else the last position's [vocab].
  std::vector<float> Forward(const SequenceStep& step, bool all_positions);

 private:
  SequenceResult RunSequence(const SequenceStep& step);
  void ValidateStep(const SequenceStep& step);
  // Hidden states after the final norm, [num_tokens, hidden].
  std::vector<float> ForwardHidden(const SequenceStep& step);
  void RunLayer(int64_t layer, const SequenceStep& step, std::vector<float>& x);
  std::vector<float> Attention(int64_t layer, const SequenceStep& step,
                               std::span<const float> normed);
  std::vector<float> Ffn(int64_t layer, std::span<const float> normed, int64_t num_tokens);
  std::vector<float> Logits(std::span<const float> hidden_rows, int64_t num_rows);
  void AddPromptLogprobs(const SequenceStep& step, std::span<const float> hidden,
                         SequenceResult& result);

  ModelConfig config_;
  cpu::CpuWeights weights_;
  ThreadPool pool_;
  cpu::KvCache cache_;
  cpu::Rope rope_;
};

}  // namespace mkserve
