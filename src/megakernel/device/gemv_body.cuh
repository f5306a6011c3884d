// The tensor-core GEMV body every projection op of the megakernel runs (QKV, O-proj, dense MLP,
// experts, LM head). Weights are stored in panels (weight_panels.h), so the 8 pairs a warp
// multiplies read 4 KB contiguous a round. A tile is a small struct (the layered path's Job
// idea) of row pairs:
//   int K()                        reduction length (the task's K range), a multiple of 8
//   int Groups()                   row pairs ("groups")
//   int Tokens()                   activation rows, at most kMaxGemvTokens
//   const bf16* ActivationRow(t)   activation row t, at the K range's start
//   const bf16* WeightRow(g, r)    row r (0 or 1) of pair g in its panel, at the K range's
//                                  start (a multiple of kChunk: cuda::PanelChunkStart)
//   void Store(g, t, vals[2])      epilogue of pair g for token t (one lane calls it)
//   bool staged (optional member)  true: the task already wrote its activation rows into xs (the
//                                  fused norm: tiles of at most 8 tokens, K in one chunk)
// A warp multiplies 8 pairs (16 weight rows, the mma's M) by up to 8 tokens at a time (its N)
// with mma.sync m16n8k16, the weights loaded straight from global memory into the A fragments.
// The dot products do not care in which order K is summed, so each lane loads 8 consecutive
// weights of its row (one 16-byte load) and the activations are read in the same permuted
// order: no shuffles, no shared-memory copy of the weights, no bf16 -> fp32 conversions. The
// CUDA-core loop it replaced spent about 6 instructions per multiply-add (H200 ncu, batch 1: 741 M
// instructions a step, 111 M of them FFMA) and re-read an expert's weights for every 8 tokens.
// H200, 8K, 49 layers: batch 8 16.2 -> 12.6 ms, batch 64 76.3 -> 36.9 ms, batch 1 unchanged.
#pragma once

#include <type_traits>

#include "backends/cuda/core/mma_sm80.cuh"
#include "backends/cuda/core/weight_panels.h"
#include "backends/cuda/decode/gemv_tile.cuh"
#include "megakernel/device/ops_rows.cuh"
#include "megakernel/device/sync.cuh"

namespace mkserve::megakernel {

inline constexpr int kMaxGemvTokens = 64;  // the megakernel's largest batch
inline constexpr int kMmaTokens = 8;       // the mma's N: tokens per n-tile
inline constexpr int kChunk = 32;          // K elements per pair of 16-byte loads (two k-steps)
inline constexpr int kPairsPerWarp = 8;    // weight row pairs a warp multiplies (the mma's M)
inline constexpr int kMaxStagePad = 2 * kChunk;
inline constexpr int kMaxStageK = 4096;  // the widest K range staged whole for 8 tokens
inline constexpr int kStageElements = kMmaTokens * (kMaxStageK + kMaxStagePad);

static_assert(kChunk == cuda::kPanelChunk, "a pair of 16-byte loads reads one panel chunk");

// Per warp: its sums after the K loop (the split-K reduction and the epilogue).
struct WarpGemvScratch {
  float partials[kMaxGemvTokens / kMmaTokens][4][32];
};

struct GemvSmem {
  bf16 xs[kStageElements];  // activation rows of one K chunk, row stride StagedRowStride
  union {
    WarpGemvScratch warps[kWorkerWarps];
    RowScratch norm;  // the fused norm's sums, done before the body uses `warps`
  };
};

// How a tile of up to 8 tokens keeps weight rounds in flight: one in registers, or
// kWeightRingStages in the weight ring (per worker warp, that many rounds of its 16-byte weight
// vectors, 2 rows x 4 blocks x 32 lanes, in shared memory). The expert items and the plain tiles
// (QKV, O-proj, dense down, LM head: one PlainTile copy of this body, shared with expert down)
// use the ring; only dense gate/up (layer 0) keeps registers. H200, 8K, 49 layers: the ring in
// every tile type (a copy of this body each, 489 KB of code) was slower than in the expert items
// alone (437 KB: batch 8 11.26 -> 10.58 ms, 64 33.51 -> 31.77, batch 1 3.78 -> 3.70); the plain
// tiles on the expert down copy (451 KB) then made batch 1 3.76 -> 3.63 and 2 4.88 -> 4.77, and
// QKV on it too (458 KB) 3.63 -> 3.56, batch 8 9.90 -> 9.74. Code size alone is not the rule: one
// tile type for every projection (295 KB) was no faster at batch 1 and 2 % slower at 64.
inline constexpr int kWeightRingStages = 3;
inline constexpr int kWeightRingRoundVecs = 2 * 4 * 32;
inline constexpr int kWeightRingWarpVecs = kWeightRingStages * kWeightRingRoundVecs;

struct RegisterRounds {};
struct RingRounds {
  uint4* ring;  // the worker warps' slots, kWeightRingWarpVecs each
  // PrimeGemvRing issued the first kWeightRingStages - 1 rounds of every warp before the task's
  // wait: the body starts with them in flight (or landed).
  bool primed = false;
};

// Weights are read once a step, so their loads are marked evict_first: L2 keeps the activations,
// partial sums, counters and KV lines the small tasks read, not the weights streaming past. H200,
// 8K, North: batch 1 3.50 -> 3.34 ms, batch 8 9.71 -> 9.52, batch 64 29.54 -> 29.12.
__device__ inline uint64_t EvictFirstPolicy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

__device__ inline uint4 LoadWeightVector(const bf16* p, uint64_t policy) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p), "l"(policy));
  return v;
}

