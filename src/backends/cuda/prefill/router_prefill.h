// Router logits for prefill-sized token counts on tensor cores: logits[m][n] = x[m][k] . w[n][k]
// with x fp32 (the unrounded normed row, see docs/cuda-backend.md "Router precision") and w bf16.
// Each x element is split into three bf16 terms, hi + mid + lo, which hold its 24-bit significand
// (8 bits each), so every product reaches the fp32 accumulator as exactly as in RouterLogits; only
// the summation order differs. RouterLogits (router.h) re-reads x once per 4 experts, which costs
// ~1 ms per layer at 8K tokens; this reads it once per 128 experts.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace mkserve::cuda {

// Token counts from which the engine routes with this kernel (prefill chunks).
inline constexpr int64_t kRouterPrefillMinTokens = 128;

// k a multiple of 32 (n any positive).
bool RouterLogitsPrefillSupports(int64_t k, int64_t n);

// Throws mkserve::Error on an unsupported shape.
void RouterLogitsPrefill(const float* x, int64_t m, int64_t k, const __nv_bfloat16* w, int64_t n,
                         float* out, cudaStream_t stream);

}  // namespace mkserve::cuda
