#include "backends/cuda/router.h"

#include <climits>
#include <cmath>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernel_common.cuh"
#include "common/error.h"

namespace mkserve::cuda {
namespace {

constexpr int kPerLane = static_cast<int>(kMaxRouterExperts) / kWarpSize;
constexpr int kRouterWarps = 4;

// Lane holds experts lane, lane + 32, ...; picks the best remaining (value, then lower id).
__device__ inline void WarpArgmax(float value, int id, float* best_value, int* best_id) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    float other_value = __shfl_xor_sync(0xffffffffu, value, offset);
    int other_id = __shfl_xor_sync(0xffffffffu, id, offset);
    if (other_value > value || (other_value == value && other_id < id)) {
      value = other_value;
      id = other_id;
    }
  }
  *best_value = value;
  *best_id = id;
}

// One warp per token.
__global__ void RouterKernel(RouterArgs a) {
  const int64_t t = blockIdx.x * kRouterWarps + threadIdx.x / kWarpSize;
  if (t >= a.num_tokens) return;
  const int lane = threadIdx.x % kWarpSize;
  const float* row = a.logits + t * a.num_experts;
  float values[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int e = lane + i * kWarpSize;
    values[i] = e < a.num_experts ? row[e] : -INFINITY;
  }
  bool taken[kPerLane] = {};
  float picked_sum = 0.0f, top_logit = 0.0f;
  for (int j = 0; j < a.top_k; ++j) {
    float local = -INFINITY;
    int local_id = INT_MAX;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {  // ascending ids: strict > keeps the lower id on ties
      const int e = lane + i * kWarpSize;
      if (e < a.num_experts && !taken[i] && (local_id == INT_MAX || values[i] > local)) {
        local = values[i];
        local_id = e;
      }
    }
    float best;
    int best_id;
    WarpArgmax(local, local_id, &best, &best_id);
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      if (lane + i * kWarpSize == best_id) taken[i] = true;
    }
    if (j == 0) top_logit = best;
    // Softmax over the selected logits (= full softmax renormalised over the top k).
    const float w = a.selection == ExpertSelection::kSigmoid ? 1.0f / (1.0f + expf(-best))
                                                             : expf(best - top_logit);
    picked_sum += w;
    if (lane == 0) {
      a.expert_ids[t * a.top_k + j] = best_id;
      a.weights[t * a.top_k + j] = w;
    }
  }
  const bool divide = a.selection == ExpertSelection::kSoftmax || a.renormalize;
  if (divide && lane == 0) {
    for (int j = 0; j < a.top_k; ++j) a.weights[t * a.top_k + j] /= picked_sum;
  }
}

constexpr int kLogitWarps = 8;   // one expert row per warp
constexpr int kLogitTokens = 8;  // tokens per block: each weight row is read once per 8 tokens

// Grid: x over expert rows, y over groups of kLogitTokens tokens.
__global__ void RouterLogitsKernel(const float* x, int m, int64_t k, const __nv_bfloat16* w,
                                   int64_t n, float* out) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kLogitWarps) + threadIdx.x / kWarpSize;
  if (row >= n) return;
  const int first = blockIdx.y * kLogitTokens;
  const int count = m - first < kLogitTokens ? m - first : kLogitTokens;
  const int lane = threadIdx.x % kWarpSize;
  float acc[kLogitTokens] = {};
  for (int64_t c = lane * kVecElements; c < k; c += kWarpSize * kVecElements) {
    float wv[kVecElements];
    Bf16x8ToFloat(LoadBf16x8(w + row * k + c), wv);
#pragma unroll
    for (int t = 0; t < kLogitTokens; ++t) {
      if (t >= count) break;
      const float4* xp = reinterpret_cast<const float4*>(x + (first + t) * k + c);
      const float4 lo = xp[0], hi = xp[1];
      const float xv[kVecElements] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
      for (int i = 0; i < kVecElements; ++i) acc[t] = fmaf(wv[i], xv[i], acc[t]);
    }
  }
#pragma unroll
  for (int t = 0; t < kLogitTokens; ++t) {
    const float sum = WarpSum(acc[t]);
    if (lane == 0 && t < count) out[(first + t) * n + row] = sum;
  }
}

}  // namespace

void RouterLogits(const float* x, int64_t m, int64_t k, const __nv_bfloat16* w, int64_t n,
                  float* out, cudaStream_t stream) {
  if (m < 0 || n <= 0 || k <= 0 || k % kVecElements != 0 || m > INT_MAX) {
    throw Error("RouterLogits: unsupported shape m=" + std::to_string(m) +
                " k=" + std::to_string(k) + " n=" + std::to_string(n) +
                " (k must be a positive multiple of 8)");
  }
  if (m == 0) return;
  const dim3 grid(static_cast<unsigned>(CeilDiv(n, kLogitWarps)),
                  static_cast<unsigned>(CeilDiv(m, kLogitTokens)));
  RouterLogitsKernel<<<grid, kLogitWarps * kWarpSize, 0, stream>>>(x, static_cast<int>(m), k, w, n,
                                                                   out);
  MKSERVE_CUDA_CHECK_LAUNCH();
}

void RouterTopK(const RouterArgs& args, cudaStream_t stream) {
  if (args.num_experts <= 0 || args.num_experts > kMaxRouterExperts || args.top_k <= 0 ||
      args.top_k > args.num_experts || args.top_k > kMaxTopK) {
    throw Error("RouterTopK: unsupported num_experts " + std::to_string(args.num_experts) +
                " / top_k " + std::to_string(args.top_k) + " (at most 256 experts, top 16)");
  }
  if (args.num_tokens <= 0) return;
  const unsigned blocks = static_cast<unsigned>(CeilDiv(args.num_tokens, kRouterWarps));
  RouterKernel<<<blocks, kRouterWarps * kWarpSize, 0, stream>>>(args);
  MKSERVE_CUDA_CHECK_LAUNCH();
}

}  // namespace mkserve::cuda
