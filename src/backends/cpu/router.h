// Expert selection of the cohere2_moe router, from one token's router logits (h . W_gate^T):
// - sigmoid: the top-k experts by logit, weight = sigmoid(logit), divided by the k weights' sum
//   when norm_topk_prob (North: not divided, not scaled);
// - softmax: the top-k logits, then a softmax over those k only.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/model_config.h"

namespace mkserve::cpu {

struct ExpertChoice {
  int32_t expert_id = 0;
  float weight = 0.0f;
};

// Best first; ties go to the lower expert id.
std::vector<ExpertChoice> SelectExperts(std::span<const float> router_logits,
                                        const ModelConfig& config);

}  // namespace mkserve::cpu
