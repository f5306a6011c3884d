#include "backends/cpu/cpu_backend.h"

#include <algorithm>
#include <string>

#include "backends/cpu/attention.h"
#include "backends/cpu/linear.h"
#include "backends/cpu/norm.h"
#include "common/error.h"
#include "engine/sampler.h"

namespace mkserve {
namespace {

// Effectively unlimited: when every group gets a fixed block count, the planner's sizing is unused.
constexpr int64_t kUnboundedKvBytes = int64_t{1} << 50;

KvLayout PlanCpuKvLayout(const ModelConfig& config, const CpuBackendOptions& options) {
  const int64_t bytes_per_token_per_layer = 2 * config.kv_width() * int64_t{sizeof(float)};
  if (options.num_blocks <= 0 && options.kv_bytes_budget <= 0) {
    throw Error("CPU backend: set num_blocks or kv_bytes_budget to size the KV cache");
  }
  int64_t budget = options.num_blocks > 0 ? kUnboundedKvBytes : options.kv_bytes_budget;
  KvLayout layout = PlanKvLayout(config, budget, bytes_per_token_per_layer,
                                 std::max<int64_t>(options.max_batch, 1));
  if (options.num_blocks > 0) {
    for (KvGroup& group : layout.groups) group.num_blocks = options.num_blocks;
  }
  return layout;
}

std::string SequenceName(const SequenceStep& step) {
  return "sequence " + std::to_string(step.sequence_id) + ": ";
}

}  // namespace

CpuBackend::CpuBackend(ModelConfig config, const ModelWeights& weights, CpuBackendOptions options)
    : config_(std::move(config)),
      weights_(cpu::ConvertWeights(config_, weights)),
      pool_(options.num_threads),
      cache_(PlanCpuKvLayout(config_, options), config_.num_layers, config_.kv_width()),
      rope_(config_.rope_theta, config_.head_dim) {}

StepOutputs CpuBackend::Step(const StepInputs& inputs) {
  StepOutputs outputs;
  // Sequences run one after another: a token's math does not depend on its batch neighbours.
  for (const SequenceStep& step : inputs.sequences) outputs.results.push_back(RunSequence(step));
  return outputs;
}

std::vector<float> CpuBackend::Forward(const SequenceStep& step, bool all_positions) {
  ValidateStep(step);
  std::vector<float> hidden = ForwardHidden(step);
  const int64_t num_tokens = static_cast<int64_t>(step.token_ids.size());
  if (all_positions) return Logits(hidden, num_tokens);
  const int64_t width = config_.hidden_size;
  return Logits(std::span<const float>(hidden).subspan((num_tokens - 1) * width, width), 1);
}

SequenceResult CpuBackend::RunSequence(const SequenceStep& step) {
  ValidateStep(step);
  std::vector<float> hidden = ForwardHidden(step);
  SequenceResult result;
  if (step.return_logits) {
    const int64_t num_tokens = static_cast<int64_t>(step.token_ids.size());
    std::vector<float> logits = Logits(hidden, num_tokens);
    for (int64_t t = 0; t < num_tokens; ++t) {
      auto row = logits.begin() + t * config_.vocab_size;
      result.logits.emplace_back(row, row + config_.vocab_size);
    }
  }
  AddPromptLogprobs(step, hidden, result);
  if (step.sample) {
    const int64_t width = config_.hidden_size;
    const int64_t last = static_cast<int64_t>(step.token_ids.size()) - 1;
    std::vector<float> logits =
        Logits(std::span<const float>(hidden).subspan(last * width, width), 1);
    SequenceResult sampled = SampleFromLogits(logits, step);
    result.token_id = sampled.token_id;
    result.logprobs = std::move(sampled.logprobs);
  }
  return result;
}

void CpuBackend::ValidateStep(const SequenceStep& step) {
  const std::string who = SequenceName(step);
  if (step.token_ids.empty()) throw Error(who + "no tokens to run");
  if (step.start_position < 0) throw Error(who + "negative start_position");
  for (int32_t id : step.token_ids) {
    if (id < 0 || id >= config_.vocab_size) {
      throw Error(who + "token id " + std::to_string(id) + " is outside the vocabulary of " +
                  std::to_string(config_.vocab_size));
    }
  }
  if (static_cast<int64_t>(step.block_tables.size()) != cache_.layout().num_groups()) {
    throw Error(who + std::to_string(step.block_tables.size()) + " block tables for " +
                std::to_string(cache_.layout().num_groups()) + " KV groups");
  }
  if (step.sample && step.sampling == nullptr) throw Error(who + "sample set without sampling");
  if (!step.next_token_ids.empty() && step.next_token_ids.size() != step.token_ids.size()) {
    throw Error(who + "next_token_ids must have one entry per token");
  }
  for (int32_t id : step.next_token_ids) {
    if (id >= config_.vocab_size) {
      throw Error(who + "next token id " + std::to_string(id) + " is outside the vocabulary");
    }
  }
  // Every slot this chunk writes must exist before anything is written.
  const int64_t end = step.start_position + static_cast<int64_t>(step.token_ids.size());
  for (const KvGroup& group : cache_.layout().groups) {
    int64_t layer = group.layer_ids.front();
    std::span<const int32_t> table = step.block_tables[cache_.group_of_layer(layer)];
    for (int64_t position = step.start_position; position < end; ++position) {
      cache_.BlockOf(layer, table, position);
    }
  }
}

std::vector<float> CpuBackend::ForwardHidden(const SequenceStep& step) {
  const int64_t num_tokens = static_cast<int64_t>(step.token_ids.size());
  const int64_t width = config_.hidden_size;
  std::vector<float> x(num_tokens * width);
  for (int64_t t = 0; t < num_tokens; ++t) {
    std::ranges::copy(weights_.embed_tokens.Row(step.token_ids[t]), x.begin() + t * width);
  }
  for (int64_t layer = 0; layer < config_.num_layers; ++layer) RunLayer(layer, step, x);
  std::vector<float> normed(x.size());
  cpu::NormRows(config_.norm, x, num_tokens, weights_.final_norm, config_.norm_eps, normed);
  return normed;
}

void CpuBackend::RunLayer(int64_t layer, const SequenceStep& step, std::vector<float>& x) {
  const int64_t num_tokens = static_cast<int64_t>(step.token_ids.size());
  std::vector<float> normed(x.size());
  cpu::NormRows(config_.norm, x, num_tokens, weights_.layers[layer].input_norm, config_.norm_eps,
                normed);
  std::vector<float> attention = Attention(layer, step, normed);
  std::vector<float> ffn = Ffn(layer, normed, num_tokens);
  // Parallel block: both branches read the same normalised input; one residual add, in HF's order.
  for (size_t i = 0; i < x.size(); ++i) x[i] = (x[i] + attention[i]) + ffn[i];
}

std::vector<float> CpuBackend::Attention(int64_t layer, const SequenceStep& step,
                                         std::span<const float> normed) {
  const cpu::CpuLayerWeights& weights = weights_.layers[layer];
  const LayerSpec& spec = config_.layers[layer];
  const int64_t num_tokens = static_cast<int64_t>(step.token_ids.size());
  std::vector<float> q(num_tokens * config_.q_width());
  std::vector<float> k(num_tokens * config_.kv_width());
  std::vector<float> v(num_tokens * config_.kv_width());
  cpu::Linear(normed, num_tokens, weights.q_proj, q, pool_);
  cpu::Linear(normed, num_tokens, weights.k_proj, k, pool_);
  cpu::Linear(normed, num_tokens, weights.v_proj, v, pool_);
  if (spec.uses_rope) {
    for (int64_t t = 0; t < num_tokens; ++t) {
      int64_t position = step.start_position + t;
      rope_.ApplyHeads(std::span(q).subspan(t * config_.q_width(), config_.q_width()),
                       config_.num_heads, position);
      rope_.ApplyHeads(std::span(k).subspan(t * config_.kv_width(), config_.kv_width()),
                       config_.num_kv_heads, position);
    }
  }
  cpu::AttentionChunk chunk{layer, step.block_tables[cache_.group_of_layer(layer)],
                            step.start_position, num_tokens};
  std::vector<float> heads(q.size());
  cpu::PagedAttention(config_, spec, chunk, q, k, v, cache_, heads, pool_);
  std::vector<float> out(num_tokens * config_.hidden_size);
  cpu::Linear(heads, num_tokens, weights.o_proj, out, pool_);
  return out;
}

std::vector<float> CpuBackend::Ffn(int64_t layer, std::span<const float> normed,
                                   int64_t num_tokens) {
  const cpu::CpuLayerWeights& weights = weights_.layers[layer];
  std::vector<float> out(num_tokens * config_.hidden_size);
  if (weights.dense) {
    cpu::SwiGlu(*weights.dense, normed, num_tokens, out, pool_);
  } else {
    cpu::Moe(config_, *weights.moe, normed, num_tokens, out, pool_);
  }
  return out;
}

std::vector<float> CpuBackend::Logits(std::span<const float> hidden_rows, int64_t num_rows) {
  std::vector<float> logits(num_rows * config_.vocab_size);
  cpu::Linear(hidden_rows, num_rows, weights_.lm_head(), logits, pool_);
  for (float& logit : logits) logit *= config_.logit_scale;
  return logits;
}

void CpuBackend::AddPromptLogprobs(const SequenceStep& step, std::span<const float> hidden,
                                   SequenceResult& result) {
  const int64_t width = config_.hidden_size;
  const int32_t top_k = step.sampling ? std::max(step.sampling->num_prompt_logprobs, 0) : 0;
  for (size_t t = 0; t < step.next_token_ids.size(); ++t) {
    if (step.next_token_ids[t] < 0) continue;
    std::vector<float> logits = Logits(hidden.subspan(t * width, width), 1);
    result.prompt_logprobs.push_back(ComputeLogprobs(logits, step.next_token_ids[t], top_k));
  }
}

}  // namespace mkserve
