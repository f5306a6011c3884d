// Paged attention over the KV cache, one kernel for prefill chunks and decode rows. Each query
// token attends to keys [FirstKeyInWindow(pos, window), pos] of its sequence (causal; sliding
// when window_tokens > 0), GQA: every kv head serves num_heads / num_kv_heads query heads.
// Split-KV: the key range is divided into num_splits page ranges whose partial softmax states
// are combined by a second kernel (decode with few rows and long contexts).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace mkserve::cuda {

struct AttentionArgs {
  const __nv_bfloat16* q = nullptr;  // [num_tokens][num_heads][head_dim], RoPE applied
  const __nv_bfloat16* cache =
      nullptr;                         // this layer: [blocks][kBlockTokens][2][kv_heads][head_dim]
  const int32_t* positions = nullptr;  // [num_tokens]
  const int32_t* seq_of_token = nullptr;  // [num_tokens] row of block_tables
  const int32_t* block_tables = nullptr;  // [num_seqs][max_pages], this layer's KV group
  int64_t max_pages = 0;
  int64_t num_tokens = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t window_tokens = 0;  // 0: full attention
  int num_splits = 1;
  __nv_bfloat16* out = nullptr;    // [num_tokens][num_heads][head_dim]
  float* partial_acc = nullptr;    // [num_tokens][num_heads][num_splits][head_dim]
  float* partial_stats = nullptr;  // [num_tokens][num_heads][num_splits][2]: max, sum (log2)
};

// Split count for a launch: enough CTAs to cover the GPU, never more than the pages of the
// longest context, and within the partial buffers' capacity (token-splits).
int ChooseNumSplits(int64_t num_tokens, int64_t num_kv_heads, int64_t max_context_tokens,
                    int num_sms, int64_t partial_capacity);

// Decode rows and small prefill chunks: the tensor-core kernel (decode_attention_mma.h) where it
// supports the shape, else the CUDA-core kernel.
void PagedAttention(const AttentionArgs& args, cudaStream_t stream);

// The CUDA-core kernel alone (one warp per query head): every supported shape; tests compare it.
void PagedAttentionCudaCores(const AttentionArgs& args, cudaStream_t stream);

}  // namespace mkserve::cuda
