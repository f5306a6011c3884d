// Split-KV paged decode attention for one (row, KV head, split) on tensor cores, and the combine
// of a (row, KV head)'s splits. The KV head's query heads are the m16 rows of mma.sync m16n8k16
// (cuda::mma_attention, shared with the layered kernel); each worker warp takes one 16-key slice
// of every other page of the split through its own cp.async stages, then the warps' softmax
// states are merged in shared memory. Log2-domain online softmax, scale 1/sqrt(head_dim), P
// rounded to bf16 before P.V, as the layered kernel computes it. Static (sliding) splits cut the
// row's window pages as the layered SplitRange does; claimed (full-attention) items name their
// pages of the row's block table. One split alone also writes attn_in itself.
#pragma once

#include <cmath>

#include "backends/cuda/decode/decode_attention_mma.cuh"
#include "engine/kv_layout.h"
#include "megakernel/device/sync.cuh"
#include "model/model_config.h"

namespace mkserve::megakernel {

namespace mma = cuda::mma_attention;

inline constexpr int kAttnHeadDim = 128;  // the decoder checks the model's head_dim
inline constexpr int kDimsPerLane = kAttnHeadDim / 32;
inline constexpr int kAttnStages = 2;  // per warp: one slice in flight while one is used
// Warp w takes slice w % 4 of pages begin + w / 4, begin + w / 4 + kPageLanes, ...
inline constexpr int kPageLanes = kWorkerWarps / mma::kSlicesPerPage;
static_assert(kPageLanes * mma::kSlicesPerPage == kWorkerWarps);

struct AttentionSmem {
  // The KV head's query rows, copied once for all warps in 16-byte pieces. Each warp loading
  // its fragments itself (32 four-byte loads a lane: 2048 L2 requests an SM for 2 KB) cost a
  // batch-1 task about 1.7 us under the other SMs' weight streams (globaltimer stamps). H200,
  // 8K, batch 1: attention tasks 8.1 -> 7.2 us, the step 3.06 -> 2.99 ms (four calls); batches
  // 2-64 the same.
  bf16 query[mma::kRows][mma::kStride<kAttnHeadDim>];
  union {
    bf16 stages[kWorkerWarps][kAttnStages][mma::kStageElements<kAttnHeadDim>];
    struct {  // after the page loop: every warp's (o, m, l) rows, warp w at rows w * kRows
      float o[kWorkerWarps * mma::kRows][mma::kMergeStride<kAttnHeadDim>];
      float ml[kWorkerWarps * mma::kRows][2];
    } merge;
  };
};

__device__ inline int64_t StatIndex(const StepParams& p, int row, int head, int split) {
  return (static_cast<int64_t>(row) * p.num_heads + head) * p.max_splits + split;
}

// The pages of split `split` of `splits` over the row's window (every visible page when 1).
struct PageRange {
  int begin, end;
};
__device__ inline PageRange WindowSplit(const StepParams& p, int window, int row, int split,
                                        int splits) {
  const int32_t position = p.positions[row];
  const int64_t first_key = window > 0 ? FirstKeyInWindow(position, window) : 0;
  const int first_page = static_cast<int>(first_key / kBlockTokens);
  const int num_pages = position / kBlockTokens - first_page + 1;
  const int per_split = (num_pages + splits - 1) / splits;
  const int begin = first_page + split * per_split;
  return {begin, min(first_page + num_pages, begin + per_split)};
}

// One warp's online softmax over its slices with the keys as the m16 rows of mma.sync m16n8k16
// and the KV head's query heads (at most 8) as its n8 columns: S^T = K Q^T and O^T += V^T P^T.
// Against query heads as the rows (half of the m16 tile padding at 8 heads), half the mma and
// half the accumulators. A thread holds heads 2c and 2c + 1 (h = 0, 1) of the C fragments; o[t]
// is dims 16t + g (elements 0, 1) and 16t + g + 8 (2, 3); m in the log2 domain, l per thread
// (its own keys) until stored.
struct HeadState {
  float o[kAttnHeadDim / 16][4];
  float m[2], l[2];
  uint32_t q[kAttnHeadDim / 16][2];  // B fragments of Q^T: dims 2c, 2c + 1 (+ 8) of head g
};

__device__ inline uint32_t MoveMatrixTransposed(uint32_t v) {
  uint32_t r;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(r) : "r"(v));
  return r;
}

