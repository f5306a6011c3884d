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

}  // namespace

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
