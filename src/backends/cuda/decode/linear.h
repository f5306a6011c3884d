// Linear layers: out[m][n] = alpha * sum_k x[m][k] * w[n][k], bf16 inputs, fp32 accumulate and
// fp32 output. Small M (decode) runs our weight-streaming GEMV; larger M runs cuBLAS GemmEx.
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace mkserve::cuda {

inline constexpr int64_t kGemvMaxTokens = 8;  // above this, cuBLAS

void Linear(cublasHandle_t cublas, const __nv_bfloat16* x, int64_t m, int64_t k,
            const __nv_bfloat16* w, int64_t n, float alpha, float* out, cudaStream_t stream);

// The two paths on their own (tests and the benchmark compare them).
void GemvSmallM(const __nv_bfloat16* x, int64_t m, int64_t k, const __nv_bfloat16* w, int64_t n,
                float alpha, float* out, cudaStream_t stream);
void GemmCublas(cublasHandle_t cublas, const __nv_bfloat16* x, int64_t m, int64_t k,
                const __nv_bfloat16* w, int64_t n, float alpha, float* out, cudaStream_t stream);

}  // namespace mkserve::cuda