// The query rows staged in shared memory (kStride apart) as Q^T's B fragments; heads past
// `group` are zero.
__device__ inline void LoadQueryColumns(const bf16* q_rows, int group, HeadState& st) {
  const int lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const bool live = g < group;
  const auto* src =
      reinterpret_cast<const uint32_t*>(q_rows + (live ? g : 0) * mma::kStride<kAttnHeadDim>);
#pragma unroll
  for (int kk = 0; kk < kAttnHeadDim / 16; ++kk) {
    st.q[kk][0] = live ? src[kk * 8 + c] : 0u;
    st.q[kk][1] = live ? src[kk * 8 + 4 + c] : 0u;
  }
#pragma unroll
  for (int t = 0; t < kAttnHeadDim / 16; ++t)
    st.o[t][0] = st.o[t][1] = st.o[t][2] = st.o[t][3] = 0.0f;
  st.m[0] = st.m[1] = -INFINITY;
  st.l[0] = st.l[1] = 0.0f;
}

// One slice (16 K rows, then 16 V rows, kStride apart) of keys first .. first + 15, those outside
// [first_key, last_key] masked: scores in the log2 domain, online softmax per head, O^T += V^T P^T.
__device__ inline void AttendSliceByKeys(HeadState& st, const bf16* k_rows, float scale,
                                         int64_t first_key, int64_t last_key, int64_t first) {
  constexpr int kStride = mma::kStride<kAttnHeadDim>;
  const int lane = threadIdx.x % 32, g = lane / 4;
  float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};  // keys g (0, 1) and g + 8 (2, 3) of heads 2c, 2c + 1
  {
    const int key = lane % 16, dim = (lane / 16) * 8;
#pragma unroll
    for (int kk = 0; kk < kAttnHeadDim / 16; ++kk) {
      uint32_t a[4];
      cuda::LdMatrixX4(a, cuda::SharedAddress(k_rows + key * kStride + kk * 16 + dim));
      cuda::MmaBf16(s, a, st.q[kk][0], st.q[kk][1]);
    }
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int64_t key = first + g + (e / 2) * 8;
    s[e] = key < first_key || key > last_key ? -INFINITY : s[e] * scale;
  }
  // Per head: the max over the 16 keys is the thread's two and the 8 lanes of the same c.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float tile_max = fmaxf(s[h], s[h + 2]);
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 4));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 8));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 16));
    const float new_max = fmaxf(st.m[h], tile_max);
    const float base = new_max == -INFINITY ? 0.0f : new_max;  // nothing visible yet: all zero
    const float correction = exp2f(st.m[h] - base);
    st.m[h] = new_max;
    s[h] = exp2f(s[h] - base);
    s[h + 2] = exp2f(s[h + 2] - base);
    st.l[h] = st.l[h] * correction + s[h] + s[h + 2];
#pragma unroll
    for (int t = 0; t < kAttnHeadDim / 16; ++t) {
      st.o[t][h] *= correction;
      st.o[t][h + 2] *= correction;
    }
  }
  // P^T as B: lane (g, c) needs keys 2c, 2c + 1 (and + 8) of head g, the transpose of the
  // score fragment's two 8x8 blocks (keys 0-7 and 8-15).
  const uint32_t b0 = MoveMatrixTransposed(cuda::PackBf16x2(s[0], s[1]));
  const uint32_t b1 = MoveMatrixTransposed(cuda::PackBf16x2(s[2], s[3]));
  const bf16* v_rows = k_rows + mma::kSliceKeys * kStride;
  const int key = lane % 8 + (lane / 16) * 8, dim = ((lane / 8) % 2) * 8;
#pragma unroll
  for (int t = 0; t < kAttnHeadDim / 16; ++t) {
    uint32_t a[4];
    cuda::LdMatrixX4Trans(a, cuda::SharedAddress(v_rows + key * kStride + t * 16 + dim));
    cuda::MmaBf16(st.o[t], a, b0, b1);
  }
}

// The warp's live heads (m, l, o) into the merge rows first_row + head, as StoreWarpState lays
// them out: o [row][kMergeStride], ml [row][2].
__device__ inline void StoreHeadState(const HeadState& st, int first_row, int group, float* o,
                                      float* ml) {
  const int lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  constexpr int kMergeStride = mma::kMergeStride<kAttnHeadDim>;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = st.l[h];  // over the keys of every lane of this head
    l += __shfl_xor_sync(0xffffffffu, l, 4);
    l += __shfl_xor_sync(0xffffffffu, l, 8);
    l += __shfl_xor_sync(0xffffffffu, l, 16);
    const int head = 2 * c + h;
    if (head >= group) continue;
    const int row = first_row + head;
    if (g == 0) {
      ml[row * 2] = st.m[h];
      ml[row * 2 + 1] = l;
    }
#pragma unroll
    for (int t = 0; t < kAttnHeadDim / 16; ++t) {
      o[row * kMergeStride + 16 * t + g] = st.o[t][h];
      o[row * kMergeStride + 16 * t + g + 8] = st.o[t][h + 2];
    }
  }
}

