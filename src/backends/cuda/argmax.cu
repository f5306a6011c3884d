#include "backends/cuda/argmax.h"

#include <climits>
#include <cmath>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernel_common.cuh"

namespace mkserve::cuda {
namespace {

constexpr int kArgmaxThreads = 1024;

// Better = larger value, or equal value and lower id. NaN never wins.
__device__ inline bool Better(float value, int32_t id, float best, int32_t best_id) {
  return value > best || (value == best && id < best_id);
}

__global__ void ArgmaxKernel(const float* logits, int64_t vocab, int32_t* token_ids) {
  __shared__ float best_values[kArgmaxThreads / kWarpSize];
  __shared__ int32_t best_ids[kArgmaxThreads / kWarpSize];
  const float* row = logits + blockIdx.x * vocab;
  float best = -INFINITY;
  int32_t best_id = INT_MAX;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    if (Better(row[i], static_cast<int32_t>(i), best, best_id)) {
      best = row[i];
      best_id = static_cast<int32_t>(i);
    }
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
  ArgmaxKernel<<<static_cast<unsigned>(num_rows), kArgmaxThreads, 0, stream>>>(logits, vocab,
                                                                               token_ids);
  MKSERVE_CUDA_CHECK_LAUNCH();
}

}  // namespace mkserve::cuda
