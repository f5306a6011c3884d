#include "megakernel/schedule/model_support.h"

namespace mkserve::megakernel {

std::optional<std::string> MegakernelUnsupportedReason(const ModelConfig& config) {
  if (config.head_dim != 128 || config.norm != NormKind::kRmsNorm ||
      config.num_shared_experts != 0 || config.num_experts > 256 ||
      config.num_experts_per_token > 16 || config.hidden_size % 8 != 0 ||
      config.hidden_size > 4096 || config.q_width() > 4096 || config.num_kv_heads < 1 ||
      config.num_heads % config.num_kv_heads != 0 || config.num_heads / config.num_kv_heads > 8) {
    return "the megakernel runs head_dim 128, RMSNorm, no shared experts, at most 256 experts and "
           "top-16, hidden and q width multiples of 8 up to 4096, at most 8 query heads per KV "
           "head; this model differs: use the layered path";
  }
  return std::nullopt;
}

}  // namespace mkserve::megakernel
