// Split-KV paged decode attention for one (row, KV head, split), all query heads of the KV head
// (one worker warp per query head), and the combine of a (row, KV head)'s splits. Log2-domain
// online softmax, scale 1/sqrt(head_dim), as the layered kernels compute it. Static (sliding)
// splits cut the row's window pages as the layered SplitRange does; claimed (full-attention)
// items name their pages of the row's block table. One split alone also writes attn_in itself.
#pragma once

#include <cmath>

#include "engine/kv_layout.h"
#include "megakernel/device/sync.cuh"
#include "model/model_config.h"

namespace mkserve::megakernel {

inline constexpr int kAttnHeadDim = 128;  // the decoder checks the model's head_dim
inline constexpr int kDimsPerLane = kAttnHeadDim / 32;

// K rows padded by one bf16 pair: lane j reading pair d of key j hits bank (j + d) % 32, so the
// 32 lanes' score loops (one key each) never conflict. V rows are read along head_dim.
inline constexpr int kKeyRowPairs = kAttnHeadDim / 2 + 1;

struct AttentionSmem {
  __nv_bfloat162 k[kBlockTokens][kKeyRowPairs];
  bf16 v[kBlockTokens][kAttnHeadDim];
  float q[kWorkerWarps][kAttnHeadDim];  // each warp's query, scaled into the log2 domain
  float prob[kWorkerWarps][kBlockTokens];
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

// Pages [pages.begin, pages.end) of one row and KV head: the partial state of slot `split`, and,
// when `direct` (the only split), the normalised output into attn_in as well.
__device__ inline void AttendSplit(const StepParams& p, const LayerParams& layer, int window,
                                   int row, int kv_head, int split, PageRange pages, bool direct,
                                   AttentionSmem& s) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int32_t position = p.positions[row];
  const int64_t first_key = window > 0 ? FirstKeyInWindow(position, window) : 0;
  const int begin = pages.begin, end = pages.end;
  const int kv_width = p.num_kv_heads * kAttnHeadDim;
  const int per_kv = p.num_heads / p.num_kv_heads;
  const float q_scale = cuda::kLog2e / sqrtf(static_cast<float>(kAttnHeadDim));
  for (int h0 = 0; h0 < per_kv; h0 += kWorkerWarps) {  // warp-uniform: whole passes of 8 heads
    const int head = kv_head * per_kv + h0 + warp;
    const bool active = h0 + warp < per_kv;
    float acc[kDimsPerLane] = {};
    float m = -INFINITY, l = 0.0f;
    if (active) {
      const bf16* qrow = p.q + (static_cast<int64_t>(row) * p.num_heads + head) * kAttnHeadDim;
      const uint2 raw = __ldcg(reinterpret_cast<const uint2*>(qrow + lane * kDimsPerLane));
      const __nv_bfloat162* pairs = reinterpret_cast<const __nv_bfloat162*>(&raw);
      for (int i = 0; i < kDimsPerLane / 2; ++i) {
        const float2 f = __bfloat1622float2(pairs[i]);
        s.q[warp][lane * kDimsPerLane + 2 * i] = f.x * q_scale;
        s.q[warp][lane * kDimsPerLane + 2 * i + 1] = f.y * q_scale;
      }
    }
    for (int page = begin; page < end; ++page) {
      const int32_t block = layer.block_tables[static_cast<int64_t>(row) * layer.max_pages + page];
      WorkerSync();  // the previous page is consumed (and every warp's query is in place)
      constexpr int kVecsPerRow = kAttnHeadDim / cuda::kVecElements;
      for (int i = threadIdx.x; i < 2 * kBlockTokens * kVecsPerRow; i += kWorkerThreads) {
        const int kv = i / (kBlockTokens * kVecsPerRow), t = (i / kVecsPerRow) % kBlockTokens;
        const int vec = i % kVecsPerRow;
        const bf16* src = layer.kv_cache +
                          ((static_cast<int64_t>(block) * kBlockTokens + t) * 2 + kv) * kv_width +
                          kv_head * kAttnHeadDim + vec * cuda::kVecElements;
        const uint4 value = LoadCg(src);
        if (kv == 0) {  // padded rows are only 4-byte aligned
          const uint32_t words[4] = {value.x, value.y, value.z, value.w};
          for (int w = 0; w < 4; ++w) {
            s.k[t][vec * 4 + w] = *reinterpret_cast<const __nv_bfloat162*>(&words[w]);
          }
        } else {
          *reinterpret_cast<uint4*>(&s.v[t][vec * cuda::kVecElements]) = value;
        }
      }
      WorkerSync();
      if (!active) continue;
      // Lane j scores keys j and j + 32 against the whole query.
      float dot0 = 0.0f, dot1 = 0.0f;
#pragma unroll 8
      for (int d = 0; d < kAttnHeadDim / 2; ++d) {
        const float2 qd = *reinterpret_cast<const float2*>(&s.q[warp][2 * d]);
        const float2 k0 = __bfloat1622float2(s.k[lane][d]);
        const float2 k1 = __bfloat1622float2(s.k[lane + 32][d]);
        dot0 = fmaf(qd.x, k0.x, fmaf(qd.y, k0.y, dot0));
        dot1 = fmaf(qd.x, k1.x, fmaf(qd.y, k1.y, dot1));
      }
      const int64_t key0 = static_cast<int64_t>(page) * kBlockTokens + lane, key1 = key0 + 32;
      const float score0 = key0 >= first_key && key0 <= position ? dot0 : -INFINITY;
      const float score1 = key1 >= first_key && key1 <= position ? dot1 : -INFINITY;
      const float page_max = cuda::WarpMax(fmaxf(score0, score1));
      const float m_new = fmaxf(m, page_max);
      if (m_new == -INFINITY) continue;
      const float correction = exp2f(m - m_new);
      const float p0 = exp2f(score0 - m_new), p1 = exp2f(score1 - m_new);
      l = l * correction + cuda::WarpSum(p0 + p1);
      for (int i = 0; i < kDimsPerLane; ++i) acc[i] *= correction;
      s.prob[warp][lane] = p0;
      s.prob[warp][lane + 32] = p1;
      __syncwarp();
#pragma unroll 8
      for (int j = 0; j < kBlockTokens; ++j) {
        const float pj = s.prob[warp][j];
        const uint2 raw = *reinterpret_cast<const uint2*>(&s.v[j][lane * kDimsPerLane]);
        const __nv_bfloat162* pairs = reinterpret_cast<const __nv_bfloat162*>(&raw);
        for (int i = 0; i < kDimsPerLane / 2; ++i) {
          const float2 f = __bfloat1622float2(pairs[i]);
          acc[2 * i] = fmaf(pj, f.x, acc[2 * i]);
          acc[2 * i + 1] = fmaf(pj, f.y, acc[2 * i + 1]);
        }
      }
      __syncwarp();  // prob is rewritten by the next page
      m = m_new;
    }
    if (active) {
      // The partial state always: a schedule may still merge a single split with a combine.
      const int64_t at = StatIndex(p, row, head, split);
      float* out = p.attn_partial + at * kAttnHeadDim + lane * kDimsPerLane;
      for (int i = 0; i < kDimsPerLane; ++i) out[i] = acc[i];
      if (lane == 0) {
        p.attn_stats[2 * at] = m;
        p.attn_stats[2 * at + 1] = l;
      }
    }
    if (active && direct) {
      bf16* out = p.attn_in + (static_cast<int64_t>(row) * p.num_heads + head) * kAttnHeadDim +
                  lane * kDimsPerLane;
      for (int i = 0; i < kDimsPerLane; ++i) out[i] = __float2bfloat16(acc[i] / l);
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

// attn_in[row][head] = the splits' merged output (bf16). Slots holding no keys (sum 0) are
// skipped.
__device__ inline void OpAttentionCombine(const StepParams& p, const TaskDescriptor& d) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int kv_head = static_cast<int>(d.arg[kArgKvHead]);
  const int splits = static_cast<int>(d.arg[kArgSplits]);
  const int per_kv = p.num_heads / p.num_kv_heads;
  for (int row = d.row_begin; row < static_cast<int>(d.row_end); ++row) {
    for (int h = warp; h < per_kv; h += kWorkerWarps) {
      const int head = kv_head * per_kv + h;
      float top = -INFINITY;
      for (int sp = 0; sp < splits; ++sp) {
        const int64_t at = StatIndex(p, row, head, sp);
        if (LoadCgF(p.attn_stats + 2 * at + 1) > 0.0f) {
          top = fmaxf(top, LoadCgF(p.attn_stats + 2 * at));
        }
      }
      float num[kDimsPerLane] = {}, den = 0.0f;
      for (int sp = 0; sp < splits; ++sp) {
        const int64_t at = StatIndex(p, row, head, sp);
        const float sum = LoadCgF(p.attn_stats + 2 * at + 1);
        if (!(sum > 0.0f)) continue;
        const float w = exp2f(LoadCgF(p.attn_stats + 2 * at) - top);
        den += w * sum;
        const float4 a = LoadCgF4(p.attn_partial + at * kAttnHeadDim + lane * kDimsPerLane);
        num[0] += w * a.x;
        num[1] += w * a.y;
        num[2] += w * a.z;
        num[3] += w * a.w;
      }
      bf16* out = p.attn_in + (static_cast<int64_t>(row) * p.num_heads + head) * kAttnHeadDim +
                  lane * kDimsPerLane;
      for (int i = 0; i < kDimsPerLane; ++i) out[i] = __float2bfloat16(num[i] / den);
    }
  }
}

}  // namespace mkserve::megakernel
