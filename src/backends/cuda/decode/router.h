// Router top-k from the router logits [num_tokens][num_experts] (fp32): the k largest logits
// (ties: lower expert id), weighted by sigmoid(logit) (optionally divided by their sum:
// norm_topk_prob) or by the softmax over the k selected logits (always renormalised, as the CPU
// reference and HF do).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/decode/moe.h"
#include "model/model_config.h"

namespace mkserve::cuda {

inline constexpr int64_t kMaxRouterExperts = 256;
inline constexpr int64_t kMaxTopK = 16;

struct RouterArgs {
  const float* logits = nullptr;  // [num_tokens][num_experts]
  int64_t num_tokens = 0;
  int64_t num_experts = 0;
  int64_t top_k = 0;
  ExpertSelection selection = ExpertSelection::kSigmoid;
  bool renormalize = false;       // sigmoid only
  int32_t* expert_ids = nullptr;  // [num_tokens][top_k], best first
  float* weights = nullptr;       // [num_tokens][top_k]
};

void RouterTopK(const RouterArgs& args, cudaStream_t stream);

// Router logits out[m][n] = sum_k x[m][k] * w[n][k] from the fp32 normalized hidden state (not
// its bf16 copy): near-tied logits then round like the fp32 reference, so top-k picks flip less.
// bf16 weights, fp32 accumulation; k must be a positive multiple of 8.
void RouterLogits(const float* x, int64_t m, int64_t k, const __nv_bfloat16* w, int64_t n,
                  float* out, cudaStream_t stream);

inline constexpr int64_t kFusedRouterMaxTokens = 8;  // the last block: one token per warp

// RouterLogits then RouterTopK in one launch, for decode-sized batches (at most
// kFusedRouterMaxTokens tokens): logits land in `logits` (topk.logits names the same buffer),
// the last block to finish its rows selects every token's experts. `done_counter` is one device
// int, zero before the first call; each call leaves it zero. Same results as the two calls.
// With `bucket`, that block also does MoeBucket's work (then MoeExperts(..., true)).
void RouterLogitsTopK(const float* x, int64_t k, const __nv_bfloat16* w, float* logits,
                      const RouterArgs& topk, int32_t* done_counter, cudaStream_t stream,
                      const MoeWorkspace* bucket = nullptr);

}  // namespace mkserve::cuda
