#include "backends/cpu/moe.h"

#include <algorithm>
#include <vector>

#include "backends/cpu/router.h"

namespace mkserve::cpu {
namespace {

// Tokens are routed one at a time: the reference favours the obvious loop over grouping tokens
// by expert.
void RoutedExperts(const ModelConfig& config, const MoeMatrices& moe, std::span<const float> x,
                   std::span<float> out, ThreadPool& pool) {
  const int64_t hidden = config.hidden_size;
  std::vector<float> router_logits(config.num_experts);
  Linear(x, 1, moe.router, router_logits, pool);
  std::vector<float> expert_out(hidden);
  std::ranges::fill(out, 0.0f);
  // Summed in expert-id order, as HF's loop over hit experts does.
  std::vector<ExpertChoice> choices = SelectExperts(router_logits, config);
  std::ranges::sort(choices, {}, &ExpertChoice::expert_id);
  for (const ExpertChoice& choice : choices) {
    SwiGlu(moe.experts[choice.expert_id], x, 1, expert_out, pool);
    for (int64_t i = 0; i < hidden; ++i) out[i] += expert_out[i] * choice.weight;
  }
}

}  // namespace

void Moe(const ModelConfig& config, const MoeMatrices& moe, std::span<const float> x,
         int64_t num_tokens, std::span<float> out, ThreadPool& pool) {
  const int64_t hidden = config.hidden_size;
  for (int64_t t = 0; t < num_tokens; ++t) {
    RoutedExperts(config, moe, x.subspan(t * hidden, hidden), out.subspan(t * hidden, hidden),
                  pool);
  }
  if (!moe.shared_expert) return;
  std::vector<float> shared(num_tokens * hidden);
  SwiGlu(*moe.shared_expert, x, num_tokens, shared, pool);
  bool average = config.shared_expert_combination == SharedExpertCombination::kAverage;
  for (size_t i = 0; i < shared.size(); ++i) {
    out[i] = average ? (out[i] + shared[i]) / 2.0f : out[i] + shared[i];
  }
}

}  // namespace mkserve::cpu
