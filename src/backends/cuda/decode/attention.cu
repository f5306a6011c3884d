#include "backends/cuda/decode/attention.h"

#include <cuda_pipeline.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/core/kernel_common.cuh"
#include "backends/cuda/core/pdl_launch.h"
#include "backends/cuda/decode/attention_split.cuh"
#include "backends/cuda/decode/decode_attention_mma.h"
#include "common/error.h"
#include "engine/kv_layout.h"

namespace mkserve::cuda {
namespace {

constexpr int kTileKeys = static_cast<int>(kBlockTokens);  // one page per tile
constexpr int kRowPad = 8;  // bf16; breaks shared-memory bank clashes
constexpr int kMaxSplits = 256;
constexpr int kMaxHeadsPerGroup = 16;

// Starts copying one page's K and V rows of this kv head into a shared-memory tile stage
// (cp.async: every 16-byte piece in flight at once, no registers held); see WaitTile.
template <int kHeadDim>
__device__ void StartTileLoad(const AttentionArgs& a, int32_t block, __nv_bfloat16* k_tile,
                              __nv_bfloat16* v_tile) {
  constexpr int kVecsPerRow = kHeadDim / kVecElements;
  const int64_t kv_width = a.num_kv_heads * kHeadDim;
  const __nv_bfloat16* page =
      a.cache + static_cast<int64_t>(block) * kTileKeys * 2 * kv_width + blockIdx.y * kHeadDim;
  for (int i = threadIdx.x; i < kTileKeys * kVecsPerRow; i += blockDim.x) {
    const int key = i / kVecsPerRow, col = (i % kVecsPerRow) * kVecElements;
    const __nv_bfloat16* src = page + key * 2 * kv_width + col;
    __pipeline_memcpy_async(k_tile + key * (kHeadDim + kRowPad) + col, src, 16);
    __pipeline_memcpy_async(v_tile + key * (kHeadDim + kRowPad) + col, src + kv_width, 16);
  }
  __pipeline_commit();
}

template <int kHeadDim>
__device__ inline float Score(const float* q, const __nv_bfloat16* k_row) {
  float sum = 0.0f;
#pragma unroll
  for (int c = 0; c < kHeadDim; c += kVecElements) {
    float k[kVecElements];
    Bf16x8ToFloat(LoadBf16x8(k_row + c), k);
#pragma unroll
    for (int i = 0; i < kVecElements; ++i) sum = fmaf(q[c + i], k[i], sum);
  }
  return sum;
}

// Online softmax state of one warp (one query head); lane owns kHeadDim / 32 output dims.
template <int kHeadDim>
struct HeadState {
  static constexpr int kDimsPerLane = (kHeadDim + kWarpSize - 1) / kWarpSize;  // >= 1
  float max = -INFINITY, sum = 0.0f, acc[kDimsPerLane] = {};

