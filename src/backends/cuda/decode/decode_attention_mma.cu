#include "backends/cuda/decode/decode_attention_mma.h"

#include <algorithm>
#include <cmath>

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/core/kernel_common.cuh"
#include "backends/cuda/core/mma_sm80.cuh"
#include "backends/cuda/core/pdl_launch.h"
#include "backends/cuda/decode/attention_split.cuh"
#include "engine/kv_layout.h"

namespace mkserve::cuda {
namespace {

constexpr int kPageKeys = static_cast<int>(kBlockTokens);
constexpr int kSliceKeys = 16;                  // keys per warp and page: one k16 step of P.V
constexpr int kWarps = kPageKeys / kSliceKeys;  // the warps split every page between them
constexpr int kStages = 3;                      // per warp: two slices fly while one is used
constexpr int kRows = 16;                       // m16 rows: query heads, zero-padded
constexpr int kPad = 8;  // bf16 per shared row: ldmatrix rows land in distinct banks

template <int kHeadDim>
constexpr int kStride = kHeadDim + kPad;

template <int kHeadDim>
constexpr int kStageElements = 2 * kSliceKeys* kStride<kHeadDim>;  // K rows, then V rows

// One warp's online softmax over its slices of every page; a thread holds rows g and g + 8
// (h = 0, 1) of the C fragments. m and l are in the log2 domain, l per thread until stored.
template <int kHeadDim>
struct SliceState {
  float o[kHeadDim / 8][4];
  float m[2], l[2];
  uint32_t q[kHeadDim / 16][4];  // A fragments of the query rows
};

// Query rows straight into A fragments (a0/a2 row g, a1/a3 row g + 8); rows past the group
// are zero.
template <int kHeadDim>
__device__ void LoadQuery(const AttentionArgs& a, int64_t t, int group, SliceState<kHeadDim>& st) {
  const int lane = threadIdx.x % kWarpSize, g = lane / 4, c = lane % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = g + 8 * h;
    const bool live = row < group;
    const int64_t head = blockIdx.y * group + (live ? row : 0);
    const auto* src = reinterpret_cast<const uint32_t*>(a.q + (t * a.num_heads + head) * kHeadDim);
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      st.q[kk][h] = live ? src[kk * 8 + c] : 0u;
      st.q[kk][h + 2] = live ? src[kk * 8 + 4 + c] : 0u;
    }
  }
#pragma unroll
  for (int d = 0; d < kHeadDim / 8; ++d) st.o[d][0] = st.o[d][1] = st.o[d][2] = st.o[d][3] = 0.0f;
  st.m[0] = st.m[1] = -INFINITY;
  st.l[0] = st.l[1] = 0.0f;
}

// This warp's 16 K and V rows of one page into a stage (cp.async, committed by the caller).
template <int kHeadDim>
__device__ void LoadSlice(const AttentionArgs& a, int32_t block, __nv_bfloat16* stage) {
  constexpr int kChunks = kHeadDim / kVecElements;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int64_t kv_width = a.num_kv_heads * kHeadDim;
  const bool valid = block >= 0;  // a released page is never visible; read nothing
  const __nv_bfloat16* rows =
      a.cache +
      ((valid ? static_cast<int64_t>(block) : 0) * kPageKeys + warp * kSliceKeys) * 2 * kv_width +
      blockIdx.y * kHeadDim;
#pragma unroll
  for (int i = lane; i < kSliceKeys * 2 * kChunks; i += kWarpSize) {
    const int key = i / (2 * kChunks), which = (i / kChunks) % 2;
    const int col = (i % kChunks) * kVecElements;
    CpAsync16(stage + (which * kSliceKeys + key) * kStride<kHeadDim> + col,
              rows + (key * 2 + which) * kv_width + col, valid);
  }
}

