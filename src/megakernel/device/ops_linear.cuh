// The projection ops: QKV (RoPE and the paged-KV write in the epilogue), O-proj, the dense MLP's
// gate/up (SiLU*up epilogue) and down, the LM head, and one claimed expert item (gate/up or
// down). Numerics follow the layered path: bf16 weights and activations, fp32 accumulation,
// bf16 rounding exactly where the layered kernels round.
#pragma once

#include "backends/cuda/core/weight_layout.h"
#include "backends/cuda/decode/rope_kv.h"
#include "engine/kv_layout.h"
#include "megakernel/device/gemv_body.cuh"

namespace mkserve::megakernel {

__device__ inline void StoreOut(float* dst, float v, bool accumulate) {
  if (accumulate) {
    RedAdd(dst, v);
  } else {
    *dst = v;
  }
}

// One RoPE pair of the fused q|k|v output (features e, e + 1) of `row`: rotated where the layer
// uses RoPE, then q to p.q, k and v into the row's cache slot.
__device__ inline void StoreQkvPair(const StepParams& p, const LayerParams& layer, int row, int e,
                                    float x0, float x1) {
  const int q_width = p.num_heads * p.head_dim, kv_width = p.num_kv_heads * p.head_dim;
  const int32_t position = p.positions[row];
  if (layer.uses_rope && e < q_width + kv_width) {
    const int pair = (e % p.head_dim) / 2;
    const float angle =
        static_cast<float>(position) * cuda::RopeInvFreq(p.rope_theta, pair, p.head_dim);
    float s, c;
    sincosf(angle, &s, &c);
    const float r0 = x0 * c - x1 * s, r1 = x1 * c + x0 * s;
    x0 = r0;
    x1 = r1;
  }
  const __nv_bfloat162 packed = __floats2bfloat162_rn(x0, x1);
  bf16* dst;
  if (e < q_width) {
    dst = p.q + static_cast<int64_t>(row) * q_width + e;
  } else {
    const int32_t block =
        layer.block_tables[static_cast<int64_t>(row) * layer.max_pages + position / kBlockTokens];
    const int64_t slot = static_cast<int64_t>(block) * kBlockTokens + position % kBlockTokens;
    dst = layer.kv_cache + slot * 2 * kv_width + (e - q_width);
  }
  *reinterpret_cast<__nv_bfloat162*>(dst) = packed;
}

// A plain tile: out[row][n] (+)= scale * dot(w[n], x[row]) for n in [n0, n1), K in [k0, k1).
// With qkv_layer set it is a QKV tile instead (n0 even, rows of the fused q|k|v weight): each
// pair goes through StoreQkvPair. One tile type for both, so QKV runs through the weight ring
// on the GEMM body's copy the other plain tiles and expert down run (H200, 8K, 49 layers: batch
// 1 3.63 -> 3.56 ms, 8 9.90 -> 9.74, 64 29.68 -> 29.53; a QkvTile of its own on the ring made
// the kernel 486 KB and every batch 3-5 % slower, a PlainTile QKV on registers 482 KB and 8 %).
struct PlainTile {
  const bf16* x;  // [rows][x_stride]
  int64_t x_stride;
  const bf16* w;    // [n][K] in panels of adjacent-row pairs (weight_panels.h)
  int64_t w_panel;  // elements per panel: cuda::PanelElementsFor(K)
  float* out;
  int64_t out_stride;
  int n0, n1, k0, k1, row0, rows;
  float scale;
  bool accumulate;
  const StepParams* qkv_step = nullptr;    // QKV tiles: the step and
  const LayerParams* qkv_layer = nullptr;  // the layer the pairs are stored for
  bool staged = false;                     // the fused norm wrote the rows into xs (PreStaged)
  static constexpr int kRows = 2;
  __device__ int K() const { return k1 - k0; }
  __device__ int Groups() const { return (n1 - n0 + kRows - 1) / kRows; }
  __device__ int Tokens() const { return rows; }
  __device__ const bf16* ActivationRow(int t) const { return x + (row0 + t) * x_stride + k0; }
  __device__ const bf16* WeightRow(int g, int r) const {
    const int n = min(n0 + g * kRows + r, n1 - 1);
    return w + cuda::PanelPairStart(n / 2, n % 2, w_panel) + cuda::PanelChunkStart(k0);
  }
  __device__ void Store(int g, int t, const float (&v)[kRows]) const {
    if (qkv_layer != nullptr) {
      StoreQkvPair(*qkv_step, *qkv_layer, row0 + t, n0 + g * kRows, v[0], v[1]);
      return;
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int n = n0 + g * kRows + r;
      if (n < n1) StoreOut(out + (row0 + t) * out_stride + n, v[r] * scale, accumulate);
    }
  }
};

// Gate row i and up row i as one pair: h[row][i] = bf16(silu(gate . x) * (up . x)).
struct GateUpTile {
  const bf16* x;
  int64_t x_stride;
  const bf16* w;  // [2 I][hidden] in panels of (gate row i, up row i) pairs
  int64_t hidden, intermediate;
  bf16* h;  // [rows][intermediate]
  int i0, i1;
  const int32_t* x_row_of;  // null: activation row = row0 + t; else x_row_of[t] (experts)
  int row0, rows, x_row_div;
  __device__ int K() const { return static_cast<int>(hidden); }
  __device__ int Groups() const { return i1 - i0; }
  __device__ int Tokens() const { return rows; }
  __device__ const bf16* ActivationRow(int t) const {
    const int row = x_row_of != nullptr ? LoadCgI(x_row_of + t) / x_row_div : row0 + t;
    return x + row * x_stride;
  }
  __device__ const bf16* WeightRow(int g, int r) const {
    return w + cuda::PanelPairStart(i0 + g, r, cuda::PanelElementsFor(hidden));
  }
  __device__ void Store(int g, int t, const float (&v)[2]) const {
    h[(row0 + t) * intermediate + i0 + g] = __float2bfloat16(cuda::Silu(v[0]) * v[1]);
  }
};

__device__ inline int TileBegin(const TaskDescriptor& d, int width) {
  return static_cast<int>(d.tile) * width;
}
// Fused q|k|v rows of a kQkv task: its tile inside its part.
__device__ inline int QkvBegin(const StepParams& p, const TaskDescriptor& d) {
  const int q_width = p.num_heads * p.head_dim, kv_width = p.num_kv_heads * p.head_dim;
  const int part = static_cast<int>(d.arg[kArgQkvPart]);
  return (part == 0 ? 0 : part == 1 ? q_width : q_width + kv_width) + TileBegin(d, p.tiles.qkv);
}
__device__ inline int Rows(const TaskDescriptor& d) {
  return static_cast<int>(d.row_end - d.row_begin);
}

// A kQkv task's tile; `staged`: the fused norm wrote its rows into xs.
__device__ inline PlainTile QkvTile(const StepParams& p, const TaskDescriptor& d, bool staged) {
  const int n0 = QkvBegin(p, d);
  return {p.x_norm,
          p.hidden,
          p.layers[d.layer].qkv,
          cuda::PanelElementsFor(p.hidden),
          nullptr,
          0,
          n0,
          n0 + p.tiles.qkv,
          0,
          p.hidden,
          static_cast<int>(d.row_begin),
          Rows(d),
          1.0f,
          false,
          &p,
          &p.layers[d.layer],
          staged};
}

__device__ inline void OpQkv(const StepParams& p, const TaskDescriptor& d, GemvSmem& s,
                             RingRounds ring) {
  const bool fused = (d.flags & kFlagFusedNorm) != 0;
  if (fused) {  // the builder fuses only tiles of up to 8 rows: K in one staged chunk
    const int stride = OneChunkRowStride(p.hidden);
    FusedNormRows(p, d.layer, d.row_begin, Rows(d), s.norm, [&](int t, int col, float4 y) {
      *reinterpret_cast<uint2*>(s.xs + t * stride + col) = PackBf16x4(y);
    });
  }
  ring.primed = (d.flags & kFlagPrimeWeights) != 0;
  RunGemv(QkvTile(p, d, fused), s, ring);
}

__device__ inline void OpOProj(const StepParams& p, const TaskDescriptor& d, GemvSmem& s,
                               RingRounds ring) {
  const int q_width = p.num_heads * p.head_dim, n0 = TileBegin(d, p.tiles.oproj);
  const PlainTile tile{p.attn_in,
                       q_width,
                       p.layers[d.layer].o_proj,
                       cuda::PanelElementsFor(q_width),
                       p.attn_out + LayerRow(p, d.layer, 0),
                       p.hidden,
                       n0,
                       n0 + p.tiles.oproj,
                       static_cast<int>(d.k_begin),
                       static_cast<int>(d.k_end),
                       static_cast<int>(d.row_begin),
                       Rows(d),
                       1.0f,
                       (d.flags & kFlagAccumulate) != 0};
  RunGemv(tile, s, ring);
}

__device__ inline void OpDenseGateUp(const StepParams& p, const TaskDescriptor& d, GemvSmem& s) {
  const LayerParams& layer = p.layers[d.layer];
  const int i0 = TileBegin(d, p.tiles.dense_up);
  const GateUpTile tile{
      p.x_norm,     p.hidden, layer.dense_gate_up,   p.hidden, layer.intermediate,
      p.ffn_hidden, i0,       i0 + p.tiles.dense_up, nullptr,  static_cast<int>(d.row_begin),
      Rows(d),      1};
  RunGemv(tile, s, RegisterRounds{});
}

__device__ inline void OpDenseDown(const StepParams& p, const TaskDescriptor& d, GemvSmem& s,
                                   RingRounds ring) {
  const LayerParams& layer = p.layers[d.layer];
  const int n0 = TileBegin(d, p.tiles.dense_down);
  const PlainTile tile{p.ffn_hidden,
                       layer.intermediate,
                       layer.dense_down,
                       cuda::PanelElementsFor(layer.intermediate),
                       p.ffn_out + LayerRow(p, d.layer, 0),
                       p.hidden,
                       n0,
                       n0 + p.tiles.dense_down,
                       static_cast<int>(d.k_begin),
                       static_cast<int>(d.k_end),
                       static_cast<int>(d.row_begin),
                       Rows(d),
                       1.0f,
                       (d.flags & kFlagAccumulate) != 0};
  RunGemv(tile, s, ring);
}

// The LM head tile of vocabulary entries [v0, v0 + the tile width): a kLmHead's own or a claimed
// one.
__device__ inline PlainTile LmHeadTile(const StepParams& p, const TaskDescriptor& d, int v0) {
  return {p.x_norm,
          p.hidden,
          p.lm_head,
          cuda::PanelElementsFor(p.hidden),
          p.logits,
          p.vocab,
          v0,
          v0 + p.tiles.lm_head,
          0,
          p.hidden,
          static_cast<int>(d.row_begin),
          Rows(d),
          p.logit_scale,
          false};
}

// kFlagPrimeWeights on a QKV or static LM head tile (up to 8 rows: the ring body): its warps'
// first ring rounds, issued before the task's wait (weights depend on nothing the step computes).
// The QKV tiles wait for the previous layer's end, and in a batch-1 sliding layer they head the
// chain to the O-proj that ends the layer; an LM head tile's wait is met for all but an SM's
// first, and its first rounds then travel while it stages the final norm's rows.
__device__ inline void PrimeTileWeights(const StepParams& p, const TaskDescriptor& d, uint4* ring) {
  if (d.opcode == kQkv) {
    PrimeGemvRing(QkvTile(p, d, false), ring);
  } else {
    PrimeGemvRing(LmHeadTile(p, d, TileBegin(d, p.tiles.lm_head)), ring);
  }
}

// One claimed expert item: gate/up (down == false) or down of expert item.expert for the bucket
// rows [bucket_begin, bucket_begin + row_count), output tile item.tile.
__device__ inline void RunExpertItem(const StepParams& p, uint32_t layer_id,
                                     const ExpertWorkItem& item, bool down, GemvSmem& s,
                                     RingRounds ring) {
  const LayerParams& layer = p.layers[layer_id];
  const int64_t I = layer.intermediate, H = p.hidden;
  const int width = down ? p.tiles.expert_down : p.tiles.expert_up;
  const int out0 = static_cast<int>(item.tile) * width, out1 = out0 + width;
  const int b0 = static_cast<int>(item.bucket_begin), rows = static_cast<int>(item.row_count);
  if (!down) {
    const GateUpTile tile{
        p.x_norm,
        H,
        layer.experts_gate_up + item.expert * cuda::ExpertGateUpPanels(H, I).Elements(),
        H,
        I,
        p.moe_hidden,
        out0,
        out1,
        p.bucket_assignment + b0,
        b0,
        rows,
        p.top_k};
    RunGemv(tile, s, ring);
  } else {
    const PlainTile tile{p.moe_hidden,
                         I,
                         layer.experts_down + item.expert * cuda::ExpertDownPanels(H, I).Elements(),
                         cuda::PanelElementsFor(I),
                         p.moe_out,
                         H,
                         out0,
                         out1,
                         0,
                         static_cast<int>(I),
                         b0,
                         rows,
                         1.0f,
                         false};
    RunGemv(tile, s, ring);
  }
}

}  // namespace mkserve::megakernel
