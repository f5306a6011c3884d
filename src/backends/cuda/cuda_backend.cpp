#include "backends/cuda/cuda_backend.h"

#include <algorithm>
#include <string>

#include "backends/cuda/argmax.h"
#include "backends/cuda/attention.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/decode_graph.h"
#include "backends/cuda/embedding.h"
#include "backends/cuda/linear.h"
#include "backends/cuda/moe_grouped.h"
#include "backends/cuda/norm.h"
#include "backends/cuda/prefill_attention.h"
#include "backends/cuda/rope_kv.h"
#include "backends/cuda/router.h"
#include "backends/cuda/router_prefill.h"
#include "engine/sampler.h"

namespace mkserve::cuda {
namespace {

constexpr int64_t kCublasWorkspaceBytes = int64_t{32} << 20;

}  // namespace

CudaBackend::CudaBackend(ModelConfig config, DeviceWeights weights,
                         const CudaBackendOptions& options)
    : config_(std::move(config)), weights_(std::move(weights)), options_(options) {
  MKSERVE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  MKSERVE_CUBLAS_CHECK(cublasCreate(&cublas_));
  cublas_workspace_ = DeviceBuffer<uint8_t>(kCublasWorkspaceBytes);
  MKSERVE_CUBLAS_CHECK(
      cublasSetWorkspace(cublas_, cublas_workspace_.data(), cublas_workspace_.bytes()));
  int device = 0;
  MKSERVE_CUDA_CHECK(cudaGetDevice(&device));
  MKSERVE_CUDA_CHECK(cudaDeviceGetAttribute(&num_sms_, cudaDevAttrMultiProcessorCount, device));
  workspace_ = std::make_unique<StepWorkspace>(config_, options.max_num_tokens);
  kv_pool_ = std::make_unique<KvPool>(
      options.kv_layout
          ? KvPool::Create(config_, *options.kv_layout)
          : KvPool::CreateForBudget(config_, options.gpu_memory_fraction, options.max_batch));
}

CudaBackend::~CudaBackend() {
  graphs_.clear();
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

StepPlan CudaBackend::Plan(const StepInputs& inputs) const {
  return BuildStepPlan(config_, kv_pool_->layout(), inputs, workspace_->max_num_tokens);
}

StepOutputs CudaBackend::Step(const StepInputs& inputs) {
  const StepPlan plan = Plan(inputs);
  StepOutputs outputs;
  outputs.results.resize(inputs.sequences.size());
  if (plan.num_tokens == 0) return outputs;
  if (profiler_ == nullptr && CanReplayGraph(inputs)) return StepWithGraph(inputs, plan);
  Forward(plan);
  Sample(inputs, plan, &outputs);
  if (profiler_ != nullptr) profiler_->Finish(stream_);
  return outputs;
}

CudaBackend::PackedMetadata CudaBackend::PackMetadata(const StepPlan& plan) {
  PackedMetadata packed;
  auto append = [&packed](const std::vector<int32_t>& values) {
    packed.offsets.push_back(packed.values.size());
    packed.values.insert(packed.values.end(), values.begin(), values.end());
    packed.values.resize((packed.values.size() + 3) / 4 * 4, 0);  // 16-byte aligned starts
  };
  append(plan.token_ids);
  append(plan.positions);
  append(plan.seq_of_token);
  std::vector<int32_t> logit_tokens;
  for (const LogitRow& row : plan.logit_rows) logit_tokens.push_back(row.token_index);
  append(logit_tokens);
  for (const auto& slots : plan.slots) append(slots);
  for (const auto& table : plan.block_tables) append(table);
  return packed;
}

CudaBackend::DeviceMetadata CudaBackend::PointMetadata(const int32_t* base,
                                                       const PackedMetadata& packed,
                                                       size_t num_groups) {
  const auto& at = packed.offsets;
  DeviceMetadata meta{base + at[0], base + at[1], base + at[2], base + at[3], {}, {}};
  for (size_t g = 0; g < num_groups; ++g) {
    meta.slots.push_back(base + at[4 + g]);
    meta.block_tables.push_back(base + at[4 + num_groups + g]);
  }
  logit_tokens_ = meta.logit_tokens;
  return meta;
}

CudaBackend::DeviceMetadata CudaBackend::UploadMetadata(const StepPlan& plan) {
  const PackedMetadata packed = PackMetadata(plan);
  const int64_t count = static_cast<int64_t>(packed.values.size());
  if (count > workspace_->metadata.count()) {
    MKSERVE_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the old buffer may still be read
    workspace_->metadata = DeviceBuffer<int32_t>(count * 2);
  }
  MKSERVE_CUDA_CHECK(cudaMemcpyAsync(workspace_->metadata.data(), packed.values.data(),
                                     count * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
  MKSERVE_CUDA_CHECK(cudaStreamSynchronize(stream_));  // `packed` is pageable and local
  return PointMetadata(workspace_->metadata.data(), packed, plan.slots.size());
}

void CudaBackend::Forward(const StepPlan& plan) { Launch(plan, UploadMetadata(plan)); }

// Everything after the metadata upload: asynchronous on stream_, so a CUDA graph can capture it.
void CudaBackend::Launch(const StepPlan& plan, const DeviceMetadata& meta) {
  StepWorkspace& ws = *workspace_;
  const int64_t tokens = plan.num_tokens;
  Mark(StepOp::kEmbed);
  EmbedTokens(meta.token_ids, weights_.embed(), ws.residual.data(), tokens, config_.hidden_size,
              stream_);
  pending_moe_layer_ = -1;
  for (int64_t l = 0; l < config_.num_layers; ++l) RunLayer(l, plan, meta);
  Mark(StepOp::kAddNorm);
  const PendingMoe pending = TakePendingMoe();
  AddNorm(ws.residual.data(), ws.attn_out.data(), ws.ffn_out.data(), weights_.final_norm(),
          ws.normed.data(), tokens, config_.hidden_size, config_.norm, config_.norm_eps, stream_,
          nullptr, pending.expert_out != nullptr ? &pending : nullptr);
}

// The previous MoE layer's expert rows when its combine is still to do (MoeExperts), for the
// next AddNorm to fold in; an empty PendingMoe otherwise.
PendingMoe CudaBackend::TakePendingMoe() {
  const int64_t layer = pending_moe_layer_;
  pending_moe_layer_ = -1;
  if (layer < 0) return {};
  StepWorkspace& ws = *workspace_;
  const bool shared = weights_.layers()[layer].shared.gate_up != nullptr;
  const bool average =
      shared && config_.shared_expert_combination == SharedExpertCombination::kAverage;
  return {ws.moe.expert_out,
          ws.moe.slot_of_assignment,
          ws.expert_weights.data(),
          shared ? ws.shared_out.data() : nullptr,
          config_.num_experts_per_token,
          average ? 0.5f : 1.0f};
}

// Parallel block: the previous layer's attention and FFN outputs join the residual here, fused
// with this layer's input norm.
void CudaBackend::RunLayer(int64_t layer_id, const StepPlan& plan, const DeviceMetadata& meta) {
  StepWorkspace& ws = *workspace_;
  const bool first = layer_id == 0;
  const bool moe = config_.layers[layer_id].ffn != FfnKind::kDense;
  Mark(StepOp::kAddNorm);
  const PendingMoe pending = TakePendingMoe();
  AddNorm(ws.residual.data(), first ? nullptr : ws.attn_out.data(),
          first ? nullptr : ws.ffn_out.data(), weights_.layers()[layer_id].input_norm,
          ws.normed.data(), plan.num_tokens, config_.hidden_size, config_.norm, config_.norm_eps,
          stream_, moe ? ws.normed_fp32.data() : nullptr,
          pending.expert_out != nullptr ? &pending : nullptr);
  RunAttention(layer_id, plan, meta);
  RunFfn(layer_id, plan.num_tokens);
}

void CudaBackend::RunAttention(int64_t layer_id, const StepPlan& plan, const DeviceMetadata& meta) {
  StepWorkspace& ws = *workspace_;
  const DeviceLayer& layer = weights_.layers()[layer_id];
  const LayerSpec& spec = config_.layers[layer_id];
  const int64_t tokens = plan.num_tokens, hidden = config_.hidden_size;
  const int32_t group = kv_pool_->group_of_layer(layer_id);
  RopeKvArgs rope{ws.qkv.data(),
                  meta.positions,
                  meta.slots[group],
                  ws.q.data(),
                  kv_pool_->layer_cache(layer_id),
                  tokens,
                  config_.num_heads,
                  config_.num_kv_heads,
                  config_.head_dim,
                  spec.uses_rope,
                  static_cast<float>(config_.rope_theta)};
  Mark(StepOp::kQkv);
  if (tokens <= kGemvMaxTokens) {
    QkvRopeKv(ws.normed.data(), hidden, layer.qkv, rope, stream_);  // RoPE + KV in the epilogue
  } else {
    Linear(cublas_, ws.normed.data(), tokens, hidden, layer.qkv,
           config_.q_width() + 2 * config_.kv_width(), 1.0f, ws.qkv.data(), stream_);
    Mark(StepOp::kRopeKv);
    RopeAndWriteKv(rope, stream_);
  }
  AttentionArgs attn;
  attn.q = ws.q.data();
  attn.cache = kv_pool_->layer_cache(layer_id);
  attn.positions = meta.positions;
  attn.seq_of_token = meta.seq_of_token;
  attn.block_tables = meta.block_tables[group];
  attn.max_pages = plan.max_pages[group];
  attn.num_tokens = tokens;
  attn.num_heads = config_.num_heads;
  attn.num_kv_heads = config_.num_kv_heads;
  attn.head_dim = config_.head_dim;
  attn.window_tokens = spec.attention == AttentionKind::kSliding ? spec.window_tokens : 0;
  const int64_t context = attn.window_tokens > 0
                              ? std::min(plan.max_context_tokens, attn.window_tokens)
                              : plan.max_context_tokens;
  attn.num_splits =
      ChooseNumSplits(tokens, config_.num_kv_heads, context, num_sms_, kAttentionPartialCapacity);
  attn.out = ws.attn_heads.data();
  attn.partial_acc = ws.attn_partial_acc.data();
  attn.partial_stats = ws.attn_partial_stats.data();
  Mark(StepOp::kAttention);
  if (PreferPrefillAttention(tokens, plan.num_sequences) && PrefillAttentionSupports(attn)) {
    PrefillAttention(attn, stream_);  // tensor cores; one K/V page serves 32 tokens x 8 heads
  } else {
    PagedAttention(attn, stream_);
  }
  Mark(StepOp::kOProj);
  Linear(cublas_, ws.attn_heads.data(), tokens, config_.q_width(), layer.o_proj, hidden, 1.0f,
         ws.attn_out.data(), stream_);
}

void CudaBackend::RunMlp(const DeviceMlp& mlp, int64_t num_tokens, float* out) {
  StepWorkspace& ws = *workspace_;
  const int64_t hidden = config_.hidden_size;
  Linear(cublas_, ws.normed.data(), num_tokens, hidden, mlp.gate_up, 2 * mlp.intermediate, 1.0f,
         ws.gate_up.data(), stream_);
  SiluMul(ws.gate_up.data(), num_tokens, mlp.intermediate, ws.mlp_hidden.data(), stream_);
  Linear(cublas_, ws.mlp_hidden.data(), num_tokens, mlp.intermediate, mlp.down, hidden, 1.0f, out,
         stream_);
}

void CudaBackend::RunFfn(int64_t layer_id, int64_t num_tokens) {
  StepWorkspace& ws = *workspace_;
  const DeviceLayer& layer = weights_.layers()[layer_id];
  if (config_.layers[layer_id].ffn == FfnKind::kDense) {
    Mark(StepOp::kFfn);
    RunMlp(layer.dense, num_tokens, ws.ffn_out.data());
    return;
  }
  const int64_t hidden = config_.hidden_size;
  Mark(StepOp::kRouter);
  const RouterArgs route{ws.router_logits.data(),  num_tokens,
                         config_.num_experts,      config_.num_experts_per_token,
                         config_.expert_selection, config_.norm_topk_prob,
                         ws.expert_ids.data(),     ws.expert_weights.data()};
  // Decode: logits, top-k and (unless an override rewrites the ids) the expert buckets in one
  // launch.
  const bool fused = num_tokens <= kFusedRouterMaxTokens;
  const bool bucketed = fused && routing_override_ == nullptr;
  if (fused) {
    RouterLogitsTopK(ws.normed_fp32.data(), hidden, layer.router, ws.router_logits.data(), route,
                     ws.sync_counters.data(), stream_, bucketed ? &ws.moe : nullptr);
  } else {
    // Prefill chunks: the tensor-core router reads each row once for all experts.
    const bool prefill = num_tokens >= kGroupedMoeMinTokens &&
                         RouterLogitsPrefillSupports(hidden, config_.num_experts);
    (prefill ? RouterLogitsPrefill : RouterLogits)(ws.normed_fp32.data(), num_tokens, hidden,
                                                   layer.router, config_.num_experts,
                                                   ws.router_logits.data(), stream_);
    RouterTopK(route, stream_);
  }
  if (routing_override_ != nullptr) {
    routing_override_->Apply(layer_id, ws.router_logits.data(), num_tokens, ws.expert_ids.data(),
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
              config_.shared_expert_combination,
              num_tokens,
              hidden,
              layer.expert_intermediate,
              config_.num_experts,
              config_.num_experts_per_token,
              ws.ffn_out.data()};
  if (num_tokens >= kGroupedMoeMinTokens && ws.moe.gathered_x != nullptr) {
    MoeForwardGrouped(moe, ws.moe, cublas_, stream_);  // prefill: grouped GEMMs over the experts
  } else {
    MoeExperts(moe, ws.moe, stream_, bucketed);  // the next AddNorm folds the combine in
    pending_moe_layer_ = layer_id;
  }
}

int64_t CudaBackend::CountDistinctExperts(int64_t num_tokens) const {
  if (config_.num_moe_layers() == 0 || num_tokens <= 0) return 0;
  std::vector<int32_t> counts(config_.num_experts);
  MKSERVE_CUDA_CHECK(cudaMemcpyAsync(counts.data(), workspace_->moe.counts,
                                     counts.size() * sizeof(int32_t), cudaMemcpyDeviceToHost,
                                     stream_));
  MKSERVE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return std::count_if(counts.begin(), counts.end(), [](int32_t c) { return c > 0; });
}

}  // namespace mkserve::cuda
