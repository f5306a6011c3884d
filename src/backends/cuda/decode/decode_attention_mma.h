// Tensor-core split-KV attention for decode rows (mma.sync m16n8k16, bf16 in, fp32 accumulate):
// one CTA per (token, kv head, split), the kv head's query heads as the M rows. Same key ranges,
// log2-domain softmax and partial-state format as the CUDA-core kernel, so PagedAttention's
// combine kernel merges its splits.
#pragma once

#include <cuda_runtime.h>

#include "backends/cuda/decode/attention.h"

namespace mkserve::cuda {

// head_dim 16, 32, 64 or 128 and at most 16 query heads per kv head.
bool DecodeAttentionMmaSupports(const AttentionArgs& args);

// The split kernel only: writes `out` for one split, else the partial states (the caller then
// launches the combine).
void LaunchDecodeAttentionMma(const AttentionArgs& args, cudaStream_t stream);

}  // namespace mkserve::cuda
