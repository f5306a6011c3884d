// Embedding gather: out[t] = float(table[token_ids[t]]), the fp32 residual stream's start.
// Token ids are validated on the host before the launch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace mkserve::cuda {

void EmbedTokens(const int32_t* token_ids, const __nv_bfloat16* table, float* out,
                 int64_t num_tokens, int64_t hidden, cudaStream_t stream);

}  // namespace mkserve::cuda

namespace mkserve::cuda {

// dst[i] = src[rows[i]] for rows of `width` bf16 (the LM head's input rows).
void GatherRows(const __nv_bfloat16* src, const int32_t* rows, int64_t num_rows, int64_t width,
                __nv_bfloat16* dst, cudaStream_t stream);

}  // namespace mkserve::cuda
