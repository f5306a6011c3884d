// StepWorkspace: every device scratch buffer one step needs, sized once for max_num_tokens so a
// step never allocates (and a CUDA graph can capture it).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "backends/cuda/core/device_buffer.h"
#include "backends/cuda/core/host_mapped_buffer.h"
#include "backends/cuda/decode/moe.h"
#include "model/model_config.h"

namespace mkserve::cuda {

inline constexpr int64_t kLogitRowsPerChunk = 64;
inline constexpr int64_t kAttentionPartialCapacity = 1024;  // token-splits of split-KV partials

struct StepWorkspace {
  StepWorkspace(const ModelConfig& config, int64_t max_num_tokens);

  int64_t max_num_tokens = 0;
  DeviceBuffer<float> residual;              // [T][hidden]
  DeviceBuffer<__nv_bfloat16> normed;        // [T][hidden]
  DeviceBuffer<float> normed_fp32;           // [T][hidden], MoE models: the router's input
  DeviceBuffer<float> qkv;                   // [T][q_width + 2 kv_width]
  DeviceBuffer<__nv_bfloat16> q;             // [T][q_width]
  DeviceBuffer<__nv_bfloat16> attn_heads;    // [T][q_width]
  DeviceBuffer<float> attn_out;              // [T][hidden]
  DeviceBuffer<float> ffn_out;               // [T][hidden]
  DeviceBuffer<float> shared_out;            // [T][hidden] (shared experts only)
  DeviceBuffer<float> gate_up;               // [T][2 * widest dense or shared MLP]
  DeviceBuffer<__nv_bfloat16> mlp_hidden;    // [T][widest dense or shared MLP]
  DeviceBuffer<float> router_logits;         // [T][num_experts]
  DeviceBuffer<int32_t> expert_ids;          // [T][top_k]
  DeviceBuffer<float> expert_weights;        // [T][top_k]
  DeviceBuffer<int32_t> moe_index;           // counts, offsets, cursors, slot maps
  DeviceBuffer<__nv_bfloat16> moe_hidden;    // [T * top_k][expert width]
  DeviceBuffer<float> moe_expert_out;        // [T * top_k][hidden]
  DeviceBuffer<float> attn_partial_acc;      // [capacity][heads][head_dim]
  DeviceBuffer<float> attn_partial_stats;    // [capacity][heads][2]
  DeviceBuffer<float> prefill_carry_acc;     // [T][q_width] (prefill_attention.h)
  DeviceBuffer<float> prefill_carry_stats;   // [T][heads][kPrefillCarryStats]
  DeviceBuffer<int32_t> metadata;            // the step plan's arrays, packed
  DeviceBuffer<__nv_bfloat16> logit_inputs;  // [kLogitRowsPerChunk][hidden]
  DeviceBuffer<float> logits;                // [kLogitRowsPerChunk][vocab]
  HostMappedBuffer<int32_t> sampled;         // [kLogitRowsPerChunk] argmax / in-kernel samples
  DeviceBuffer<int32_t> sync_counters;       // [1] the fused router's done counter, kept 0

  MoeWorkspace moe;  // views into moe_index / moe_hidden / moe_expert_out
};

}  // namespace mkserve::cuda
