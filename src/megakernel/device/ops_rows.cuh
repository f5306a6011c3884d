// Per-row ops: kEmbed (residual = embedding row, then layer 0's input norm), kJoin (residual +=
// attn_out + ffn_out, then the next norm), kMoeCombine (ffn_out = the row's weighted expert
// outputs), and the fused norm a layer's first tasks compute for themselves. RMSNorm in fp32 as
// the layered AddNorm computes it. residual, attn_out and ffn_out hold one row block per layer
// (LayerRow): a layer's sums stay readable while the next layer runs, which the fused norm needs.
#pragma once

#include "backends/cuda/core/mma_sm80.cuh"
#include "megakernel/device/sync.cuh"

namespace mkserve::megakernel {

inline constexpr int kMaxTopK = 16;  // experts per token the ops are written for

struct RowScratch {
  float warp_sums[kWorkerWarps];
  int32_t position[kMaxTopK];  // kMoeCombine: the row's bucket positions and weights
  float weight[kMaxTopK];
};

// Four normalised values as the bf16 x_norm holds them.
__device__ inline uint2 PackBf16x4(float4 y) {
  return make_uint2(cuda::PackBf16x2(y.x, y.y), cuda::PackBf16x2(y.z, y.w));
}

// Row `row` of layer `layer`'s block of a per-layer buffer (residual: [layers + 1][batch][hidden],
// the input of each layer and the final one; attn_out, ffn_out: [layers][batch][hidden]).
__device__ inline int64_t LayerRow(const StepParams& p, int layer, int row) {
  return (static_cast<int64_t>(layer) * p.batch + row) * p.hidden;
}

__device__ inline float WorkerSum(float v, RowScratch& s) {
  v = cuda::WarpSum(v);
  WorkerSync();  // a previous call may still read warp_sums
  if (threadIdx.x % 32 == 0) s.warp_sums[threadIdx.x / 32] = v;
  WorkerSync();
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kWorkerWarps; ++w) total += s.warp_sums[w];
  return total;
}

// A row of `hidden` floats in registers: thread t holds float4 chunks t, t + 256, ... (hidden is
// a multiple of 8 up to 4096, the decoder checks), so every load of the row is in flight at once.
inline constexpr int kRowChunks = 4;

__device__ inline bool ChunkLive(const StepParams& p, int j) {
  return (threadIdx.x + j * kWorkerThreads) * 4 < p.hidden;
}
__device__ inline int64_t ChunkAt(int j) { return (threadIdx.x + j * kWorkerThreads) * 4; }

// This thread's chunks of a norm's gamma, loaded with the row so that the norm does not wait for
// them after its sum (one dependent round trip less on the critical path of every layer).
__device__ inline void LoadGamma(const StepParams& p, const bf16* gamma, uint2 (&g)[kRowChunks]) {
#pragma unroll
  for (int j = 0; j < kRowChunks; ++j) {
    g[j] = ChunkLive(p, j) ? *reinterpret_cast<const uint2*>(gamma + ChunkAt(j)) : make_uint2(0, 0);
  }
}

// RMSNorm(v) * gamma of one row: emit(col, y) takes the values of elements [col, col + 4); v is
// this thread's chunks of the row, g its chunks of gamma (LoadGamma).
template <class Emit>
__device__ inline void NormalizeRow(const StepParams& p, const uint2 (&g)[kRowChunks],
                                    const float4 (&v)[kRowChunks], RowScratch& s, Emit emit) {
  float squares = 0.0f;
#pragma unroll
  for (int j = 0; j < kRowChunks; ++j) {
    if (ChunkLive(p, j)) {
      squares += v[j].x * v[j].x + v[j].y * v[j].y + v[j].z * v[j].z + v[j].w * v[j].w;
    }
  }
  const float inv = rsqrtf(WorkerSum(squares, s) / static_cast<float>(p.hidden) + p.norm_eps);
#pragma unroll
  for (int j = 0; j < kRowChunks; ++j) {
    if (!ChunkLive(p, j)) continue;
    const float2 g01 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&g[j].x));
    const float2 g23 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&g[j].y));
    emit(static_cast<int>(ChunkAt(j)), make_float4(v[j].x * inv * g01.x, v[j].y * inv * g01.y,
                                                   v[j].z * inv * g23.x, v[j].w * inv * g23.y));
  }
}

// x_norm[row] = RMSNorm(v) * gamma, bf16 and fp32 (the router's input).
__device__ inline void NormRow(const StepParams& p, int row, const uint2 (&g)[kRowChunks],
                               const float4 (&v)[kRowChunks], RowScratch& s) {
  const int64_t base = static_cast<int64_t>(row) * p.hidden;
  NormalizeRow(p, g, v, s, [&](int col, float4 y) {
    *reinterpret_cast<uint2*>(p.x_norm + base + col) = PackBf16x4(y);
    *reinterpret_cast<float4*>(p.x_norm_f32 + base + col) = y;
  });
}

__device__ inline void OpEmbed(const StepParams& p, const TaskDescriptor& d, RowScratch& s) {
  uint2 g[kRowChunks];
  LoadGamma(p, p.layers[0].input_norm, g);
  for (int row = d.row_begin; row < static_cast<int>(d.row_end); ++row) {
    const bf16* e = p.embed + static_cast<int64_t>(p.token_ids[row]) * p.hidden;
    float* x = p.residual + LayerRow(p, 0, row);
    float4 v[kRowChunks] = {};
#pragma unroll
    for (int j = 0; j < kRowChunks; ++j) {
      if (!ChunkLive(p, j)) continue;
      const uint2 raw = *reinterpret_cast<const uint2*>(e + ChunkAt(j));
      const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
      const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
      v[j] = make_float4(a.x, a.y, b.x, b.y);
      *reinterpret_cast<float4*>(x + ChunkAt(j)) = v[j];
    }
    NormRow(p, row, g, v, s);
  }
}

