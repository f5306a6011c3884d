#include "backends/cuda/core/step_workspace.h"

#include <algorithm>

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/prefill/prefill_attention.h"

namespace mkserve::cuda {
namespace {

int64_t WidestMlp(const ModelConfig& config) {
  int64_t width = config.expert_intermediate_size * config.num_shared_experts;
  for (const LayerSpec& spec : config.layers) {
    if (spec.ffn == FfnKind::kDense) width = std::max(width, spec.ffn_intermediate_size);
  }
  return std::max<int64_t>(width, 1);
}

}  // namespace

StepWorkspace::StepWorkspace(const ModelConfig& config, int64_t max_tokens)
    : max_num_tokens(max_tokens) {
  const int64_t t = max_tokens, hidden = config.hidden_size;
  const int64_t qkv_width = config.q_width() + 2 * config.kv_width();
  const int64_t experts = std::max<int64_t>(config.num_experts, 1);
  const int64_t top_k = std::max<int64_t>(config.num_experts_per_token, 1);
  const int64_t assignments = t * top_k;
  residual = DeviceBuffer<float>(t * hidden);
  normed = DeviceBuffer<__nv_bfloat16>(t * hidden);
  if (config.num_moe_layers() > 0) normed_fp32 = DeviceBuffer<float>(t * hidden);
  qkv = DeviceBuffer<float>(t * qkv_width);
  q = DeviceBuffer<__nv_bfloat16>(t * config.q_width());
  attn_heads = DeviceBuffer<__nv_bfloat16>(t * config.q_width());
  attn_out = DeviceBuffer<float>(t * hidden);
  ffn_out = DeviceBuffer<float>(t * hidden);
  if (config.num_shared_experts > 0) shared_out = DeviceBuffer<float>(t * hidden);
  gate_up = DeviceBuffer<float>(t * 2 * WidestMlp(config));
  mlp_hidden = DeviceBuffer<__nv_bfloat16>(t * WidestMlp(config));
  router_logits = DeviceBuffer<float>(t * experts);
  expert_ids = DeviceBuffer<int32_t>(assignments);
  expert_weights = DeviceBuffer<float>(assignments);
  moe_index = DeviceBuffer<int32_t>(MoeIndexElements(experts, assignments));
  moe_hidden = DeviceBuffer<__nv_bfloat16>(assignments *
                                           std::max<int64_t>(config.expert_intermediate_size, 1));
  moe_expert_out = DeviceBuffer<float>(assignments * hidden);
  attn_partial_acc = DeviceBuffer<float>(kAttentionPartialCapacity * config.q_width());
  attn_partial_stats = DeviceBuffer<float>(kAttentionPartialCapacity * config.num_heads * 2);
  prefill_carry_acc = DeviceBuffer<float>(t * config.q_width());
  prefill_carry_stats = DeviceBuffer<float>(t * config.num_heads * kPrefillCarryStats);
  logit_inputs = DeviceBuffer<__nv_bfloat16>(kLogitRowsPerChunk * hidden);
  logits = DeviceBuffer<float>(kLogitRowsPerChunk * config.vocab_size);
  sampled = HostMappedBuffer<int32_t>(kLogitRowsPerChunk);
  sync_counters = DeviceBuffer<int32_t>(1);
  MKSERVE_CUDA_CHECK(cudaMemset(sync_counters.data(), 0, sync_counters.bytes()));
  moe = MoeIndexViews(moe_index.data(), experts, assignments);
  moe.hidden = moe_hidden.data();
  moe.expert_out = moe_expert_out.data();
}

}  // namespace mkserve::cuda