  __device__ void Update(float s0, float s1, const __nv_bfloat16* v_tile) {
    const float tile_max = WarpMax(fmaxf(s0, s1));
    const float new_max = fmaxf(max, tile_max);
    if (new_max == -INFINITY) return;  // nothing visible in this tile
    const float correction = exp2f(max - new_max);
    const float p0 = s0 == -INFINITY ? 0.0f : exp2f(s0 - new_max);
    const float p1 = s1 == -INFINITY ? 0.0f : exp2f(s1 - new_max);
    sum = sum * correction + WarpSum(p0 + p1);
    const int lane = threadIdx.x % kWarpSize;
#pragma unroll
    for (int d = 0; d < kDimsPerLane; ++d) acc[d] *= correction;
    for (int j = 0; j < kTileKeys; ++j) {
      const float p = __shfl_sync(0xffffffffu, j < kWarpSize ? p0 : p1, j % kWarpSize);
      if (lane * kDimsPerLane >= kHeadDim) continue;  // head_dim < 32: idle lanes
      const __nv_bfloat16* v_row = v_tile + j * (kHeadDim + kRowPad) + lane * kDimsPerLane;
#pragma unroll
      for (int d = 0; d < kDimsPerLane; ++d) acc[d] = fmaf(p, __bfloat162float(v_row[d]), acc[d]);
    }
    max = new_max;
  }
};

template <int kHeadDim>
__device__ void StoreHead(const AttentionArgs& a, const HeadState<kHeadDim>& st, int64_t t,
                          int64_t head) {
  const int lane = threadIdx.x % kWarpSize;
  constexpr int kDims = HeadState<kHeadDim>::kDimsPerLane;
  if (lane * kDims >= kHeadDim) return;  // head_dim < 32: idle lanes
  if (a.num_splits == 1) {
    const float inv = st.sum > 0.0f ? 1.0f / st.sum : 0.0f;
    __nv_bfloat16* out = a.out + (t * a.num_heads + head) * kHeadDim + lane * kDims;
#pragma unroll
    for (int d = 0; d < kDims; ++d) out[d] = __float2bfloat16(st.acc[d] * inv);
    return;
  }
  const int64_t slot = (t * a.num_heads + head) * a.num_splits + blockIdx.z;
  float* acc = a.partial_acc + slot * kHeadDim + lane * kDims;
#pragma unroll
  for (int d = 0; d < kDims; ++d) acc[d] = st.acc[d];
  if (lane == 0) {
    a.partial_stats[slot * 2] = st.max;
    a.partial_stats[slot * 2 + 1] = st.sum;
  }
}

constexpr int kStages = 2;  // page tiles in flight per CTA

template <int kHeadDim>
__device__ inline float2 TileScores(const AttentionArgs& a, const KeyRange& r, const float* q,
                                    const __nv_bfloat16* k_tile, int64_t page) {
  float s[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int j = threadIdx.x % kWarpSize + half * kWarpSize;
    const int64_t key = page * kTileKeys + j;
    s[half] = key >= r.first_key && key <= r.last_key
                  ? Score<kHeadDim>(q, k_tile + j * (kHeadDim + kRowPad))
                  : -INFINITY;
  }
  return make_float2(s[0], s[1]);
}

// Grid (token, kv head, split); one warp per query head of the kv head's group. Pages stream
// through kStages shared-memory stages: page p + 1 loads while page p is scored.
template <int kHeadDim>
__global__ void AttentionKernel(AttentionArgs a, float q_scale) {
  extern __shared__ __align__(16) unsigned char smem[];
  constexpr int kTileElements = kTileKeys * (kHeadDim + kRowPad);
  auto* tiles = reinterpret_cast<__nv_bfloat16*>(smem);  // [stage][K, V][tile]
  auto* q_all = reinterpret_cast<float*>(tiles + kStages * 2 * kTileElements);
  const int64_t t = blockIdx.x;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int64_t head = blockIdx.y * (a.num_heads / a.num_kv_heads) + warp;
  const int32_t position = a.positions[t];
  const KeyRange r = SplitRange(a, position);
  const int32_t* table = a.block_tables + a.seq_of_token[t] * a.max_pages;
  WaitForPrevious();  // q and the new token's K/V come from the previous kernel
  AllowNext();
  float* q = q_all + warp * kHeadDim;
  for (int d = lane; d < kHeadDim; d += kWarpSize) {
    q[d] = q_scale * __bfloat162float(a.q[(t * a.num_heads + head) * kHeadDim + d]);
  }
  if (r.first_page < r.end_page) {
    StartTileLoad<kHeadDim>(a, table[r.first_page], tiles, tiles + kTileElements);
  }
  HeadState<kHeadDim> st;
  for (int64_t page = r.first_page; page < r.end_page; ++page) {
    const int stage = static_cast<int>((page - r.first_page) % kStages);
    if (page + 1 < r.end_page) {
      __nv_bfloat16* next = tiles + (1 - stage) * 2 * kTileElements;
      StartTileLoad<kHeadDim>(a, table[page + 1], next, next + kTileElements);
      __pipeline_wait_prior(1);  // this page's stage has landed, the next may still fly
    } else {
      __pipeline_wait_prior(0);
    }
    __syncthreads();  // every thread's copies of this stage (and q on the first pass)
    const __nv_bfloat16* k_tile = tiles + stage * 2 * kTileElements;
    const float2 s = TileScores<kHeadDim>(a, r, q, k_tile, page);
    st.Update(s.x, s.y, k_tile + kTileElements);
    __syncthreads();  // the stage is free for the load two pages on
  }
  StoreHead<kHeadDim>(a, st, t, head);
}

constexpr int kCombineThreads = 512;

// Grid (token, head): merges the splits' partial softmax states. Warp 0 turns the splits' stats
// into weights (lanes over splits); then thread groups of head_dim threads each sum a strided
// subset of the splits (loads unrolled, many in flight) and group 0 adds the groups in order.
__global__ void __launch_bounds__(kCombineThreads) CombineKernel(AttentionArgs a) {
  __shared__ float split_weight[kMaxSplits];
  __shared__ float partial[kCombineThreads];
  __shared__ float total;
  WaitForPrevious();
  AllowNext();
  const int64_t row = blockIdx.x * a.num_heads + blockIdx.y;
  const int splits = a.num_splits, lane = threadIdx.x % kWarpSize;
  if (threadIdx.x < kWarpSize) {
    const float* stats = a.partial_stats + row * splits * 2;
    float max = -INFINITY;
    for (int s = lane; s < splits; s += kWarpSize) max = fmaxf(max, stats[2 * s]);
    max = WarpMax(max);
    float sum = 0.0f;
    for (int s = lane; s < splits; s += kWarpSize) {
      const float count = stats[2 * s + 1];
      const float w = count > 0.0f ? exp2f(stats[2 * s] - max) : 0.0f;  // empty split: 0
      split_weight[s] = w;
      sum += w * count;
    }
    sum = WarpSum(sum);
    if (lane == 0) total = sum;
  }
  __syncthreads();
  const int head_dim = static_cast<int>(a.head_dim), groups = kCombineThreads / head_dim;
  const int d = threadIdx.x % head_dim, group = threadIdx.x / head_dim;
  const float* acc = a.partial_acc + row * splits * a.head_dim + d;
  float value = 0.0f;
#pragma unroll 8
  for (int s = group; s < splits; s += groups)
    value = fmaf(split_weight[s], acc[s * a.head_dim], value);
  partial[threadIdx.x] = value;
  __syncthreads();
  if (group != 0) return;
  for (int g = 1; g < groups; ++g) value += partial[g * head_dim + d];
  a.out[row * a.head_dim + d] = __float2bfloat16(total > 0.0f ? value / total : 0.0f);
}

template <int kHeadDim>
void Launch(const AttentionArgs& a, cudaStream_t stream) {
  const int heads_per_group = static_cast<int>(a.num_heads / a.num_kv_heads);
  const size_t smem = kStages * 2 * kTileKeys * (kHeadDim + kRowPad) * sizeof(__nv_bfloat16) +
                      heads_per_group * kHeadDim * sizeof(float);
  auto* kernel = &AttentionKernel<kHeadDim>;
  static const cudaError_t configured =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           kStages * 2 * kTileKeys * (kHeadDim + kRowPad) * sizeof(__nv_bfloat16) +
                               kMaxHeadsPerGroup * kHeadDim * sizeof(float));
  MKSERVE_CUDA_CHECK(configured);
  const dim3 grid(static_cast<unsigned>(a.num_tokens), static_cast<unsigned>(a.num_kv_heads),
                  static_cast<unsigned>(a.num_splits));
  const float q_scale = kLog2e / sqrtf(static_cast<float>(kHeadDim));
  LaunchPdl(kernel, grid, dim3(heads_per_group * kWarpSize), smem, stream, a, q_scale);
}

void LaunchCombine(const AttentionArgs& a, cudaStream_t stream) {
  if (a.num_splits == 1) return;
  LaunchPdl(&CombineKernel,
            dim3(static_cast<unsigned>(a.num_tokens), static_cast<unsigned>(a.num_heads)),
            dim3(kCombineThreads), 0, stream, a);
}

void CheckArgs(const AttentionArgs& a) {
  const bool ok = a.num_kv_heads > 0 && a.num_heads % a.num_kv_heads == 0 &&
                  a.num_heads / a.num_kv_heads <= kMaxHeadsPerGroup && a.num_splits >= 1 &&
                  a.num_splits <= kMaxSplits && IsSupportedHeadDim(a.head_dim);
  if (!ok) {
    throw Error("PagedAttention: unsupported shape: heads " + std::to_string(a.num_heads) +
                ", kv heads " + std::to_string(a.num_kv_heads) + ", head_dim " +
                std::to_string(a.head_dim) + ", splits " + std::to_string(a.num_splits) +
                " (head_dim 16, 32, 64 or 128; at most 16 query heads per kv head)");
  }
}

}  // namespace