__device__ inline void CopyWeightVector(void* shared, const void* global, bool valid,
                                        uint64_t policy) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(
                   cuda::SharedAddress(shared)),
               "l"(global), "r"(valid ? 16 : 0), "l"(policy));
}

// Staged rows are padded so that the eight rows an mma's B fragment reads start in alternating
// halves of the 32 banks (the stride is an odd number of 64-byte blocks): four wavefronts per
// 16-byte load of the warp, not eight.
__device__ inline int StagedRowStride(int chunk) {
  return chunk + ((chunk / kChunk) % 2 == 0 ? kChunk : 2 * kChunk);
}

// The row stride of a tile whose K range [0, k) is staged as one chunk (up to 8 tokens, k up to
// kMaxStageK): what RunGemvMma computes, for the ops that stage their own rows.
__device__ inline int OneChunkRowStride(int k) {
  return StagedRowStride((k + kChunk - 1) / kChunk * kChunk);
}

template <class Tile>
__device__ inline bool PreStaged(const Tile& tile) {
  if constexpr (requires { tile.staged; }) {
    return tile.staged;
  } else {
    return false;
  }
}

// Activation rows [0, count), elements [k0, k0 + len) into xs with row stride `stride`, via L2.
template <class Tile>
__device__ inline void StageChunk(const Tile& tile, bf16* xs, int k0, int len, int count,
                                  int stride) {
  const int vecs = len / cuda::kVecElements;
  for (int i = threadIdx.x; i < count * vecs; i += kWorkerThreads) {
    const int t = i / vecs, v = i % vecs;
    *reinterpret_cast<uint4*>(xs + t * stride + v * cuda::kVecElements) =
        LoadCg(tile.ActivationRow(t) + k0 + v * cuda::kVecElements);
  }
}

// One warp's 8 pairs [g0, g0 + 8): rows g0 + r of WeightRow(.., 0) are the mma's rows r, those
// of WeightRow(.., 1) its rows r + 8. A round is kUnroll 32-element blocks: LoadPairs issues all
// of its 16-byte weight loads (bytes in flight), MultiplyPairs feeds them with the staged tokens
// to the tensor cores. acc[nt * kSets + set] holds n-tile nt; kSets independent chains keep the
// tensor pipe fed when there is one n-tile.
template <int kUnroll, class Tile>
__device__ inline void LoadPairs(const Tile& tile, int k0, int len, int g0, int c, int c1,
                                 uint4 (&p)[kUnroll], uint4 (&q)[kUnroll]) {
  const int r = threadIdx.x % 32 / 4, j = threadIdx.x % 4;
  const bool row_valid = g0 + r < tile.Groups();
  const int64_t at = cuda::PanelChunkStart(k0) + j * cuda::kVecElements;
  const bf16* w0 = row_valid ? tile.WeightRow(g0 + r, 0) + at : nullptr;
  const bf16* w1 = row_valid ? tile.WeightRow(g0 + r, 1) + at : nullptr;
  const uint64_t policy = EvictFirstPolicy();
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int off = (c + u) * kChunk + j * cuda::kVecElements;
    const int64_t chunk = (c + u) * cuda::kPanelChunkElements;
    const bool valid = row_valid && c + u < c1 && off < len;
    p[u] = valid ? LoadWeightVector(w0 + chunk, policy) : make_uint4(0, 0, 0, 0);
    q[u] = valid ? LoadWeightVector(w1 + chunk, policy) : make_uint4(0, 0, 0, 0);
  }
}

