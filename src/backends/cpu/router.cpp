#include "backends/cpu/router.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace mkserve::cpu {
namespace {

// A NaN logit ranks and weighs as -inf: a broken row still sorts by a strict order (a NaN in
// the comparison would not), and every backend picks the same experts from it.
float RankedLogit(float logit) { return std::isnan(logit) ? -INFINITY : logit; }

std::vector<int32_t> TopK(std::span<const float> logits, int64_t k) {
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::ranges::stable_sort(
      ids, [&](int32_t a, int32_t b) { return RankedLogit(logits[a]) > RankedLogit(logits[b]); });
  ids.resize(k);
  return ids;
}

void SigmoidWeights(std::vector<ExpertChoice>& choices, bool renormalise) {
  float sum = 0.0f;
  for (ExpertChoice& choice : choices) {
    choice.weight = 1.0f / (1.0f + std::exp(-choice.weight));
    sum += choice.weight;
  }
  if (!renormalise) return;
  for (ExpertChoice& choice : choices) choice.weight /= sum;
}

void SoftmaxWeights(std::vector<ExpertChoice>& choices) {
  float max_logit = choices.front().weight;  // best first
  float sum = 0.0f;
  for (ExpertChoice& choice : choices) {
    choice.weight = std::exp(choice.weight - max_logit);
    sum += choice.weight;
  }
  for (ExpertChoice& choice : choices) choice.weight /= sum;
}

}  // namespace

std::vector<ExpertChoice> SelectExperts(std::span<const float> router_logits,
                                        const ModelConfig& config) {
  std::vector<ExpertChoice> choices;
  for (int32_t id : TopK(router_logits, config.num_experts_per_token)) {
    choices.push_back({id, RankedLogit(router_logits[id])});  // the logit until converted
  }
  if (config.expert_selection == ExpertSelection::kSigmoid) {
    SigmoidWeights(choices, config.norm_topk_prob);
  } else {
    SoftmaxWeights(choices);
  }
  return choices;
}

}  // namespace mkserve::cpu