// Pages [pages.begin, pages.end) of one row and KV head: the partial state of slot `split`, and,
// when `direct` (the only split), the normalised output into attn_in as well.
__device__ inline void AttendSplit(const StepParams& p, const LayerParams& layer, int window,
                                   int row, int kv_head, int split, PageRange pages, bool direct,
                                   AttentionSmem& s) {
  constexpr int kStage = mma::kStageElements<kAttnHeadDim>;
  const int warp = threadIdx.x / 32;
  const int slice = warp % mma::kSlicesPerPage;
  const int32_t position = p.positions[row];
  const int64_t first_key = window > 0 ? FirstKeyInWindow(position, window) : 0;
  const int64_t kv_width = static_cast<int64_t>(p.num_kv_heads) * kAttnHeadDim;
  const int per_kv = p.num_heads / p.num_kv_heads;
  const float scale = cuda::kLog2e / sqrtf(static_cast<float>(kAttnHeadDim));
  const int32_t* table = layer.block_tables + static_cast<int64_t>(row) * layer.max_pages;
  bf16* stages = s.stages[warp][0];
  const auto load = [&](int page, int stage) {
    mma::LoadSlice<kAttnHeadDim>(layer.kv_cache, kv_width, table[page], slice, kv_head,
                                 stages + stage * kStage);
  };
  const bf16* q_rows =
      p.q + (static_cast<int64_t>(row) * p.num_heads + kv_head * per_kv) * kAttnHeadDim;
  constexpr int kRowVecs = kAttnHeadDim / 8;
  for (int v = threadIdx.x; v < per_kv * kRowVecs; v += kWorkerThreads) {
    cuda::CpAsync16(&s.query[v / kRowVecs][v % kRowVecs * 8], q_rows + v * 8, true);
  }
  const int first_page = pages.begin + warp / mma::kSlicesPerPage;
  if (first_page < pages.end) load(first_page, 0);
  cuda::CpAsyncCommit();  // the query rows and this warp's first slice
  cuda::CpAsyncWait<0>();
  WorkerSync();  // every warp's copies of the query rows have landed
  HeadState st;
  LoadQueryColumns(&s.query[0][0], per_kv, st);
  int stage = 0;
  for (int page = first_page; page < pages.end; page += kPageLanes) {
    if (page + kPageLanes < pages.end) load(page + kPageLanes, stage ^ 1);
    cuda::CpAsyncCommit();   // empty groups too: the wait counts groups
    cuda::CpAsyncWait<1>();  // this page's group has landed
    __syncwarp();            // and is visible to every lane
    const bf16* k_rows = stages + stage * kStage;
    const int64_t first = static_cast<int64_t>(page) * kBlockTokens + slice * mma::kSliceKeys;
    if (first <= position && first + mma::kSliceKeys > first_key) {
      AttendSliceByKeys(st, k_rows, scale, first_key, position, first);
    }
    __syncwarp();  // every lane is done with the stage before it is refilled
    stage ^= 1;
  }
  cuda::CpAsyncWait<0>();
  WorkerSync();  // every warp is done with its stages: they become the merge area
  StoreHeadState(st, warp * mma::kRows, per_kv, &s.merge.o[0][0], &s.merge.ml[0][0]);
  WorkerSync();
  // Warp h merges query head h (at most 8 a KV head): the warps' weights once, lane s of them for
  // warp s's state, then 4 dims a lane, the outputs added in warp order as MergeWarpStates adds
  // them. A thread per (head, dim) recomputed the 8 weights for every dim: batch 1 measured
  // the same, batches 2-64 up to 1 % faster.
  static_assert(kAttnHeadDim == 32 * 4 && kWorkerWarps <= 32, "a lane's 4 dims, a lane a warp");
  const int lane = threadIdx.x % 32;
  for (int h = warp; h < per_kv; h += kWorkerWarps) {
    const float* ml = &s.merge.ml[min(lane, kWorkerWarps - 1) * mma::kRows + h][0];
    const float m = lane < kWorkerWarps ? ml[0] : -INFINITY;
    const float max = cuda::WarpMax(m);
    const float weight = lane < kWorkerWarps && max != -INFINITY ? exp2f(m - max) : 0.0f;
    const float sum = cuda::WarpSum(lane < kWorkerWarps ? weight * ml[1] : 0.0f);
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int w = 0; w < kWorkerWarps; ++w) {
      const float wt = __shfl_sync(0xffffffffu, weight, w);
      const float4 o = *reinterpret_cast<const float4*>(&s.merge.o[w * mma::kRows + h][lane * 4]);
      acc = make_float4(acc.x + wt * o.x, acc.y + wt * o.y, acc.z + wt * o.z, acc.w + wt * o.w);
    }
    const int head = kv_head * per_kv + h;
    // The partial state always: a schedule may still merge a single split with a combine.
    const int64_t at = StatIndex(p, row, head, split);
    *reinterpret_cast<float4*>(p.attn_partial + at * kAttnHeadDim + lane * 4) = acc;
    if (lane == 0) {
      p.attn_stats[2 * at] = max;
      p.attn_stats[2 * at + 1] = sum;
    }
    if (direct) {
      const bool seen = sum > 0.0f;
      const uint2 out =
          make_uint2(cuda::PackBf16x2(seen ? acc.x / sum : 0.0f, seen ? acc.y / sum : 0.0f),
                     cuda::PackBf16x2(seen ? acc.z / sum : 0.0f, seen ? acc.w / sum : 0.0f));
      *reinterpret_cast<uint2*>(
          p.attn_in + (static_cast<int64_t>(row) * p.num_heads + head) * kAttnHeadDim + lane * 4) =
          out;
    }
  }
  WorkerSync();  // shared memory free for the next task
}

