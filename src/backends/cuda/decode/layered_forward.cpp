#include "backends/cuda/decode/layered_forward.h"

#include <algorithm>

#include "backends/cuda/decode/argmax.h"
#include "backends/cuda/decode/attention.h"
#include "backends/cuda/decode/embedding.h"
#include "backends/cuda/decode/linear.h"
#include "backends/cuda/decode/rope_kv.h"
#include "backends/cuda/decode/router.h"
#include "backends/cuda/prefill/moe_grouped.h"
#include "backends/cuda/prefill/prefill_attention.h"
#include "backends/cuda/prefill/router_prefill.h"

namespace mkserve::cuda {

void LayeredForward::Run(const StepPlan& plan, const DeviceMetadata& meta) const {
  StepWorkspace& ws = c_.workspace;
  const int64_t tokens = plan.num_tokens;
  Mark(StepOp::kEmbed);
  EmbedTokens(meta.token_ids, c_.weights.embed(), ws.residual.data(), tokens, c_.config.hidden_size,
              stream_);
  PendingMoe pending;
  for (int64_t l = 0; l < c_.config.num_layers; ++l) pending = RunLayer(l, plan, meta, pending);
  Mark(StepOp::kAddNorm);
  AddNorm(ws.residual.data(), ws.attn_out.data(), ws.ffn_out.data(), c_.weights.final_norm(),
          ws.normed.data(), tokens, c_.config.hidden_size, c_.config.norm, c_.config.norm_eps,
          stream_, nullptr, pending.expert_out != nullptr ? &pending : nullptr);
}

// MoE layer `layer_id`'s expert rows, whose combine is still to do (MoeExperts), for the next
// AddNorm to fold in.
PendingMoe LayeredForward::PendingCombine(int64_t layer_id) const {
  StepWorkspace& ws = c_.workspace;
  const bool shared = c_.weights.layers()[layer_id].shared.gate_up != nullptr;
  const bool average =
      shared && c_.config.shared_expert_combination == SharedExpertCombination::kAverage;
  return {ws.moe.expert_out,
          ws.moe.slot_of_assignment,
          ws.expert_weights.data(),
          shared ? ws.shared_out.data() : nullptr,
          c_.config.num_experts_per_token,
          average ? 0.5f : 1.0f};
}

// Parallel block: the previous layer's attention and FFN outputs (and its pending MoE combine)
// join the residual here, fused with this layer's input norm.
PendingMoe LayeredForward::RunLayer(int64_t layer_id, const StepPlan& plan,
                                    const DeviceMetadata& meta, const PendingMoe& pending) const {
  StepWorkspace& ws = c_.workspace;
  const bool first = layer_id == 0;
  const bool moe = c_.config.layers[layer_id].ffn != FfnKind::kDense;
  Mark(StepOp::kAddNorm);
  AddNorm(ws.residual.data(), first ? nullptr : ws.attn_out.data(),
          first ? nullptr : ws.ffn_out.data(), c_.weights.layers()[layer_id].input_norm,
          ws.normed.data(), plan.num_tokens, c_.config.hidden_size, c_.config.norm,
          c_.config.norm_eps, stream_, moe ? ws.normed_fp32.data() : nullptr,
          pending.expert_out != nullptr ? &pending : nullptr);
  RunAttention(layer_id, plan, meta);
  return RunFfn(layer_id, plan.num_tokens);
}

void LayeredForward::RunAttention(int64_t layer_id, const StepPlan& plan,
                                  const DeviceMetadata& meta) const {
  StepWorkspace& ws = c_.workspace;
  const ModelConfig& config = c_.config;
  const DeviceLayer& layer = c_.weights.layers()[layer_id];
  const LayerSpec& spec = config.layers[layer_id];
  const int64_t tokens = plan.num_tokens, hidden = config.hidden_size;
  const int32_t group = c_.kv_pool.group_of_layer(layer_id);
  RopeKvArgs rope{ws.qkv.data(),
                  meta.positions,
                  meta.slots[group],
                  ws.q.data(),
                  c_.kv_pool.layer_cache(layer_id),
                  tokens,
                  config.num_heads,
                  config.num_kv_heads,
                  config.head_dim,
                  spec.uses_rope,
                  static_cast<float>(config.rope_theta)};
  Mark(StepOp::kQkv);
  if (tokens <= kGemvMaxTokens) {
    QkvRopeKv(ws.normed.data(), hidden, layer.qkv, rope, stream_);  // RoPE + KV in the epilogue
  } else {
    Linear(c_.cublas, ws.normed.data(), tokens, hidden, layer.qkv,
           config.q_width() + 2 * config.kv_width(), 1.0f, ws.qkv.data(), stream_);
    Mark(StepOp::kRopeKv);
    RopeAndWriteKv(rope, stream_);
  }
  AttentionArgs attn;
  attn.q = ws.q.data();
  attn.cache = c_.kv_pool.layer_cache(layer_id);
  attn.positions = meta.positions;
  attn.seq_of_token = meta.seq_of_token;
  attn.block_tables = meta.block_tables[group];
  attn.max_pages = plan.max_pages[group];
  attn.num_tokens = tokens;
  attn.num_heads = config.num_heads;
  attn.num_kv_heads = config.num_kv_heads;
  attn.head_dim = config.head_dim;
  attn.window_tokens = spec.attention == AttentionKind::kSliding ? spec.window_tokens : 0;
  const int64_t context = attn.window_tokens > 0
                              ? std::min(plan.max_context_tokens, attn.window_tokens)
                              : plan.max_context_tokens;
  attn.num_splits = ChooseNumSplits(tokens, config.num_kv_heads, context, c_.device.num_sms,
                                    kAttentionPartialCapacity);
  attn.out = ws.attn_heads.data();
  attn.partial_acc = ws.attn_partial_acc.data();
  attn.partial_stats = ws.attn_partial_stats.data();
  Mark(StepOp::kAttention);
  if (PreferPrefillAttention(tokens, plan.num_sequences) && PrefillAttentionSupports(attn)) {
    // Tensor cores; one K/V page serves 32 tokens x 8 heads.
    PrefillAttention(attn, {ws.prefill_carry_acc.data(), ws.prefill_carry_stats.data()}, stream_);
  } else {
    PagedAttention(attn, stream_);
  }
  Mark(StepOp::kOProj);
  Linear(c_.cublas, ws.attn_heads.data(), tokens, config.q_width(), layer.o_proj, hidden, 1.0f,
         ws.attn_out.data(), stream_);
}

void LayeredForward::RunMlp(const DeviceMlp& mlp, int64_t num_tokens, float* out) const {
  StepWorkspace& ws = c_.workspace;
  const int64_t hidden = c_.config.hidden_size;
  Linear(c_.cublas, ws.normed.data(), num_tokens, hidden, mlp.gate_up, 2 * mlp.intermediate, 1.0f,
         ws.gate_up.data(), stream_);
  SiluMul(ws.gate_up.data(), num_tokens, mlp.intermediate, ws.mlp_hidden.data(), stream_);
  Linear(c_.cublas, ws.mlp_hidden.data(), num_tokens, mlp.intermediate, mlp.down, hidden, 1.0f, out,
         stream_);
}

PendingMoe LayeredForward::RunFfn(int64_t layer_id, int64_t num_tokens) const {
  StepWorkspace& ws = c_.workspace;
  const ModelConfig& config = c_.config;
  const DeviceLayer& layer = c_.weights.layers()[layer_id];
  if (config.layers[layer_id].ffn == FfnKind::kDense) {
    Mark(StepOp::kFfn);
    RunMlp(layer.dense, num_tokens, ws.ffn_out.data());
    return {};
  }
  const int64_t hidden = config.hidden_size;
  StepHooks* hooks = c_.options.hooks.get();
  Mark(StepOp::kRouter);
  const RouterArgs route{ws.router_logits.data(), num_tokens,
                         config.num_experts,      config.num_experts_per_token,
                         config.expert_selection, config.norm_topk_prob,
                         ws.expert_ids.data(),    ws.expert_weights.data()};
  // Decode: logits, top-k and (unless a hook rewrites the ids) the expert buckets in one launch.
  const bool fused = num_tokens <= kFusedRouterMaxTokens;
  const bool bucketed = fused && !(hooks != nullptr && hooks->rewrites_routing());
  if (fused) {
    RouterLogitsTopK(ws.normed_fp32.data(), hidden, layer.router, ws.router_logits.data(), route,
                     ws.sync_counters.data(), stream_, bucketed ? &ws.moe : nullptr);
  } else {
    // Prefill chunks: the tensor-core router reads each row once for all experts.
    const bool prefill = num_tokens >= kRouterPrefillMinTokens &&
                         RouterLogitsPrefillSupports(hidden, config.num_experts);
    (prefill ? RouterLogitsPrefill : RouterLogits)(ws.normed_fp32.data(), num_tokens, hidden,
                                                   layer.router, config.num_experts,
                                                   ws.router_logits.data(), stream_);
    RouterTopK(route, stream_);
  }
  if (hooks != nullptr) {
    hooks->AfterRouterTopK(layer_id, ws.router_logits.data(), num_tokens, ws.expert_ids.data(),
                           ws.expert_weights.data(), stream_);
  }
  Mark(StepOp::kFfn);
  if (layer.shared.gate_up != nullptr) RunMlp(layer.shared, num_tokens, ws.shared_out.data());
  MoeArgs moe{ws.normed.data(),
              ws.expert_ids.data(),
              ws.expert_weights.data(),
              layer.experts_gate_up,
              layer.experts_down,
              layer.shared.gate_up != nullptr ? ws.shared_out.data() : nullptr,
              config.shared_expert_combination,
              num_tokens,
              hidden,
              layer.expert_intermediate,
              config.num_experts,
              config.num_experts_per_token,
              ws.ffn_out.data()};
  if (num_tokens >= c_.options.grouped_moe_min_tokens &&
      MoeGroupedSupports(hidden, layer.expert_intermediate)) {
    MoeForwardGrouped(moe, ws.moe, stream_);  // prefill: grouped GEMMs over experts
    return {};
  }
  MoeExperts(moe, ws.moe, stream_, bucketed);  // the next AddNorm folds the combine in
  return PendingCombine(layer_id);
}

void LayeredForward::ComputeLogits(const int32_t* logit_tokens, size_t first_row,
                                   int64_t num_rows) const {
  StepWorkspace& ws = c_.workspace;
  const ModelConfig& config = c_.config;
  Mark(StepOp::kLmHead);
  GatherRows(ws.normed.data(), logit_tokens + first_row, num_rows, config.hidden_size,
             ws.logit_inputs.data(), stream_);
  Linear(c_.cublas, ws.logit_inputs.data(), num_rows, config.hidden_size, c_.weights.lm_head(),
         config.vocab_size, config.logit_scale, ws.logits.data(), stream_);
  Mark(StepOp::kSampling);
  ArgmaxRows(ws.logits.data(), num_rows, config.vocab_size, ws.sampled.device(), stream_);
}

}  // namespace mkserve::cuda
