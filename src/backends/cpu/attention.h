// Causal GQA attention of one sequence's chunk in one layer, over the paged KV cache: the chunk's
// K/V go into the slots its block table names, then each query attends to every cached key from
// the start of its window (FirstKeyInWindow on sliding layers, position 0 otherwise) up to itself.
// Blocks before a sliding window are never read, so the engine may release them (-1).
#pragma once

#include <cstdint>
#include <span>

#include "backends/cpu/kv_cache.h"
#include "common/thread_pool.h"
#include "model/model_config.h"

namespace mkserve::cpu {

struct AttentionChunk {
  int64_t layer = 0;
  std::span<const int32_t> block_table;  // the table of the layer's KV group
  int64_t start_position = 0;            // position of the chunk's first token
  int64_t num_tokens = 0;
};

// The first key position a query at `position` reads in this layer.
int64_t FirstAttendedPosition(const LayerSpec& spec, int64_t position);

// q: [num_tokens, num_heads * head_dim], already rotated where the layer uses RoPE; k, v:
// [num_tokens, num_kv_heads * head_dim]; out: [num_tokens, num_heads * head_dim], the heads'
// outputs before o_proj. Scores are scaled by 1/sqrt(head_dim) and softmaxed in fp32.
void PagedAttention(const ModelConfig& config, const LayerSpec& spec, const AttentionChunk& chunk,
                    std::span<const float> q, std::span<const float> k, std::span<const float> v,
                    KvCache& cache, std::span<float> out, ThreadPool& pool);

}  // namespace mkserve::cpu
