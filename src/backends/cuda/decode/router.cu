#include "backends/cuda/decode/router.h"

#include <climits>
#include <cmath>
#include <string>

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/core/kernel_common.cuh"
#include "backends/cuda/core/pdl_launch.h"
#include "backends/cuda/decode/moe_bucket.cuh"
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

// One warp selects the top k of token t's logits (L2 loads: the fused kernel reads logits other
// blocks wrote in the same launch).
__device__ void SelectTopK(const RouterArgs& a, int64_t t) {
  const int lane = threadIdx.x % kWarpSize;
  const float* row = a.logits + t * a.num_experts;
  float values[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int e = lane + i * kWarpSize;
    values[i] = e < a.num_experts ? __ldcg(row + e) : -INFINITY;
    if (isnan(values[i])) values[i] = -INFINITY;  // as the CPU router ranks it
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

// One warp per token.
__global__ void RouterKernel(RouterArgs a) {
  WaitForPrevious();
  AllowNext();
  const int64_t t = blockIdx.x * kRouterWarps + threadIdx.x / kWarpSize;
  if (t < a.num_tokens) SelectTopK(a, t);
}

constexpr int kLogitWarps = 8;   // one expert row per warp
constexpr int kLogitTokens = 8;  // tokens per pass: each weight row is read once per 8 tokens
constexpr int kLogitChunk = 8;   // 16-byte weight loads in flight per lane

// Lane-partial sums acc[t] of dot(w_row, x[first + t]) for t < count (reduce with WarpSum).
__device__ inline void RowLogitsPartial(const float* x, int first, int count, int64_t k,
                                        const __nv_bfloat16* w_row, float (&acc)[kLogitTokens]) {
  const int lane = threadIdx.x % kWarpSize;
#pragma unroll
  for (int t = 0; t < kLogitTokens; ++t) acc[t] = 0.0f;
  constexpr int64_t kStride = kWarpSize * kVecElements;
  for (int64_t base = lane * kVecElements; base < k; base += kStride * kLogitChunk) {
    Bf16x8 wv[kLogitChunk];
#pragma unroll
    for (int u = 0; u < kLogitChunk; ++u) {
      const int64_t c = base + u * kStride;
      wv[u] = c < k ? LoadStreaming(w_row + c) : Bf16x8{};
    }
#pragma unroll
    for (int u = 0; u < kLogitChunk; ++u) {
      const int64_t c = base + u * kStride;
      if (c >= k) break;
      float wf[kVecElements];
      Bf16x8ToFloat(wv[u], wf);
#pragma unroll
      for (int t = 0; t < kLogitTokens; ++t) {
        if (t >= count) break;
        const float4* xp = reinterpret_cast<const float4*>(x + (first + t) * k + c);
        const float4 lo = xp[0], hi = xp[1];
        const float xv[kVecElements] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
        for (int i = 0; i < kVecElements; ++i) acc[t] = fmaf(wf[i], xv[i], acc[t]);
      }
    }
  }
}

// Logits of expert `row` for tokens [0, m) into out[t][n].
__device__ inline void RowLogits(const float* x, int m, int64_t k, const __nv_bfloat16* w,
                                 int64_t n, int64_t row, float* out) {
  const int lane = threadIdx.x % kWarpSize;
  for (int first = 0; first < m; first += kLogitTokens) {
    const int count = min(m - first, kLogitTokens);
    float acc[kLogitTokens];
    RowLogitsPartial(x, first, count, k, w + row * k, acc);
#pragma unroll
    for (int t = 0; t < kLogitTokens; ++t) {
      const float sum = WarpSum(acc[t]);
      if (lane == 0 && t < count) out[(first + t) * n + row] = sum;
    }
  }
}

// Grid: x over expert rows, y over groups of kLogitTokens tokens.
__global__ void RouterLogitsKernel(const float* x, int m, int64_t k, const __nv_bfloat16* w,
                                   int64_t n, float* out) {
  WaitForPrevious();
  AllowNext();
  const int64_t row = blockIdx.x * static_cast<int64_t>(kLogitWarps) + threadIdx.x / kWarpSize;
  if (row >= n) return;
  const int first = blockIdx.y * kLogitTokens;
  RowLogits(x + first * k, min(m - first, kLogitTokens), k, w, n, row, out + first * n);
}

// Grid as RouterLogitsKernel's; then the last block to finish runs the top-k of every token: one
// launch per layer.
__global__ void RouterFusedKernel(const float* x, int m, int64_t k, const __nv_bfloat16* w,
                                  float* logits, RouterArgs topk, int32_t* done,
                                  MoeWorkspace bucket) {
  __shared__ bool is_last;
  __shared__ int32_t counts[kMaxRouterExperts], cursors[kMaxRouterExperts];
  const int warp = threadIdx.x / kWarpSize;
  const int64_t row = blockIdx.x * static_cast<int64_t>(kLogitWarps) + warp;
  const int64_t n = topk.num_experts;
  const int first = blockIdx.y * kLogitTokens;
  constexpr int64_t kLineElements = 64;  // bf16 per 128-byte line
  for (int64_t c = threadIdx.x % kWarpSize * kLineElements; row < n && c < k;
       c += kWarpSize * kLineElements) {
    PrefetchL2(w + row * k + c);  // weights do not depend on the previous kernel
  }
  WaitForPrevious();
  AllowNext();
  if (row < n) {
    RowLogits(x + first * k, min(m - first, kLogitTokens), k, w, n, row, logits + first * n);
  }
  __threadfence();  // this thread's logits before the block's arrival below
  __syncthreads();
  const auto blocks = static_cast<int32_t>(gridDim.x * gridDim.y);
  if (threadIdx.x == 0) is_last = atomicAdd(done, 1) == blocks - 1;
  __syncthreads();
  if (!is_last) return;
  __threadfence();
  for (int64_t t = warp; t < m; t += kLogitWarps) SelectTopK(topk, t);
  if (threadIdx.x == 0) *done = 0;  // ready for the next layer
  if (bucket.counts == nullptr) return;
  __syncthreads();  // every token's ids written
  BucketInBlock(topk.expert_ids, m * topk.top_k, topk.top_k, n, bucket, counts, cursors);
}

void CheckTopK(const RouterArgs& args) {
  if (args.num_experts <= 0 || args.num_experts > kMaxRouterExperts || args.top_k <= 0 ||
      args.top_k > args.num_experts || args.top_k > kMaxTopK) {
    throw Error("RouterTopK: unsupported num_experts " + std::to_string(args.num_experts) +
                " / top_k " + std::to_string(args.top_k) + " (at most 256 experts, top 16)");
  }
}

void CheckLogits(int64_t m, int64_t k, int64_t n) {
  if (m < 0 || n <= 0 || k <= 0 || k % kVecElements != 0 || m > INT_MAX) {
    throw Error("RouterLogits: unsupported shape m=" + std::to_string(m) +
                " k=" + std::to_string(k) + " n=" + std::to_string(n) +
                " (k must be a positive multiple of 8)");
  }
}

}  // namespace

void RouterLogits(const float* x, int64_t m, int64_t k, const __nv_bfloat16* w, int64_t n,
                  float* out, cudaStream_t stream) {
  CheckLogits(m, k, n);
  if (m == 0) return;
  const dim3 grid(static_cast<unsigned>(CeilDiv(n, kLogitWarps)),
                  static_cast<unsigned>(CeilDiv(m, kLogitTokens)));
  LaunchPdl(&RouterLogitsKernel, grid, dim3(kLogitWarps * kWarpSize), 0, stream, x,
            static_cast<int>(m), k, w, n, out);
}

void RouterTopK(const RouterArgs& args, cudaStream_t stream) {
  CheckTopK(args);
  if (args.num_tokens <= 0) return;
  const unsigned blocks = static_cast<unsigned>(CeilDiv(args.num_tokens, kRouterWarps));
  LaunchPdl(&RouterKernel, dim3(blocks), dim3(kRouterWarps * kWarpSize), 0, stream, args);
}

void RouterLogitsTopK(const float* x, int64_t k, const __nv_bfloat16* w, float* logits,
                      const RouterArgs& topk, int32_t* done_counter, cudaStream_t stream,
                      const MoeWorkspace* bucket) {
  CheckLogits(topk.num_tokens, k, topk.num_experts);
  CheckTopK(topk);
  if (topk.num_tokens > kFusedRouterMaxTokens) {
    throw Error("RouterLogitsTopK: " + std::to_string(topk.num_tokens) + " tokens, at most " +
                std::to_string(kFusedRouterMaxTokens));
  }
  if (topk.num_tokens <= 0) return;
  const dim3 grid(static_cast<unsigned>(CeilDiv(topk.num_experts, kLogitWarps)),
                  static_cast<unsigned>(CeilDiv(topk.num_tokens, kLogitTokens)));
  LaunchPdl(&RouterFusedKernel, grid, dim3(kLogitWarps * kWarpSize), 0, stream, x,
            static_cast<int>(topk.num_tokens), k, w, logits, topk, done_counter,
            bucket != nullptr ? *bucket : MoeWorkspace{});
}

}  // namespace mkserve::cuda