template <int kNTiles, int kSets, int kUnroll>
__device__ inline void MultiplyPairs(int c, int c1, int len, const uint4 (&p)[kUnroll],
                                     const uint4 (&q)[kUnroll], const bf16* xs, int stride,
                                     int tokens, float (&acc)[kNTiles * kSets][4]) {
  const int r = threadIdx.x % 32 / 4, j = threadIdx.x % 4;
  const int ntiles = (tokens + kMmaTokens - 1) / kMmaTokens;
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    if (c + u >= c1) break;  // warp-uniform
    const int off = (c + u) * kChunk + j * cuda::kVecElements;
    const uint32_t a0[4] = {p[u].x, q[u].x, p[u].y, q[u].y};  // k-step 0: elements 0-3
    const uint32_t a1[4] = {p[u].z, q[u].z, p[u].w, q[u].w};  // k-step 1: elements 4-7
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
      if (nt >= ntiles) break;  // warp-uniform
      const int t = nt * kMmaTokens + r;
      uint4 x = make_uint4(0, 0, 0, 0);
      if (t < tokens && off < len) x = *reinterpret_cast<const uint4*>(xs + t * stride + off);
      cuda::MmaBf16(acc[nt * kSets + (2 * u) % kSets], a0, x.x, x.y);
      cuda::MmaBf16(acc[nt * kSets + (2 * u + 1) % kSets], a1, x.z, x.w);
    }
  }
}

// One warp's ring copies: round i of its pairs g0.. over K blocks [c0, c1) of the chunk at k0
// goes to slot i % kWeightRingStages, each lane copying its own 16-byte vectors.
template <int kUnroll, class Tile>
struct RingCopier {
  const bf16 *w0, *w1, *any;
  int c0, c1, len, rounds;
  bool row_valid;

  __device__ RingCopier(const Tile& tile, int k0, int len_, int g0, int c0_, int c1_)
      : c0(c0_), c1(c1_), len(len_), rounds((c1_ - c0_ + kUnroll - 1) / kUnroll) {
    const int r = threadIdx.x % 32 / 4, j = threadIdx.x % 4;
    row_valid = g0 + r < tile.Groups();
    any = tile.WeightRow(0, 0);  // an address for the copies that read nothing
    const int64_t at = cuda::PanelChunkStart(k0) + j * cuda::kVecElements;
    w0 = row_valid ? tile.WeightRow(g0 + r, 0) + at : any;
    w1 = row_valid ? tile.WeightRow(g0 + r, 1) + at : any;
  }

  __device__ void Issue(int round, uint4* ring, uint64_t policy) const {
    if (round < rounds) {
      const int lane = threadIdx.x % 32, j = lane % 4;
      uint4* slot = ring + (round % kWeightRingStages) * kWeightRingRoundVecs;
      const int c = c0 + round * kUnroll;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int off = (c + u) * kChunk + j * cuda::kVecElements;
        const int64_t chunk = (c + u) * cuda::kPanelChunkElements;
        const bool valid = row_valid && c + u < c1 && off < len;
        CopyWeightVector(slot + (2 * u) * 32 + lane, valid ? w0 + chunk : any, valid, policy);
        CopyWeightVector(slot + (2 * u + 1) * 32 + lane, valid ? w1 + chunk : any, valid, policy);
      }
    }
    cuda::CpAsyncCommit();  // empty groups keep the count uniform
  }
};

