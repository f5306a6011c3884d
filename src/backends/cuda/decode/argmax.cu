#include "backends/cuda/decode/argmax.h"

#include <climits>
#include <cmath>

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/core/kernel_common.cuh"
#include "backends/cuda/core/pdl_launch.h"

namespace mkserve::cuda {
namespace {

constexpr int kArgmaxThreads = 1024;

// Better = larger value, or equal value and lower id. NaN never wins.
__device__ inline bool Better(float value, int32_t id, float best, int32_t best_id) {
  return value > best || (value == best && id < best_id);
}

constexpr int kArgmaxUnroll = 8;  // float4 loads in flight per thread

__device__ inline void Consider(float value, int64_t i, float* best, int32_t* best_id) {
  if (Better(value, static_cast<int32_t>(i), *best, *best_id)) {
    *best = value;
    *best_id = static_cast<int32_t>(i);
  }
}

// Rows of a multiple of 4 floats: kArgmaxUnroll float4 loads per thread before any compare.
__device__ inline void ScanRowVec4(const float* row, int64_t vocab, float* best, int32_t* best_id) {
  const auto* row4 = reinterpret_cast<const float4*>(row);
  const int64_t quads = vocab / 4;
  for (int64_t base = threadIdx.x; base < quads; base += blockDim.x * kArgmaxUnroll) {
    float4 v[kArgmaxUnroll];
#pragma unroll
    for (int u = 0; u < kArgmaxUnroll; ++u) {
      const int64_t i = base + u * blockDim.x;
      v[u] = i < quads ? row4[i] : make_float4(NAN, NAN, NAN, NAN);  // NaN never wins
    }
#pragma unroll
    for (int u = 0; u < kArgmaxUnroll; ++u) {
      const int64_t i = 4 * (base + u * blockDim.x);
      Consider(v[u].x, i, best, best_id);
      Consider(v[u].y, i + 1, best, best_id);
      Consider(v[u].z, i + 2, best, best_id);
      Consider(v[u].w, i + 3, best, best_id);
    }
  }
}

__global__ void ArgmaxKernel(const float* logits, int64_t vocab, int32_t* token_ids) {
  __shared__ float best_values[kArgmaxThreads / kWarpSize];
  __shared__ int32_t best_ids[kArgmaxThreads / kWarpSize];
  WaitForPrevious();
  AllowNext();
  const float* row = logits + blockIdx.x * vocab;
  float best = -INFINITY;
  int32_t best_id = INT_MAX;
  if (vocab % 4 == 0) {
    ScanRowVec4(row, vocab, &best, &best_id);
  } else {
    for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) Consider(row[i], i, &best, &best_id);
  }
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    float other = __shfl_xor_sync(0xffffffffu, best, offset);
    int32_t other_id = __shfl_xor_sync(0xffffffffu, best_id, offset);
    if (Better(other, other_id, best, best_id)) {
      best = other;
      best_id = other_id;
    }
  }
  const int warp = threadIdx.x / kWarpSize;
  if (threadIdx.x % kWarpSize == 0) {
    best_values[warp] = best;
    best_ids[warp] = best_id;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  for (int w = 1; w < kArgmaxThreads / kWarpSize; ++w) {
    if (Better(best_values[w], best_ids[w], best, best_id)) {
      best = best_values[w];
      best_id = best_ids[w];
    }
  }
  token_ids[blockIdx.x] = best_id == INT_MAX ? 0 : best_id;  // all-NaN row: token 0
}

}  // namespace

void ArgmaxRows(const float* logits, int64_t num_rows, int64_t vocab, int32_t* token_ids,
                cudaStream_t stream) {
  if (num_rows <= 0) return;
  LaunchPdl(&ArgmaxKernel, dim3(static_cast<unsigned>(num_rows)), dim3(kArgmaxThreads), 0, stream,
            logits, vocab, token_ids);
}

}  // namespace mkserve::cuda