// S = Q K^T over the slice's 16 keys (two n8 tiles), scaled into the log2 domain.
template <int kHeadDim>
__device__ void SliceScores(const SliceState<kHeadDim>& st, const __nv_bfloat16* k_rows,
                            float scale, float (&s)[2][4]) {
  const int lane = threadIdx.x % kWarpSize;
  const int key = lane % 8 + (lane / 16) * 8, dim = ((lane / 8) % 2) * 8;
#pragma unroll
  for (int e = 0; e < 4; ++e) s[0][e] = s[1][e] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    uint32_t b[4];
    LdMatrixX4(b, SharedAddress(k_rows + key * kStride<kHeadDim> + kk * 16 + dim));
    MmaBf16(s[0], st.q[kk], b[0], b[1]);
    MmaBf16(s[1], st.q[kk], b[2], b[3]);
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    s[0][e] *= scale;
    s[1][e] *= scale;
  }
}

// -inf outside [first_key, last_key]; column 2c + e of n tile j is key first + 8j + 2c + e.
__device__ void MaskSlice(const KeyRange& r, int64_t first, float (&s)[2][4]) {
  const int c = threadIdx.x % 4;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int64_t key = first + j * 8 + 2 * c + e;
      if (key < r.first_key || key > r.last_key) s[j][e] = s[j][2 + e] = -INFINITY;
    }
  }
}

// Online softmax of fragment row h over the slice (the row's keys sit in one lane quad).
template <int kHeadDim>
__device__ void SoftmaxRow(SliceState<kHeadDim>& st, int h, float (&s)[2][4]) {
  float tile_max = fmaxf(fmaxf(s[0][2 * h], s[0][2 * h + 1]), fmaxf(s[1][2 * h], s[1][2 * h + 1]));
  tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
  tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
  const float new_max = fmaxf(st.m[h], tile_max);
  const float base = new_max == -INFINITY ? 0.0f : new_max;  // nothing visible yet: all zero
  const float correction = exp2f(st.m[h] - base);
  st.m[h] = new_max;
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    s[j][2 * h] = exp2f(s[j][2 * h] - base);
    s[j][2 * h + 1] = exp2f(s[j][2 * h + 1] - base);
    sum += s[j][2 * h] + s[j][2 * h + 1];
  }
  st.l[h] = st.l[h] * correction + sum;
#pragma unroll
  for (int d = 0; d < kHeadDim / 8; ++d) {
    st.o[d][2 * h] *= correction;
    st.o[d][2 * h + 1] *= correction;
  }
}

// Softmax, then O += P V with P rounded to bf16 (the slice's 16 keys are one k16 step).
template <int kHeadDim>
__device__ void AccumulateSlice(SliceState<kHeadDim>& st, float (&s)[2][4],
                                const __nv_bfloat16* v_rows) {
  SoftmaxRow<kHeadDim>(st, 0, s);
  SoftmaxRow<kHeadDim>(st, 1, s);
  const uint32_t p[4] = {PackBf16x2(s[0][0], s[0][1]), PackBf16x2(s[0][2], s[0][3]),
                         PackBf16x2(s[1][0], s[1][1]), PackBf16x2(s[1][2], s[1][3])};
  const int lane = threadIdx.x % kWarpSize;
  const int key = lane % 8 + ((lane / 8) % 2) * 8, dim = (lane / 16) * 8;
#pragma unroll
  for (int dd = 0; dd < kHeadDim / 16; ++dd) {
    uint32_t b[4];
    LdMatrixX4Trans(b, SharedAddress(v_rows + key * kStride<kHeadDim> + dd * 16 + dim));
    MmaBf16(st.o[2 * dd], p, b[0], b[1]);
    MmaBf16(st.o[2 * dd + 1], p, b[2], b[3]);
  }
}

