#include "backends/cuda/norm.h"

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernel_common.cuh"

namespace mkserve::cuda {
namespace {

constexpr int kNormThreads = 256;

__global__ void AddNormKernel(float* residual, const float* add_a, const float* add_b,
                              const __nv_bfloat16* gamma, __nv_bfloat16* out, int64_t hidden,
                              bool layer_norm, float eps, float* out_fp32) {
  __shared__ float scratch[kNormThreads / kWarpSize];
  float* x = residual + blockIdx.x * hidden;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    float v = x[i];
    if (add_a != nullptr) v += add_a[blockIdx.x * hidden + i];
    if (add_b != nullptr) v += add_b[blockIdx.x * hidden + i];
    x[i] = v;
    sum += v;
  }
  const float mean = layer_norm ? BlockSum(sum, scratch) / static_cast<float>(hidden) : 0.0f;
  float squares = 0.0f;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    float centred = x[i] - mean;
    squares += centred * centred;
  }
  const float inv = rsqrtf(BlockSum(squares, scratch) / static_cast<float>(hidden) + eps);
  __nv_bfloat16* y = out + blockIdx.x * hidden;
  float* y_fp32 = out_fp32 != nullptr ? out_fp32 + blockIdx.x * hidden : nullptr;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float value = (x[i] - mean) * inv * __bfloat162float(gamma[i]);
    y[i] = __float2bfloat16(value);
    if (y_fp32 != nullptr) y_fp32[i] = value;
  }
}

}  // namespace

void AddNorm(float* residual, const float* add_a, const float* add_b, const __nv_bfloat16* gamma,
             __nv_bfloat16* out, int64_t num_tokens, int64_t hidden, NormKind kind, float eps,
             cudaStream_t stream, float* out_fp32) {
  if (num_tokens <= 0) return;
  AddNormKernel<<<static_cast<unsigned>(num_tokens), kNormThreads, 0, stream>>>(
      residual, add_a, add_b, gamma, out, hidden, kind == NormKind::kLayerNorm, eps, out_fp32);
  MKSERVE_CUDA_CHECK_LAUNCH();
}

}  // namespace mkserve::cuda
