// Flash-style attention for prefill chunks on tensor cores (mma.sync bf16 -> fp32) over the paged
// KV cache. One CTA takes 32 consecutive tokens of the step and one kv head; each warp is one
// query head of that kv head's group (two m16 tiles), so a K/V page loaded into shared memory
// serves all of the group's heads (GQA) and each K/V fragment feeds two mmas. Same semantics as
// PagedAttention (attention.h): causal, sliding window per FirstKeyInWindow, online softmax in fp32
// in the log2 domain; probabilities are rounded to bf16 for the P.V product. A 32-token tile that
// spans sequences runs one pass per sequence.
#pragma once

#include <cuda_runtime.h>

#include "backends/cuda/decode/attention.h"

namespace mkserve::cuda {

inline constexpr int64_t kPrefillQueryTile = 32;  // tokens per CTA (two m16 tiles per warp)

// Head_dim 16, 32, 64 or 128 and at most 8 query heads per kv head.
bool PrefillAttentionSupports(const AttentionArgs& args);

// Whether the tensor-core kernel pays off for a step: at least 64 tokens and 16 per sequence on
// average (decode rows stay on PagedAttention's split-KV path).
bool PreferPrefillAttention(int64_t num_tokens, int64_t num_sequences);

// Writes args.out; ignores num_splits and the partial buffers. Throws mkserve::Error on an
// unsupported shape.
void PrefillAttention(const AttentionArgs& args, cudaStream_t stream);

}  // namespace mkserve::cuda
