#include "backends/cuda/decode/norm.h"

#include <string>

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/core/kernel_common.cuh"
#include "backends/cuda/core/pdl_launch.h"
#include "common/error.h"

namespace mkserve::cuda {
namespace {

constexpr int kNormThreads = 1024;  // one token per block: latency-bound, so wide

struct NormArgs {
  float* residual;
  const float* add_a;
  const float* add_b;  // ignored when moe.expert_out is set
  const __nv_bfloat16* gamma;
  __nv_bfloat16* out;
  int64_t hidden;
  bool layer_norm;
  float eps;
  float* out_fp32;
  PendingMoe moe;
};

// The MoE output of element i of token t, summed exactly as MoeCombine does.
// Every expert row's load is issued before the first FMA (top_k is a run-time bound).
__device__ inline float CombinedMoe(const PendingMoe& moe, const int32_t* slots,
                                    const float* weights, int64_t t, int64_t i, int64_t hidden) {
  float rows[kMaxPendingTopK];
#pragma unroll
  for (int j = 0; j < kMaxPendingTopK; ++j) {
    rows[j] = j < moe.top_k ? moe.expert_out[slots[j] * hidden + i] : 0.0f;
  }
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kMaxPendingTopK; ++j) {
    if (j < moe.top_k) sum = fmaf(weights[j], rows[j], sum);
  }
  if (moe.shared_out != nullptr) sum += moe.shared_out[t * hidden + i];
  return sum * moe.scale;
}

__global__ void __launch_bounds__(kNormThreads) AddNormKernel(NormArgs a) {
  __shared__ float scratch[kNormThreads / kWarpSize];
  __shared__ int32_t slots[kMaxPendingTopK];
  __shared__ float weights[kMaxPendingTopK];
  WaitForPrevious();
  AllowNext();
  const int64_t t = blockIdx.x, hidden = a.hidden;
  const bool pending = a.moe.expert_out != nullptr;
  if (pending && threadIdx.x < a.moe.top_k) {
    slots[threadIdx.x] = a.moe.slot_of_assignment[t * a.moe.top_k + threadIdx.x];
    weights[threadIdx.x] = a.moe.weights[t * a.moe.top_k + threadIdx.x];
  }
  __syncthreads();
  float* x = a.residual + t * hidden;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    float v = x[i];
    if (a.add_a != nullptr) v += a.add_a[t * hidden + i];
    if (pending) {
      v += CombinedMoe(a.moe, slots, weights, t, i, hidden);
    } else if (a.add_b != nullptr) {
      v += a.add_b[t * hidden + i];
    }
    x[i] = v;
    sum += v;
  }
  const float mean = a.layer_norm ? BlockSum(sum, scratch) / static_cast<float>(hidden) : 0.0f;
  float squares = 0.0f;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    float centred = x[i] - mean;
    squares += centred * centred;
  }
  const float inv = rsqrtf(BlockSum(squares, scratch) / static_cast<float>(hidden) + a.eps);
  __nv_bfloat16* y = a.out + t * hidden;
  float* y_fp32 = a.out_fp32 != nullptr ? a.out_fp32 + t * hidden : nullptr;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float value = (x[i] - mean) * inv * __bfloat162float(a.gamma[i]);
    y[i] = __float2bfloat16(value);
    if (y_fp32 != nullptr) y_fp32[i] = value;
  }
}

}  // namespace

void AddNorm(float* residual, const float* add_a, const float* add_b, const __nv_bfloat16* gamma,
             __nv_bfloat16* out, int64_t num_tokens, int64_t hidden, NormKind kind, float eps,
             cudaStream_t stream, float* out_fp32, const PendingMoe* moe) {
  if (moe != nullptr && (moe->top_k <= 0 || moe->top_k > kMaxPendingTopK)) {
    throw Error("AddNorm: pending MoE top_k " + std::to_string(moe->top_k) + " outside 1.." +
                std::to_string(kMaxPendingTopK));
  }
  if (num_tokens <= 0) return;
  const NormArgs args{residual,
                      add_a,
                      add_b,
                      gamma,
                      out,
                      hidden,
                      kind == NormKind::kLayerNorm,
                      eps,
                      out_fp32,
                      moe != nullptr ? *moe : PendingMoe{}};
  LaunchPdl(&AddNormKernel, dim3(static_cast<unsigned>(num_tokens)), dim3(kNormThreads), 0, stream,
            args);
}

}  // namespace mkserve::cuda
