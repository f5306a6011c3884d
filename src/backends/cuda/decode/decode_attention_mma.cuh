// Warp-level pieces of decode attention on tensor cores, shared by the layered kernel
// (decode_attention_mma.cu) and the megakernel's attention task: one warp holds the query heads
// of one KV head as the m16 rows of A fragments and runs an online softmax over 16-key slices of
// K/V pages that it copied into its own shared-memory stages with cp.async.
#pragma once

#include <cmath>
#include <cstdint>

#include "backends/cuda/core/kernel_common.cuh"
#include "backends/cuda/core/mma_sm80.cuh"
#include "engine/kv_layout.h"

namespace mkserve::cuda::mma_attention {

constexpr int kPageKeys = static_cast<int>(kBlockTokens);
constexpr int kSliceKeys = 16;  // keys per warp and page: one k16 step of P.V
constexpr int kSlicesPerPage = kPageKeys / kSliceKeys;
constexpr int kRows = 16;  // m16 rows: query heads, zero-padded
constexpr int kPad = 8;    // bf16 per shared row: ldmatrix rows land in distinct banks

template <int kHeadDim>
constexpr int kStride = kHeadDim + kPad;

template <int kHeadDim>
constexpr int kStageElements = 2 * kSliceKeys* kStride<kHeadDim>;  // K rows, then V rows

// One warp's online softmax over its slices; a thread holds rows g and g + 8 (h = 0, 1) of the C
// fragments. m and l are in the log2 domain, l per thread until stored.
template <int kHeadDim>
struct SliceState {
  float o[kHeadDim / 8][4];
  float m[2], l[2];
  uint32_t q[kHeadDim / 16][4];  // A fragments of the query rows
};

// The `group` query rows starting at `q_rows` ([group][kHeadDim]) straight into A fragments
// (a0/a2 row g, a1/a3 row g + 8); rows past the group are zero. Loads go through L2 (the query
// may have been written by another SM of the same launch).
template <int kHeadDim>
__device__ inline void LoadQueryRows(const __nv_bfloat16* q_rows, int group,
                                     SliceState<kHeadDim>& st) {
  const int lane = threadIdx.x % kWarpSize, g = lane / 4, c = lane % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = g + 8 * h;
    const bool live = row < group;
    const auto* src = reinterpret_cast<const unsigned int*>(q_rows + (live ? row : 0) * kHeadDim);
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      st.q[kk][h] = live ? __ldcg(src + kk * 8 + c) : 0u;
      st.q[kk][h + 2] = live ? __ldcg(src + kk * 8 + 4 + c) : 0u;
    }
  }
#pragma unroll
  for (int d = 0; d < kHeadDim / 8; ++d) st.o[d][0] = st.o[d][1] = st.o[d][2] = st.o[d][3] = 0.0f;
  st.m[0] = st.m[1] = -INFINITY;
  st.l[0] = st.l[1] = 0.0f;
}

// Slice `slice` (16 K and V rows) of page `block` of one KV head into a stage (cp.async by the
// calling warp, committed by the caller). The cache is [block][key][K|V][kv_width].
template <int kHeadDim>
__device__ inline void LoadSlice(const __nv_bfloat16* cache, int64_t kv_width, int32_t block,
                                 int slice, int kv_head, __nv_bfloat16* stage) {
  constexpr int kChunks = kHeadDim / kVecElements;
  const int lane = threadIdx.x % kWarpSize;
  const bool valid = block >= 0;  // a released page is never visible; read nothing
  const __nv_bfloat16* rows =
      cache +
      ((valid ? static_cast<int64_t>(block) : 0) * kPageKeys + slice * kSliceKeys) * 2 * kv_width +
      static_cast<int64_t>(kv_head) * kHeadDim;
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
__device__ inline void SliceScores(const SliceState<kHeadDim>& st, const __nv_bfloat16* k_rows,
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

// -inf outside keys [first_key, last_key]; column 2c + e of n tile j is key first + 8j + 2c + e.
__device__ inline void MaskSlice(int64_t first_key, int64_t last_key, int64_t first,
                                 float (&s)[2][4]) {
  const int c = threadIdx.x % 4;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int64_t key = first + j * 8 + 2 * c + e;
      if (key < first_key || key > last_key) s[j][e] = s[j][2 + e] = -INFINITY;
    }
  }
}

// Online softmax of fragment row h over the slice (the row's keys sit in one lane quad).
template <int kHeadDim>
__device__ inline void SoftmaxRow(SliceState<kHeadDim>& st, int h, float (&s)[2][4]) {
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
__device__ inline void AccumulateSlice(SliceState<kHeadDim>& st, float (&s)[2][4],
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

// Row stride (floats) of the merge area: with a 128-float stride the 8 rows one store of
// StoreWarpState writes fall into the same banks (8 wavefronts a store); 8 floats more put them
// in 4 distinct bank groups (2 wavefronts, the least for 256 bytes).
template <int kHeadDim>
constexpr int kMergeStride = kHeadDim + 8;

// The warp's live rows (m, l, o) into shared memory as row `first_row` + fragment row, rows past
// `group` (the zero padding of the m16 tile) left out: o [row][kMergeStride], ml [row][2].
template <int kHeadDim>
__device__ inline void StoreWarpState(const SliceState<kHeadDim>& st, int first_row, int group,
                                      float* o, float* ml) {
  const int lane = threadIdx.x % kWarpSize;
  const int g = lane / 4, c = lane % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = st.l[h];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    if (g + 8 * h >= group) continue;
    const int row = first_row + g + 8 * h;
    if (c == 0) {
      ml[row * 2] = st.m[h];
      ml[row * 2 + 1] = l;
    }
#pragma unroll
    for (int d = 0; d < kHeadDim / 8; ++d) {
      *reinterpret_cast<float2*>(o + row * kMergeStride<kHeadDim> + d * 8 + 2 * c) =
          make_float2(st.o[d][2 * h], st.o[d][2 * h + 1]);
    }
  }
}

// Query head `row` (< the group StoreWarpState stored), dim `d` merged over `warps` warp states
// (warp w's rows at w * kRows): max and sum in the log2 domain and the unnormalised output (all
// zero and max -inf when no warp saw a key).
struct MergedState {
  float max, sum, acc;
};
template <int kHeadDim>
__device__ inline MergedState MergeWarpStates(const float* o, const float* ml, int warps, int row,
                                              int d) {
  MergedState m{-INFINITY, 0.0f, 0.0f};
  for (int w = 0; w < warps; ++w) m.max = fmaxf(m.max, ml[(w * kRows + row) * 2]);
  if (m.max == -INFINITY) return m;
  for (int w = 0; w < warps; ++w) {
    const float weight = exp2f(ml[(w * kRows + row) * 2] - m.max);
    m.sum += weight * ml[(w * kRows + row) * 2 + 1];
    m.acc += weight * o[(w * kRows + row) * kMergeStride<kHeadDim> + d];
  }
  return m;
}

}  // namespace mkserve::cuda::mma_attention
