// The CUDA-core GEMV body every projection op of the megakernel runs (QKV, O-proj, dense MLP,
// experts, LM head): the 8 worker warps walk the tile's row groups, the activation rows are
// staged through shared memory 8 at a time, and the dot products are the layered path's
// WarpDotRows. A tile is a small struct (the layered path's Job idea):
//   int K()                        reduction length (the task's K range)
//   int Groups()                   row groups of kRows weight rows
//   int Tokens()                   activation rows
//   const bf16* ActivationRow(t)   activation row t, at the K range's start
//   const bf16* WeightRow(g, r)    weight row r of group g, at the K range's start
//   void Store(g, t, vals)         epilogue for token t (one lane calls it)
#pragma once

#include "backends/cuda/decode/gemv_tile.cuh"
#include "megakernel/device/sync.cuh"

namespace mkserve::megakernel {

inline constexpr int kStageTokens = cuda::kGemvTokens;  // activation rows per pass
inline constexpr int kMaxStageK = 4096;                 // widest K a tile stages
inline constexpr int kCacheLineBytes = 128;

// Activation rows [0, count) of k bf16 into shared memory, through L2.
template <class RowOf>
__device__ inline void StageRowsCg(bf16* xs, int k, int count, RowOf row_of) {
  const int vecs = k / cuda::kVecElements, total = count * vecs;
  for (int i = threadIdx.x; i < total; i += kWorkerThreads) {
    reinterpret_cast<uint4*>(xs)[i] = LoadCg(row_of(i / vecs) + (i % vecs) * cuda::kVecElements);
  }
}

// kTokens activation rows per pass: 1 (the batch-1 step) or kStageTokens.
template <int kRows, int kVecs, int kTokens, class Tile>
__device__ inline void RunGemvTile(const Tile& tile, bf16* xs) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int k = tile.K(), groups = tile.Groups(), tokens = tile.Tokens();
  for (int first = 0; first < tokens; first += kTokens) {
    const int count = min(kTokens, tokens - first);
    if (first > 0) WorkerSync();  // the previous pass is done with xs
    StageRowsCg(xs, k, count, [&](int t) { return tile.ActivationRow(first + t); });
    WorkerSync();
    for (int g = warp; g < groups; g += kWorkerWarps) {
      const bf16* rows[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) rows[r] = tile.WeightRow(g, r);
      float acc[kRows][kTokens];
      cuda::WarpDotRows<kRows, kVecs, kTokens>(rows, k, xs, count, acc);
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
        if (t < count && lane == t) {
          float vals[kRows];
#pragma unroll
          for (int r = 0; r < kRows; ++r) vals[r] = acc[r][t];
          tile.Store(g, first + t, vals);
        }
      }
    }
  }
}

// The kernel is one function of about 700 KB of instructions, and what a task executes comes
// through the instruction caches: the loops are kept small. One activation row (batch 1) runs
// its own loop without the seven other rows' unrolled code, and 8-row passes unroll 4 vectors
// per lane (the tile's L2 prefetch hides the latency more unrolling would). H200, 8K, against
// one 8-row loop with 8 vectors: batch 1 5.11 -> 4.17 ms, batch 8 17.6 -> 16.8 ms. One row keeps
// 8 vectors on K 2048 (one round per row; 4 measured the same).
template <int kRows, class Tile>
__device__ inline void RunGemv(const Tile& tile, bf16* xs) {
  if (tile.Tokens() > 1) {
    RunGemvTile<kRows, 4, kStageTokens>(tile, xs);
  } else if (tile.K() / cuda::kVecElements > 4 * 32) {
    RunGemvTile<kRows, 8, 1>(tile, xs);
  } else {
    RunGemvTile<kRows, 4, 1>(tile, xs);
  }
}

// Warms L2 with `rows` weight rows of `bytes_per_row` starting at `first_row`, `stride` elements
// apart: issued before the task waits for its activations, so the weights stream meanwhile.
__device__ inline void PrefetchRows(const bf16* first_row, int rows, int64_t stride,
                                    int bytes_per_row) {
  const int lines = bytes_per_row / kCacheLineBytes;
  for (int i = threadIdx.x; i < rows * lines; i += kWorkerThreads) {
    const char* row = reinterpret_cast<const char*>(first_row + (i / lines) * stride);
    cuda::PrefetchL2(row + (i % lines) * kCacheLineBytes);
  }
}

}  // namespace mkserve::megakernel
