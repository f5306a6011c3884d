#include "backends/cuda/decode/decode_attention_mma.h"

#include <algorithm>
#include <cmath>

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/core/kernel_common.cuh"
#include "backends/cuda/core/pdl_launch.h"
#include "backends/cuda/decode/attention_split.cuh"
#include "backends/cuda/decode/decode_attention_mma.cuh"
#include "engine/kv_layout.h"

namespace mkserve::cuda {
namespace {

using namespace mma_attention;

constexpr int kWarps = kSlicesPerPage;  // the warps split every page between them
constexpr int kStages = 3;              // per warp: two slices fly while one is used

// The warp's slice of every page of the split, through its own kStages cp.async stages (no
// CTA barrier in the loop: each warp reads only what it copied).
template <int kHeadDim>
__device__ void RunSlices(const AttentionArgs& a, const KeyRange& r, const int32_t* table,
                          float scale, __nv_bfloat16* stages, SliceState<kHeadDim>& st) {
  const int warp = threadIdx.x / kWarpSize, kv_head = static_cast<int>(blockIdx.y);
  const int64_t kv_width = a.num_kv_heads * kHeadDim;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (r.first_page + s < r.end_page) {
      LoadSlice<kHeadDim>(a.cache, kv_width, table[r.first_page + s], warp, kv_head,
                          stages + s * kStageElements<kHeadDim>);
    }
    CpAsyncCommit();  // empty groups too: the wait below counts groups
  }
  int stage = 0;
  for (int64_t page = r.first_page; page < r.end_page; ++page) {
    if (page + kStages - 1 < r.end_page) {
      const int ahead = (stage + kStages - 1) % kStages;  // the stage used one page ago
      LoadSlice<kHeadDim>(a.cache, kv_width, table[page + kStages - 1], warp, kv_head,
                          stages + ahead * kStageElements<kHeadDim>);
    }
    CpAsyncCommit();
    CpAsyncWait<kStages - 1>();  // this page's group has landed
    __syncwarp();                // and is visible to every lane
    const __nv_bfloat16* k_rows = stages + stage * kStageElements<kHeadDim>;
    const int64_t first = page * kPageKeys + warp * kSliceKeys;
    if (first <= r.last_key && first + kSliceKeys > r.first_key) {
      float s[2][4];
      SliceScores<kHeadDim>(st, k_rows, scale, s);
      MaskSlice(r.first_key, r.last_key, first, s);
      AccumulateSlice<kHeadDim>(st, s, k_rows + kSliceKeys * kStride<kHeadDim>);
    }
    __syncwarp();  // every lane is done with the stage before it is refilled
    stage = (stage + 1) % kStages;
  }
}

// Merges the warps' states per (query head, dim); writes the output (one split) or the split's
// partial state in the CUDA-core kernel's format (an empty split: max -inf, sum 0).
template <int kHeadDim>
__device__ void MergeWarps(const AttentionArgs& a, int64_t t, int group, const float* o,
                           const float* ml) {
  for (int i = threadIdx.x; i < group * kHeadDim; i += blockDim.x) {
    const int row = i / kHeadDim, d = i % kHeadDim;
    const MergedState m = MergeWarpStates<kHeadDim>(o, ml, kWarps, row, d);
    const int64_t head = blockIdx.y * group + row;
    if (a.num_splits == 1) {
      a.out[(t * a.num_heads + head) * kHeadDim + d] =
          __float2bfloat16(m.sum > 0.0f ? m.acc / m.sum : 0.0f);
      continue;
    }
    const int64_t slot = (t * a.num_heads + head) * a.num_splits + blockIdx.z;
    a.partial_acc[slot * kHeadDim + d] = m.acc;
    if (d == 0) {
      a.partial_stats[slot * 2] = m.max;
      a.partial_stats[slot * 2 + 1] = m.sum;
    }
  }
}

template <int kHeadDim>
constexpr size_t kSmemBytes = std::max(kWarps* kStages* kStageElements<kHeadDim> *
                                           sizeof(__nv_bfloat16),
                                       kWarps* kRows*(kMergeStride<kHeadDim> + 2) * sizeof(float));

// Grid (token, kv head, split), kWarps warps; warp w takes keys 16w..16w+15 of every page.
template <int kHeadDim>
__global__ void __launch_bounds__(kWarps* kWarpSize)
    DecodeAttentionMmaKernel(AttentionArgs a, float scale) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int64_t t = blockIdx.x;
  const int warp = threadIdx.x / kWarpSize;
  const int group = static_cast<int>(a.num_heads / a.num_kv_heads);
  const KeyRange r = SplitRange(a, a.positions[t]);
  const int32_t* table = a.block_tables + a.seq_of_token[t] * a.max_pages;
  auto* stages = reinterpret_cast<__nv_bfloat16*>(smem) + warp * kStages * kStageElements<kHeadDim>;
  WaitForPrevious();  // q and the new token's K/V come from the previous kernel
  AllowNext();
  SliceState<kHeadDim> st;
  LoadQueryRows<kHeadDim>(a.q + (t * a.num_heads + blockIdx.y * group) * kHeadDim, group, st);
  RunSlices<kHeadDim>(a, r, table, scale, stages, st);
  CpAsyncWait<0>();  // only empty groups can remain; the stages become the merge area
  __syncthreads();
  auto* o = reinterpret_cast<float*>(smem);
  float* ml = o + kWarps * kRows * kMergeStride<kHeadDim>;
  StoreWarpState<kHeadDim>(st, warp * kRows, group, o, ml);
  __syncthreads();
  MergeWarps<kHeadDim>(a, t, group, o, ml);
}

template <int kHeadDim>
void Launch(const AttentionArgs& a, cudaStream_t stream) {
  auto* kernel = &DecodeAttentionMmaKernel<kHeadDim>;
  constexpr size_t kSmem = kSmemBytes<kHeadDim>;
  static const cudaError_t configured = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmem));
  MKSERVE_CUDA_CHECK(configured);
  const dim3 grid(static_cast<unsigned>(a.num_tokens), static_cast<unsigned>(a.num_kv_heads),
                  static_cast<unsigned>(a.num_splits));
  const float scale = kLog2e / sqrtf(static_cast<float>(kHeadDim));
  LaunchPdl(kernel, grid, dim3(kWarps * kWarpSize), kSmem, stream, a, scale);
}

}  // namespace

bool DecodeAttentionMmaSupports(const AttentionArgs& a) {
  return a.num_kv_heads > 0 && a.num_heads % a.num_kv_heads == 0 &&
         a.num_heads / a.num_kv_heads <= kRows && IsSupportedHeadDim(a.head_dim);
}

void LaunchDecodeAttentionMma(const AttentionArgs& args, cudaStream_t stream) {
  ForHeadDim(args.head_dim, [&](auto dim) { Launch<decltype(dim)::value>(args, stream); });
}

}  // namespace mkserve::cuda
