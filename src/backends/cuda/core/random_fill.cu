#include "backends/cuda/core/random_fill.h"

#include <cmath>

#include "backends/cuda/core/cuda_check.h"
#include "common/mix64.h"

namespace mkserve::cuda {
namespace {

constexpr float kTwoPi = 6.28318530717958647692f;
constexpr double kInv2Pow24 = 1.0 / 16777216.0;

// Box-Muller on two 24-bit uniforms; u1 in (0, 1] so the log is finite.
__host__ __device__ inline float NormalFromCounter(uint64_t seed, uint64_t stream_id,
                                                   uint64_t index) {
  uint64_t bits = Mix64(Mix64(seed ^ 0x9e3779b97f4a7c15ULL) + Mix64(stream_id) + index);
  float u1 = static_cast<float>(((bits >> 40) + 1) * kInv2Pow24);
  float u2 = static_cast<float>(((bits >> 16) & 0xffffff) * kInv2Pow24);
  return sqrtf(-2.0f * logf(u1)) * cosf(kTwoPi * u2);
}

__global__ void FillNormalKernel(__nv_bfloat16* dst, int64_t count, float mean, float stddev,
                                 uint64_t seed, uint64_t stream_id) {
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += stride) {
    dst[i] = __float2bfloat16(mean + stddev * NormalFromCounter(seed, stream_id, i));
  }
}

}  // namespace

void FillNormal(__nv_bfloat16* dst, int64_t count, float mean, float stddev, uint64_t seed,
                uint64_t stream_id, cudaStream_t stream) {
  if (count <= 0) return;
  constexpr int kThreads = 256;
  constexpr int64_t kMaxBlocks = 65536;
  int64_t blocks = (count + kThreads - 1) / kThreads;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  FillNormalKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(dst, count, mean, stddev,
                                                                           seed, stream_id);
  MKSERVE_CUDA_CHECK_LAUNCH();
}

float NormalAt(uint64_t seed, uint64_t stream_id, int64_t index) {
  return NormalFromCounter(seed, stream_id, static_cast<uint64_t>(index));
}

}  // namespace mkserve::cuda