// The rounds of LoadPairs + MultiplyPairs with kWeightRingStages of them in flight per warp
// instead of one: each lane copies its own 16-byte weight vectors into its own slots of the
// warp's ring by cp.async and reads back only those, so no barrier is needed (wait_group counts
// the lane's own copies). The registers could not hold more rounds (the kernel is at 168).
// An earlier ring made every task slower (batch 1 5.1 ms) while the kernel kept its parameters
// and the MoE combine's arrays in local memory: 64 KB more shared memory alone cost 20 % then
// (less L1 for them). `primed`: the first kWeightRingStages - 1 rounds were issued already.
template <int kNTiles, int kSets, int kUnroll, class Tile>
__device__ inline void StreamPairsRing(const Tile& tile, int k0, int len, int g0, int c0, int c1,
                                       const bf16* xs, int stride, int tokens,
                                       float (&acc)[kNTiles * kSets][4], uint4* ring, bool primed) {
  static_assert(2 * kUnroll * 32 == kWeightRingRoundVecs);
  const int lane = threadIdx.x % 32;
  const RingCopier<kUnroll, Tile> copier(tile, k0, len, g0, c0, c1);
  const uint64_t policy = EvictFirstPolicy();
  if (!primed) {
#pragma unroll
    for (int i = 0; i < kWeightRingStages - 1; ++i) copier.Issue(i, ring, policy);
  }
  for (int round = 0; round < copier.rounds; ++round) {
    copier.Issue(round + kWeightRingStages - 1, ring, policy);
    cuda::CpAsyncWait<kWeightRingStages - 1>();  // this round's copies have landed
    const uint4* slot = ring + (round % kWeightRingStages) * kWeightRingRoundVecs;
    uint4 p[kUnroll], q[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      p[u] = slot[(2 * u) * 32 + lane];
      q[u] = slot[(2 * u + 1) * 32 + lane];
    }
    MultiplyPairs<kNTiles, kSets>(c0 + round * kUnroll, c1, len, p, q, xs, stride, tokens, acc);
  }
}

// Where RunGemvMma puts worker warp `warp`: kPairsPerWarp pairs a warp, and when the tile has fewer
// than kWorkerWarps such groups, K split into `parts` among the warps of each group.
struct GemvPlacement {
  int warp_groups, parts, rounds, my_part, chunk;
  bool active;  // with 3 pair groups, warps 6 and 7 idle

  template <class Tile>
  __device__ GemvPlacement(const Tile& tile, int warp) {
    const int k = tile.K(), tokens = tile.Tokens();
    warp_groups = (tile.Groups() + kPairsPerWarp - 1) / kPairsPerWarp;
    parts = warp_groups >= kWorkerWarps ? 1 : kWorkerWarps / warp_groups;
    rounds = (warp_groups + kWorkerWarps - 1) / kWorkerWarps;
    my_part = parts > 1 ? warp / warp_groups : 0;
    active = my_part < parts;
    // K chunk: as long as the tokens' rows fit the staging buffer, a whole number of blocks.
    const int fit = (kStageElements / max(tokens, 1) - kMaxStagePad) / kChunk * kChunk;
    chunk = min(fit, (k + kChunk - 1) / kChunk * kChunk);
  }
  // The first pair of the warp's round.
  __device__ int G0(int warp, int round) const {
    return ((parts > 1 ? warp % warp_groups : warp) + round * kWorkerWarps) * kPairsPerWarp;
  }
  // The warp's K blocks of a chunk of `len` elements: [C0, C1).
  __device__ int C0(int len) const { return (len + kChunk - 1) / kChunk * my_part / parts; }
  __device__ int C1(int len) const { return (len + kChunk - 1) / kChunk * (my_part + 1) / parts; }
};

// The first kWeightRingStages - 1 ring rounds of every worker warp's first pairs and chunk, as
// RunGemv's ring body (RunGemvMma<1, 4, 4>, tiles of up to 8 tokens) would issue them: copied
// before the task's wait, since weights depend on nothing (RingRounds::primed).
template <class Tile>
__device__ inline void PrimeGemvRing(const Tile& tile, uint4* ring) {
  const int warp = threadIdx.x / 32;
  const GemvPlacement at(tile, warp);
  const int len = min(at.chunk, tile.K()), g0 = at.G0(warp, 0);
  if (!at.active || g0 >= tile.Groups()) return;
  const RingCopier<4, Tile> copier(tile, 0, len, g0, at.C0(len), at.C1(len));
  const uint64_t policy = EvictFirstPolicy();
#pragma unroll
  for (int i = 0; i < kWeightRingStages - 1; ++i) {
    copier.Issue(i, ring + warp * kWeightRingWarpVecs, policy);
  }
}