// The sum the join and the fused norm both start from: residual[l] + attn_out[l] + ffn_out[l] of
// `row`, this thread's chunks, in the order the join has always added them.
__device__ inline void LoadLayerSum(const StepParams& p, int layer, int row,
                                    float4 (&v)[kRowChunks]) {
#pragma unroll
  for (int j = 0; j < kRowChunks; ++j) {
    if (!ChunkLive(p, j)) continue;
    // Written by other SMs during this step: through L2.
    const float4 r = LoadCgF4(p.residual + LayerRow(p, layer, row) + ChunkAt(j));
    const float4 a = LoadCgF4(p.attn_out + LayerRow(p, layer, row) + ChunkAt(j));
    const float4 f = LoadCgF4(p.ffn_out + LayerRow(p, layer, row) + ChunkAt(j));
    v[j] = make_float4(r.x + a.x + f.x, r.y + a.y + f.y, r.z + a.z + f.z, r.w + a.w + f.w);
  }
}

// residual[l + 1] = residual[l] + attn_out[l] + ffn_out[l], then x_norm with the next layer's
// input norm (kFlagFinalNorm: the model's final norm), unless kFlagResidualOnly: the next layer's
// tasks compute their norm themselves (FusedNormRows).
__device__ inline void OpJoin(const StepParams& p, const TaskDescriptor& d, RowScratch& s) {
  const bool norm = (d.flags & kFlagResidualOnly) == 0;
  uint2 g[kRowChunks];
  if (norm) {
    LoadGamma(p, (d.flags & kFlagFinalNorm) != 0 ? p.final_norm : p.layers[d.layer + 1].input_norm,
              g);
  }
  const int layer = static_cast<int>(d.layer);
  for (int row = d.row_begin; row < static_cast<int>(d.row_end); ++row) {
    float4 v[kRowChunks] = {};
    LoadLayerSum(p, layer, row, v);
#pragma unroll
    for (int j = 0; j < kRowChunks; ++j) {
      if (ChunkLive(p, j)) {
        *reinterpret_cast<float4*>(p.residual + LayerRow(p, layer + 1, row) + ChunkAt(j)) = v[j];
      }
    }
    if (norm) NormRow(p, row, g, v, s);
  }
}

// The fused norm: the input of layer `layer` (>= 1) for rows [row0, row0 + rows), computed by the
// task that consumes it from the previous layer's sums, the way its join computes it, without
// waiting for that join (a task and a hop less on every layer's critical path). emit(t, col, y)
// takes the normalised fp32 values of row row0 + t, elements [col, col + 4). Ends with the
// workers synchronised, so what emit wrote to shared memory is visible.
template <class Emit>
__device__ inline void FusedNormRows(const StepParams& p, int layer, int row0, int rows,
                                     RowScratch& s, Emit emit) {
  uint2 g[kRowChunks];
  for (int t = 0; t < rows; ++t) {
    float4 v[kRowChunks] = {};
    LoadLayerSum(p, layer - 1, row0 + t, v);
    // Gamma after the first row's loads: its address is itself a load (the layer's parameters),
    // and the row's loads should not wait behind that round trip.
    if (t == 0) LoadGamma(p, p.layers[layer].input_norm, g);
    NormalizeRow(p, g, v, s, [&](int col, float4 y) { emit(t, col, y); });
  }
  WorkerSync();
}

// The row's k bucket positions and weights go through shared memory: one thread looks each up,
// and no thread keeps a k-long array (it lived in local memory, which misses L1 once the kernel's
// shared memory grows).
__device__ inline void OpMoeCombine(const StepParams& p, const TaskDescriptor& d, RowScratch& s) {
  for (int row = d.row_begin; row < static_cast<int>(d.row_end); ++row) {
    if (row > static_cast<int>(d.row_begin)) WorkerSync();  // the previous row's reads are done
    if (threadIdx.x < p.top_k) {
      s.position[threadIdx.x] = LoadCgI(p.routed_position + row * p.top_k + threadIdx.x);
      s.weight[threadIdx.x] = LoadCgF(p.topk_weights + row * p.top_k + threadIdx.x);
    }
    WorkerSync();
    float4 sum[kRowChunks] = {};
#pragma unroll 4
    for (int j = 0; j < p.top_k; ++j) {  // the chunks of every expert row in flight together
      const float* src = p.moe_out + static_cast<int64_t>(s.position[j]) * p.hidden;
      const float w = s.weight[j];
#pragma unroll
      for (int c = 0; c < kRowChunks; ++c) {
        if (!ChunkLive(p, c)) continue;
        const float4 a = LoadCgF4(src + ChunkAt(c));
        sum[c] = make_float4(fmaf(w, a.x, sum[c].x), fmaf(w, a.y, sum[c].y), fmaf(w, a.z, sum[c].z),
                             fmaf(w, a.w, sum[c].w));
      }
    }
#pragma unroll
    for (int c = 0; c < kRowChunks; ++c) {
      if (ChunkLive(p, c)) {
        *reinterpret_cast<float4*>(p.ffn_out + LayerRow(p, d.layer, row) + ChunkAt(c)) = sum[c];
      }
    }
  }
}

}  // namespace mkserve::megakernel
