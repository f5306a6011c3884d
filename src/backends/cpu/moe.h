// The sparse MoE block: per token, route (SelectExperts), run each chosen expert's SwiGLU scaled by
// its weight and sum them; then add the shared expert, as a plain sum or as (routed + shared) / 2.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "backends/cpu/linear.h"
#include "backends/cpu/mlp.h"
#include "common/thread_pool.h"
#include "model/model_config.h"

namespace mkserve::cpu {

struct MoeMatrices {
  Matrix router;                             // [num_experts, hidden]
  std::vector<MlpMatrices> experts;          // num_experts entries
  std::optional<MlpMatrices> shared_expert;  // when num_shared_experts > 0
};

// out: [num_tokens, hidden] for x: [num_tokens, hidden].
void Moe(const ModelConfig& config, const MoeMatrices& moe, std::span<const float> x,
         int64_t num_tokens, std::span<float> out, ThreadPool& pool);

}  // namespace mkserve::cpu