// out = W . x for every pair and token of the tile, in K chunks that fit the staging buffer.
// When the tile has fewer than 8 warps' worth of pairs, the warps split K and add their partial
// sums through shared memory, so every warp streams weights.
template <int kNTiles, int kSets, int kUnroll, class Tile, class Rounds>
__device__ inline void RunGemvMma(const Tile& tile, GemvSmem& s, Rounds rounds_in_flight) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, j = lane % 4, r = lane / 4;
  const int k = tile.K(), tokens = tile.Tokens();
  if (tokens <= 0) return;
  const GemvPlacement at(tile, warp);
  const int parts = at.parts, rounds = at.rounds, my_part = at.my_part, chunk = at.chunk;
  const bool active = at.active;
  const int stride = StagedRowStride(chunk);
  const bool one_chunk = chunk >= k;
  const bool pre_staged = PreStaged(tile);  // then one chunk: the op checked
  for (int round = 0; round < rounds; ++round) {
    const int g0 = at.G0(warp, round);
    float acc[kNTiles * kSets][4] = {};
    for (int k0 = 0; k0 < k; k0 += chunk) {
      const int len = min(chunk, k - k0);
      const int c0 = at.C0(len), c1 = at.C1(len);
      const bool streams = active && g0 < tile.Groups();
      if (!pre_staged && !(one_chunk && round > 0)) {  // one chunk: staged once for all rounds
        if (round > 0 || k0 > 0) WorkerSync();         // the previous chunk is done with xs
        StageChunk(tile, s.xs, k0, len, tokens, stride);
        WorkerSync();
      }
      if constexpr (std::is_same_v<Rounds, RingRounds>) {
        if (streams) {
          StreamPairsRing<kNTiles, kSets, kUnroll>(
              tile, k0, len, g0, c0, c1, s.xs, stride, tokens, acc,
              rounds_in_flight.ring + warp * kWeightRingWarpVecs,
              rounds_in_flight.primed && round == 0 && k0 == 0);
        }
      } else if (streams) {  // loading the first round before the staging spilled: 3.91 -> 4.09 ms
        for (int c = c0; c < c1; c += kUnroll) {
          uint4 p[kUnroll], q[kUnroll];
          LoadPairs(tile, k0, len, g0, c, c1, p, q);
          MultiplyPairs<kNTiles, kSets>(c, c1, len, p, q, s.xs, stride, tokens, acc);
        }
      }
    }
    // Sum the chains into acc[nt * kSets]; lane (r, j) holds pair g0 + r, tokens 2j and 2j + 1.
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
      for (int set = 1; set < kSets; ++set) {
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[nt * kSets][e] += acc[nt * kSets + set][e];
      }
    }
    if (parts > 1) {  // rounds == 1 here
      if (active && my_part > 0) {
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
          for (int e = 0; e < 4; ++e) s.warps[warp].partials[nt][e][lane] = acc[nt * kSets][e];
        }
      }
      WorkerSync();
      if (my_part == 0) {
        for (int part = 1; part < parts; ++part) {
#pragma unroll
          for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              acc[nt * kSets][e] += s.warps[warp + part * at.warp_groups].partials[nt][e][lane];
            }
          }
        }
      }
    }
    // The epilogue loops over n-tiles through shared memory (each lane reads back only its own
    // sums): one inlined copy of the tile's Store instead of two per n-tile.
    if (my_part == 0 && g0 + r < tile.Groups()) {
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) s.warps[warp].partials[nt][e][lane] = acc[nt * kSets][e];
      }
#pragma unroll 1
      for (int t = 2 * j; t < tokens; t += kMmaTokens) {
        const int nt = t / kMmaTokens;
        tile.Store(g0 + r, t,
                   {s.warps[warp].partials[nt][0][lane], s.warps[warp].partials[nt][2][lane]});
        if (t + 1 < tokens) {
          tile.Store(g0 + r, t + 1,
                     {s.warps[warp].partials[nt][1][lane], s.warps[warp].partials[nt][3][lane]});
        }
      }
    }
  }
}

// Up to 8 tokens (one n-tile: four accumulator chains) or up to 64 (eight n-tiles, each
// weight block read once for every token). Four 32-element blocks per round: stream_probe on the
// H200 streamed 4.09 TB/s over 132 SMs that way, 3.71 with eight (more registers, spills). No
// L2 prefetch of the tile first: it cost 20 % there (3.22 TB/s), and dropping the prefetches
// made the step faster (H200, 8K: batch 1 4.09 -> 3.97 ms, batch 64 35.7 -> 35.3 ms). With
// RingRounds, tiles of up to 8 tokens keep three rounds in flight (the expert items).
template <class Tile, class Rounds>
__device__ inline void RunGemv(const Tile& tile, GemvSmem& s, Rounds rounds) {
  if (tile.Tokens() <= kMmaTokens) {
    RunGemvMma<1, 4, 4>(tile, s, rounds);
  } else {
    RunGemvMma<kMaxGemvTokens / kMmaTokens, 1, 4>(tile, s, RegisterRounds{});
  }
}

}  // namespace mkserve::megakernel