// The warp's slice of every page of the split, through its own kStages cp.async stages (no
// CTA barrier in the loop: each warp reads only what it copied).
template <int kHeadDim>
__device__ void RunSlices(const AttentionArgs& a, const KeyRange& r, const int32_t* table,
                          float scale, __nv_bfloat16* stages, SliceState<kHeadDim>& st) {
  const int warp = threadIdx.x / kWarpSize;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (r.first_page + s < r.end_page) {
      LoadSlice<kHeadDim>(a, table[r.first_page + s], stages + s * kStageElements<kHeadDim>);
    }
    CpAsyncCommit();  // empty groups too: the wait below counts groups
  }
  int stage = 0;
  for (int64_t page = r.first_page; page < r.end_page; ++page) {
    if (page + kStages - 1 < r.end_page) {
      const int ahead = (stage + kStages - 1) % kStages;  // the stage used one page ago
      LoadSlice<kHeadDim>(a, table[page + kStages - 1], stages + ahead * kStageElements<kHeadDim>);
    }
    CpAsyncCommit();
    CpAsyncWait<kStages - 1>();  // this page's group has landed
    __syncwarp();                // and is visible to every lane
    const __nv_bfloat16* k_rows = stages + stage * kStageElements<kHeadDim>;
    const int64_t first = page * kPageKeys + warp * kSliceKeys;
    if (first <= r.last_key && first + kSliceKeys > r.first_key) {
      float s[2][4];
      SliceScores<kHeadDim>(st, k_rows, scale, s);
      MaskSlice(r, first, s);
      AccumulateSlice<kHeadDim>(st, s, k_rows + kSliceKeys * kStride<kHeadDim>);
    }
    __syncwarp();  // every lane is done with the stage before it is refilled
    stage = (stage + 1) % kStages;
  }
}

// Each warp's rows (m, l, o) into shared memory: o [warp][row][head_dim], ml [warp][row][2].
template <int kHeadDim>
__device__ void StoreWarpState(const SliceState<kHeadDim>& st, float* o, float* ml) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int g = lane / 4, c = lane % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = st.l[h];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int row = warp * kRows + g + 8 * h;
    if (c == 0) {
      ml[row * 2] = st.m[h];
      ml[row * 2 + 1] = l;
    }
#pragma unroll
    for (int d = 0; d < kHeadDim / 8; ++d) {
      *reinterpret_cast<float2*>(o + row * kHeadDim + d * 8 + 2 * c) =
          make_float2(st.o[d][2 * h], st.o[d][2 * h + 1]);
    }
  }
}

// Merges the warps' states per (query head, dim); writes the output (one split) or the split's
// partial state in the CUDA-core kernel's format (an empty split: max -inf, sum 0).
template <int kHeadDim>
__device__ void MergeWarps(const AttentionArgs& a, int64_t t, int group, const float* o,
                           const float* ml) {
  for (int i = threadIdx.x; i < group * kHeadDim; i += blockDim.x) {
    const int row = i / kHeadDim, d = i % kHeadDim;
    float max = -INFINITY, sum = 0.0f, acc = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) max = fmaxf(max, ml[(w * kRows + row) * 2]);
    if (max != -INFINITY) {
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        const float weight = exp2f(ml[(w * kRows + row) * 2] - max);
        sum += weight * ml[(w * kRows + row) * 2 + 1];
        acc += weight * o[(w * kRows + row) * kHeadDim + d];
      }
    }
    const int64_t head = blockIdx.y * group + row;
    if (a.num_splits == 1) {
      a.out[(t * a.num_heads + head) * kHeadDim + d] =
          __float2bfloat16(sum > 0.0f ? acc / sum : 0.0f);
      continue;
    }
    const int64_t slot = (t * a.num_heads + head) * a.num_splits + blockIdx.z;
    a.partial_acc[slot * kHeadDim + d] = acc;
    if (d == 0) {
      a.partial_stats[slot * 2] = max;
      a.partial_stats[slot * 2 + 1] = sum;
    }
  }
}

template <int kHeadDim>
constexpr size_t kSmemBytes = std::max(kWarps* kStages* kStageElements<kHeadDim> *
                                           sizeof(__nv_bfloat16),
                                       kWarps* kRows*(kHeadDim + 2) * sizeof(float));

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
  LoadQuery<kHeadDim>(a, t, group, st);
  RunSlices<kHeadDim>(a, r, table, scale, stages, st);
  CpAsyncWait<0>();  // only empty groups can remain; the stages become the merge area
  __syncthreads();
  auto* o = reinterpret_cast<float*>(smem);
  float* ml = o + kWarps * kRows * kHeadDim;
  StoreWarpState<kHeadDim>(st, o, ml);
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
