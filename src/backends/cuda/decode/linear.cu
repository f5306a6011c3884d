#include "backends/cuda/decode/linear.h"

#include <string>

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/decode/gemv_tile.cuh"
#include "common/error.h"

namespace mkserve::cuda {
namespace {

// out[t][row] = alpha * dot(w[row], x[t]) over rows grouped kRows per warp.
template <int kRows>
struct LinearJob {
  const __nv_bfloat16* x;
  int m;
  int64_t k;
  const __nv_bfloat16* w;
  int64_t n;
  float alpha;
  float* out;

  __device__ bool Begin() const { return true; }
  __device__ bool Prefetchable() const { return true; }
  __device__ int64_t K() const { return k; }
  __device__ int64_t NumGroups() const { return (n + kRows - 1) / kRows; }
  __device__ int NumTokens() const { return m; }
  __device__ const __nv_bfloat16* ActivationRow(int t) const { return x + t * k; }
  __device__ const __nv_bfloat16* WeightRow(int64_t g, int r) const {
    return w + min(g * kRows + r, n - 1) * k;  // past the end: a valid row, never stored
  }
  __device__ void Store(int64_t g, int t, const float (&vals)[kRows]) const {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (g * kRows + r < n) out[t * n + g * kRows + r] = alpha * vals[r];
    }
  }
};

// Long rows: 2 rows x 8 vectors per lane (16 loads in flight); short rows (expert down, 768):
// 4 rows x 4 vectors. One activation row (decode at batch 1) compiles without the token loop.
template <int kRows, int kVecs>
void LaunchLinear(const LinearJob<kRows>& job, cudaStream_t stream) {
  const int64_t groups = CeilDiv(job.n, kRows);
  if (job.m == 1) {
    LaunchGemvJob<kRows, kVecs, 1>(job, groups, job.k, 1, stream);
  } else {
    LaunchGemvJob<kRows, kVecs, kGemvTokens>(job, groups, job.k, 1, stream);
  }
}

void CheckShape(int64_t m, int64_t k, int64_t n) {
  if (m < 0 || n <= 0 || k <= 0 || k % kVecElements != 0 || m > (int64_t{1} << 30)) {
    throw Error("Linear: unsupported shape m=" + std::to_string(m) + " k=" + std::to_string(k) +
                " n=" + std::to_string(n) + " (k must be a positive multiple of 8)");
  }
}

}  // namespace

void GemvSmallM(const __nv_bfloat16* x, int64_t m, int64_t k, const __nv_bfloat16* w, int64_t n,
                float alpha, float* out, cudaStream_t stream) {
  CheckShape(m, k, n);
  if (m == 0) return;
  const int mi = static_cast<int>(m);
  if (k / kVecElements > 4 * kWarpSize) {
    LaunchLinear<2, 8>(LinearJob<2>{x, mi, k, w, n, alpha, out}, stream);
  } else {
    LaunchLinear<4, 4>(LinearJob<4>{x, mi, k, w, n, alpha, out}, stream);
  }
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
