#include "backends/cuda/linear.h"

#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/gemv_tile.cuh"
#include "common/error.h"

namespace mkserve::cuda {
namespace {

constexpr int kGemvWarps = 8;  // one weight row per warp

__global__ void GemvKernel(const __nv_bfloat16* x, int m, int64_t k, const __nv_bfloat16* w,
                           int64_t n, float alpha, float* out) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kGemvWarps) + threadIdx.x / kWarpSize;
  if (row >= n) return;
  const __nv_bfloat16* w_row = w + row * k;
  for (int first = 0; first < m; first += kGemvTokens) {
    const __nv_bfloat16* x_rows[kGemvTokens];
#pragma unroll
    for (int t = 0; t < kGemvTokens; ++t) x_rows[t] = x + (first + t) * k;
    float acc[kGemvTokens];
    const int count = m - first < kGemvTokens ? m - first : kGemvTokens;
    WarpDotRow<kGemvTokens>(w_row, k, x_rows, count, acc);
    if (threadIdx.x % kWarpSize == 0) {
#pragma unroll
      for (int t = 0; t < kGemvTokens; ++t) {
        if (t < count) out[(first + t) * n + row] = alpha * acc[t];
      }
    }
  }
}

void CheckShape(int64_t m, int64_t k, int64_t n) {
  if (m < 0 || n <= 0 || k <= 0 || k % kVecElements != 0) {
    throw Error("Linear: unsupported shape m=" + std::to_string(m) + " k=" + std::to_string(k) +
                " n=" + std::to_string(n) + " (k must be a positive multiple of 8)");
  }
}

}  // namespace

void GemvSmallM(const __nv_bfloat16* x, int64_t m, int64_t k, const __nv_bfloat16* w, int64_t n,
                float alpha, float* out, cudaStream_t stream) {
  CheckShape(m, k, n);
  if (m == 0) return;
  const unsigned blocks = static_cast<unsigned>(CeilDiv(n, kGemvWarps));
  GemvKernel<<<blocks, kGemvWarps * kWarpSize, 0, stream>>>(x, static_cast<int>(m), k, w, n, alpha,
                                                            out);
  MKSERVE_CUDA_CHECK_LAUNCH();
}

// Row-major out[m][n] = x[m][k] . w[n][k]^T is column-major out^T = w^T(as stored) x: cuBLAS
// sees w as a k x n column-major matrix, transposed, times x as k x m.
void GemmCublas(cublasHandle_t cublas, const __nv_bfloat16* x, int64_t m, int64_t k,
                const __nv_bfloat16* w, int64_t n, float alpha, float* out, cudaStream_t stream) {
  CheckShape(m, k, n);
  if (m == 0) return;
  const float beta = 0.0f;
  MKSERVE_CUBLAS_CHECK(cublasSetStream(cublas, stream));
  MKSERVE_CUBLAS_CHECK(cublasGemmEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n),
                                    static_cast<int>(m), static_cast<int>(k), &alpha, w,
                                    CUDA_R_16BF, static_cast<int>(k), x, CUDA_R_16BF,
                                    static_cast<int>(k), &beta, out, CUDA_R_32F,
                                    static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void Linear(cublasHandle_t cublas, const __nv_bfloat16* x, int64_t m, int64_t k,
            const __nv_bfloat16* w, int64_t n, float alpha, float* out, cudaStream_t stream) {
  if (m <= kGemvMaxTokens) {
    GemvSmallM(x, m, k, w, n, alpha, out, stream);
  } else {
    GemmCublas(cublas, x, m, k, w, n, alpha, out, stream);
  }
}

}  // namespace mkserve::cuda