__device__ inline void OpAttention(const StepParams& p, const TaskDescriptor& d, AttentionSmem& s) {
  const int window = static_cast<int>(d.arg[kArgWindow]);
  const int split = static_cast<int>(d.split), splits = static_cast<int>(d.arg[kArgSplits]);
  for (int row = d.row_begin; row < static_cast<int>(d.row_end); ++row) {
    AttendSplit(p, p.layers[d.layer], window, row, static_cast<int>(d.arg[kArgKvHead]), split,
                WindowSplit(p, window, row, split, splits), splits == 1, s);
  }
}

// attn_in[row][head] = the splits' merged output (bf16). Lane s reads split s's (max, sum), so
// all of them arrive in one round trip; slots holding no keys (sum 0) get weight 0 and their
// partial outputs, which may never have been written, are not read.
__device__ inline void OpAttentionCombine(const StepParams& p, const TaskDescriptor& d) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int kv_head = static_cast<int>(d.arg[kArgKvHead]);
  const int splits = static_cast<int>(d.arg[kArgSplits]);  // <= 32: the decoder checks
  const int per_kv = p.num_heads / p.num_kv_heads;
  for (int row = d.row_begin; row < static_cast<int>(d.row_end); ++row) {
    for (int h = warp; h < per_kv; h += kWorkerWarps) {  // warp-uniform
      const int head = kv_head * per_kv + h;
      const int64_t first = StatIndex(p, row, head, 0);
      // The first kCombineBatch splits' partial rows are loaded with the statistics, not after
      // them (their addresses do not depend on the weights): one L2 round trip for up to 8
      // splits instead of one for the statistics and more for the rows, on the way to the O-proj.
      constexpr int kCombineBatch = 8;
      float4 part[kCombineBatch];
#pragma unroll
      for (int i = 0; i < kCombineBatch; ++i) {
        part[i] = i < splits ? LoadCgF4(p.attn_partial + (first + i) * kAttnHeadDim + lane * 4)
                             : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
      float max = -INFINITY, sum = 0.0f;
      if (lane < splits) {
        max = LoadCgF(p.attn_stats + 2 * (first + lane));
        sum = LoadCgF(p.attn_stats + 2 * (first + lane) + 1);
      }
      const bool live = sum > 0.0f;
      const float top = cuda::WarpMax(live ? max : -INFINITY);
      const float weight = live ? exp2f(max - top) : 0.0f;
      const float den = cuda::WarpSum(weight * sum);
      float num[kDimsPerLane] = {};
      for (int sp0 = 0; sp0 < splits; sp0 += kCombineBatch) {
        if (sp0 > 0) {  // the next batch of rows, all in flight together
#pragma unroll
          for (int i = 0; i < kCombineBatch; ++i) {
            const int sp = sp0 + i;
            part[i] = sp < splits
                          ? LoadCgF4(p.attn_partial + (first + sp) * kAttnHeadDim + lane * 4)
                          : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
          }
        }
#pragma unroll
        for (int i = 0; i < kCombineBatch; ++i) {
          const int sp = sp0 + i;
          if (sp >= splits) break;
          // An empty split's row was never written: skipped (not multiplied by 0, it may be NaN).
          const float w = __shfl_sync(0xffffffffu, weight, sp);
          if (w > 0.0f) {
            num[0] += w * part[i].x;
            num[1] += w * part[i].y;
            num[2] += w * part[i].z;
            num[3] += w * part[i].w;
          }
        }
      }
      bf16* out = p.attn_in + (static_cast<int64_t>(row) * p.num_heads + head) * kAttnHeadDim +
                  lane * kDimsPerLane;
      for (int i = 0; i < kDimsPerLane; ++i) out[i] = __float2bfloat16(num[i] / den);
    }
  }
}

}  // namespace mkserve::megakernel