int ChooseNumSplits(int64_t num_tokens, int64_t num_kv_heads, int64_t max_context_tokens,
                    int num_sms, int64_t partial_capacity) {
  const int64_t ctas = num_tokens * num_kv_heads;
  const int64_t target = 4 * static_cast<int64_t>(num_sms);  // short CTAs, several per SM
  if (ctas >= target || num_tokens <= 0) return 1;
  int64_t splits = CeilDiv(target, ctas);
  splits = std::min<int64_t>(splits, CeilDiv(max_context_tokens, kBlockTokens));
  splits = std::min<int64_t>(splits, partial_capacity / num_tokens);
  splits = std::min<int64_t>(splits, kMaxSplits);
  return static_cast<int>(std::max<int64_t>(splits, 1));
}

void PagedAttentionCudaCores(const AttentionArgs& args, cudaStream_t stream) {
  CheckArgs(args);
  if (args.num_tokens <= 0) return;
  ForHeadDim(args.head_dim, [&](auto dim) { Launch<decltype(dim)::value>(args, stream); });
  LaunchCombine(args, stream);
}

void PagedAttention(const AttentionArgs& args, cudaStream_t stream) {
  if (!DecodeAttentionMmaSupports(args)) return PagedAttentionCudaCores(args, stream);
  CheckArgs(args);
  if (args.num_tokens <= 0) return;
  LaunchDecodeAttentionMma(args, stream);  // tensor cores: the CUDA-core Q.K was the bottleneck
  LaunchCombine(args, stream);
}

}  // namespace mkserve::cuda
