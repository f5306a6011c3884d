// The inner loop of every small-M weight-streaming kernel: one warp dots one weight row with up
// to kTokens activation rows. The weight row streams once with 16-byte loads; activation rows are
// small and come from L1/L2. Requires k % 8 == 0 and 16-byte aligned rows.
#pragma once

#include "backends/cuda/kernel_common.cuh"

namespace mkserve::cuda {

inline constexpr int kGemvTokens = 8;  // activation rows per pass

// acc[t] = dot(w_row, x_rows[t]) for t < count, summed over the warp (every lane gets it).
template <int kTokens>
__device__ inline void WarpDotRow(const __nv_bfloat16* w_row, int64_t k,
                                  const __nv_bfloat16* const (&x_rows)[kTokens], int count,
                                  float (&acc)[kTokens]) {
  const int lane = threadIdx.x % kWarpSize;
#pragma unroll
  for (int t = 0; t < kTokens; ++t) acc[t] = 0.0f;
  for (int64_t c = lane * kVecElements; c < k; c += kWarpSize * kVecElements) {
    float w[kVecElements];
    Bf16x8ToFloat(LoadBf16x8(w_row + c), w);
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      if (t < count) {
        float x[kVecElements];
        Bf16x8ToFloat(LoadBf16x8(x_rows[t] + c), x);
#pragma unroll
        for (int i = 0; i < kVecElements; ++i) acc[t] = fmaf(w[i], x[i], acc[t]);
      }
    }
  }
#pragma unroll
  for (int t = 0; t < kTokens; ++t) acc[t] = WarpSum(acc[t]);
}

}  // namespace mkserve::cuda
