// The weight-streaming GEMV core shared by every decode-sized projection (QKV, o-proj, experts,
// dense MLP, LM head). Weights are read exactly once per pass and dominate the bytes, so the
// kernel is built to keep many 16-byte weight loads in flight per SM:
//   - a warp owns kRows weight rows ("a row group") and each lane issues all kRows * kVecs of its
//     16-byte loads for a chunk before the first FMA;
//   - the activation rows (at most kTokens per pass) are staged once per block in shared memory;
//   - blocks walk row groups grid-stride, the grid sized to fill every SM.
// What a kernel computes is a Job (rows, activation rows, epilogue), so fused epilogues (SiLU*up,
// RoPE + KV write) reuse the same loop. Requires k % 8 == 0 and 16-byte aligned rows.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "backends/cuda/core/device_info.h"
#include "backends/cuda/core/kernel_common.cuh"
#include "backends/cuda/core/pdl_launch.h"
#include "backends/cuda/core/weight_panels.h"
#include "common/error.h"

namespace mkserve::cuda {

inline constexpr int kGemvWarps = 8;
inline constexpr int kGemvThreads = kGemvWarps * kWarpSize;
inline constexpr int kGemvTokens = 8;  // activation rows per pass, most
inline constexpr int kCacheLine = 128;
inline constexpr int64_t kSliceBlocksPerSm = 4;

// Copies activation rows [0, count) of k bf16 each into shared memory (row t from row_of(t)).
// Each thread issues kStageBatch loads before its first store: one round trip, not eight.
inline constexpr int kStageBatch = 8;

template <class RowOf>
__device__ inline void StageRows(__nv_bfloat16* xs, int64_t k, int count, RowOf row_of) {
  const int64_t vecs = k / kVecElements, total = count * vecs;
  for (int64_t base = threadIdx.x; base < total; base += blockDim.x * kStageBatch) {
    uint4 v[kStageBatch];
#pragma unroll
    for (int b = 0; b < kStageBatch; ++b) {
      const int64_t i = base + b * static_cast<int64_t>(blockDim.x);
      if (i < total)
        v[b] = reinterpret_cast<const uint4*>(row_of(static_cast<int>(i / vecs)))[i % vecs];
    }
#pragma unroll
    for (int b = 0; b < kStageBatch; ++b) {
      const int64_t i = base + b * static_cast<int64_t>(blockDim.x);
      if (i < total) reinterpret_cast<uint4*>(xs)[i] = v[b];
    }
  }
}

// Whether a Job's weights are stored in panels (weight_panels.h): its kWeightPanels.
template <class Job>
constexpr bool ReadsPanels() {
  if constexpr (requires { Job::kWeightPanels; }) {
    return Job::kWeightPanels;
  } else {
    return false;
  }
}

// Weights in panels: a panel's 8 groups go to one warp, or at one token to a whole block, whose
// warps split its K range (a warp a panel left 96 blocks of work for North's batch-1 experts, a
// third of a wave: layered batch 1 4.53 ms a step).
inline constexpr int64_t kPanelGroups = kPanelRows / 2;
template <int kTokens>
inline constexpr int kWarpsPerPanel = kTokens == 1 ? kGemvWarps : 1;

// The warps a GEMV job of `groups` groups keeps busy.
template <int kTokens, class Job>
inline int64_t GemvWarpsWanted(int64_t groups) {
  if constexpr (ReadsPanels<Job>()) {
    return CeilDiv(groups, kPanelGroups) * kWarpsPerPanel<kTokens>;
  } else {
    return groups;
  }
}

// One warp: acc[r][t] = dot(w_rows[r], xs[t]) for t < count; every lane ends with every sum.
// Lane l reads vectors l, l + 32, ... of each row: coalesced 512-byte warp reads.
template <int kRows, int kVecs, int kTokens>
__device__ inline void WarpDotRows(const __nv_bfloat16* const (&w_rows)[kRows], int64_t k,
                                   const __nv_bfloat16* xs, int count,
                                   float (&acc)[kRows][kTokens]) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t vecs = k / kVecElements;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int t = 0; t < kTokens; ++t) acc[r][t] = 0.0f;
  }
  for (int64_t base = lane; base < vecs; base += kWarpSize * kVecs) {
    Bf16x8 w[kRows][kVecs];
#pragma unroll
    for (int u = 0; u < kVecs; ++u) {  // every load of the chunk first: bytes in flight
      const int64_t v = base + u * kWarpSize;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        w[r][u] = v < vecs ? LoadStreaming(w_rows[r] + v * kVecElements) : Bf16x8{};
      }
    }
#pragma unroll
    for (int u = 0; u < kVecs; ++u) {
      const int64_t v = base + u * kWarpSize;
      if (v >= vecs) break;
      float wf[kRows][kVecElements];  // converted once, used by every token
#pragma unroll
      for (int r = 0; r < kRows; ++r) Bf16x8ToFloat(w[r][u], wf[r]);
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
        if (t >= count) break;
        float x[kVecElements];
        Bf16x8ToFloat(LoadBf16x8(xs + t * k + v * kVecElements), x);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
#pragma unroll
          for (int i = 0; i < kVecElements; ++i) acc[r][t] = fmaf(wf[r][i], x[i], acc[r][t]);
        }
      }
    }
  }
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    if (t >= count) break;  // warp-uniform: no shuffles for absent tokens
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[r][t] = WarpSum(acc[r][t]);
  }
}

// Weights in panels (weight_panels.h), kRows == 2: one warp takes chunks [c_begin, c_end) of a
// panel, its 8 groups (pairs) g0.. of 2 rows. Lane (r, j) multiplies pair g0 + r's rows with
// vector j of each 32-K chunk, so every load instruction of the warp reads 512 contiguous bytes
// (a row at a time read 8 separate 64-byte pieces: layered batch 1 at 8K 4.10 -> 4.26 ms a step
// against row-major weights); the 4 lanes of a pair add their sums, and lane j == 0 holds them.
template <int kVecs, int kTokens, class Job>
__device__ inline void WarpDotPanel(const Job& job, int64_t g0, int64_t k, int64_t c_begin,
                                    int64_t c_end, const __nv_bfloat16* xs, int count,
                                    float (&acc)[2][kTokens]) {
  const int lane = threadIdx.x % kWarpSize, r = lane / 4, j = lane % 4;
  const __nv_bfloat16* w0 = job.WeightRow(g0 + r, 0) + j * kVecElements;
  const __nv_bfloat16* w1 = job.WeightRow(g0 + r, 1) + j * kVecElements;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
#pragma unroll
    for (int t = 0; t < kTokens; ++t) acc[h][t] = 0.0f;
  }
  for (int64_t c0 = c_begin; c0 < c_end; c0 += kVecs) {
    Bf16x8 a[kVecs], b[kVecs];
#pragma unroll
    for (int u = 0; u < kVecs; ++u) {  // every load of the round first: bytes in flight
      const int64_t c = c0 + u;        // (a chunk's padding is stored: no check of k)
      a[u] = c < c_end ? LoadStreaming(w0 + c * kPanelChunkElements) : Bf16x8{};
      b[u] = c < c_end ? LoadStreaming(w1 + c * kPanelChunkElements) : Bf16x8{};
    }
#pragma unroll
    for (int u = 0; u < kVecs; ++u) {
      const int64_t at = (c0 + u) * kPanelChunk + j * kVecElements;
      if (c0 + u >= c_end) break;  // warp-uniform
      if (at >= k) continue;       // the last chunk's padding
      float wa[kVecElements], wb[kVecElements];
      Bf16x8ToFloat(a[u], wa);
      Bf16x8ToFloat(b[u], wb);
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
        if (t >= count) break;
        float x[kVecElements];
        Bf16x8ToFloat(LoadBf16x8(xs + t * k + at), x);
#pragma unroll
        for (int i = 0; i < kVecElements; ++i) {
          acc[0][t] = fmaf(wa[i], x[i], acc[0][t]);
          acc[1][t] = fmaf(wb[i], x[i], acc[1][t]);
        }
      }
    }
  }
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    if (t >= count) break;  // warp-uniform
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      acc[h][t] += __shfl_xor_sync(0xffffffffu, acc[h][t], 1);
      acc[h][t] += __shfl_xor_sync(0xffffffffu, acc[h][t], 2);
    }
  }
}

// Warms L2 with the rows of row group `group` (weights never depend on the previous kernel, so
// the first group's can go before WaitForPrevious and overlap it under PDL).
template <int kRows, class Job>
__device__ inline void PrefetchGroup(const Job& job, int64_t group) {
  if (group >= job.NumGroups()) return;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t bytes = job.K() * static_cast<int64_t>(sizeof(__nv_bfloat16));
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const char* row = reinterpret_cast<const char*>(job.WeightRow(group, r));
    for (int64_t off = lane * kCacheLine; off < bytes; off += kWarpSize * kCacheLine) {
      PrefetchL2(row + off);
    }
  }
}

// The kernel every GEMV job runs. A Job provides:
//   bool Begin()                    per block, after WaitForPrevious (false: nothing to do)
//   bool Prefetchable()             weights known before the previous kernel ends (row-major)
//   int64_t K(), NumGroups()        reduction length, row groups of kRows rows
//   int NumTokens()                 activation rows of this block (after Begin)
//   const bf16* ActivationRow(t)    activation row t (after Begin)
//   const bf16* WeightRow(g, r)     row r of group g (clamped in range by the job)
//   kWeightPanels (optional)        static constexpr true: the weights are in panels (kRows ==
//                                   2, a group is a pair, a warp or block takes 8 of them)
//   void Store(g, t, vals[kRows])   epilogue of token t (called by one lane)
// One token: registers capped at 128 for two resident blocks (no spills). Several tokens: the
// per-token accumulators need more, so no cap (one or two blocks per SM, no spills).
template <int kRows, int kVecs, int kTokens, class Job>
__global__ void __launch_bounds__(kGemvThreads, kTokens == 1 ? 2 : 1) GemvJobKernel(Job job) {
  extern __shared__ uint4 gemv_smem[];
  auto* xs = reinterpret_cast<__nv_bfloat16*>(gemv_smem);
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  constexpr bool kPanels = ReadsPanels<Job>();
  static_assert(!kPanels || kRows == 2, "a panel's groups are row pairs");
  const int64_t first_unit = blockIdx.x * static_cast<int64_t>(kGemvWarps) + warp;
  if constexpr (!kPanels) {  // the prefetch reads row-major rows
    if (job.Prefetchable()) PrefetchGroup<kRows>(job, first_unit);
  }
  WaitForPrevious();
  AllowNext();
  if (!job.Begin()) return;
  const int64_t k = job.K(), groups = job.NumGroups();
  const int tokens = job.NumTokens();
  for (int first = 0; first < tokens; first += kTokens) {
    const int count = min(kTokens, tokens - first);
    if (first > 0) __syncthreads();  // the previous pass is done with xs
    StageRows(xs, k, count, [&](int t) { return job.ActivationRow(first + t); });
    __syncthreads();
    const int64_t stride = gridDim.x * static_cast<int64_t>(kGemvWarps);
    if constexpr (kPanels) {
      // Warps [kWarpsPerPanel * q, kWarpsPerPanel * (q + 1)) of the grid share a panel, each a
      // K slice; with several, part 0 adds the others' sums (uniform over the block).
      constexpr int kParts = kWarpsPerPanel<kTokens>;
      const int part = warp % kParts;
      const int64_t chunks = (k + kPanelChunk - 1) / kPanelChunk;
      const int64_t c_begin = chunks * part / kParts, c_end = chunks * (part + 1) / kParts;
      auto* partial = reinterpret_cast<float*>(xs + kTokens * k);  // [warp][lane][2], kParts > 1
      for (int64_t g0 = first_unit / kParts * kPanelGroups; g0 < groups;
           g0 += stride / kParts * kPanelGroups) {
        float acc[2][kTokens];
        WarpDotPanel<kVecs, kTokens>(job, g0, k, c_begin, c_end, xs, count, acc);
        if constexpr (kParts > 1) {
          static_assert(kTokens == 1);
          partial[(warp * kWarpSize + lane) * 2] = acc[0][0];
          partial[(warp * kWarpSize + lane) * 2 + 1] = acc[1][0];
          __syncthreads();
          if (part == 0) {
            for (int other = 1; other < kParts; ++other) {
              acc[0][0] += partial[((warp + other) * kWarpSize + lane) * 2];
              acc[1][0] += partial[((warp + other) * kWarpSize + lane) * 2 + 1];
            }
          }
          __syncthreads();  // the partials are read before the next panel's
        }
        const int64_t g = g0 + lane / 4;
        if (part == 0 && lane % 4 == 0 && g < groups) {
#pragma unroll
          for (int t = 0; t < kTokens; ++t) {
            if (t < count) job.Store(g, first + t, {acc[0][t], acc[1][t]});
          }
        }
      }
    } else {
      for (int64_t g = first_unit; g < groups; g += stride) {
        const __nv_bfloat16* rows[kRows];
#pragma unroll
        for (int r = 0; r < kRows; ++r) rows[r] = job.WeightRow(g, r);
        float acc[kRows][kTokens];
        WarpDotRows<kRows, kVecs, kTokens>(rows, k, xs, count, acc);
#pragma unroll
        for (int t = 0; t < kTokens; ++t) {
          if (t < count && lane == t) {
            float vals[kRows];
#pragma unroll
            for (int r = 0; r < kRows; ++r) vals[r] = acc[r][t];
            job.Store(g, first + t, vals);
          }
        }
      }
    }
  }
}

struct GemvLimits {
  int max_smem, smem_per_sm, blocks_per_sm;  // blocks_per_sm: by registers and threads
};

// Device limits for one GEMV kernel; lifts its dynamic shared-memory cap to the device's.
inline GemvLimits QueryGemvLimits(const void* kernel) {
  const DeviceInfo& device = CurrentDeviceInfo();
  GemvLimits l{};
  l.max_smem = static_cast<int>(device.shared_memory_per_block_optin);
  l.smem_per_sm = static_cast<int>(device.shared_memory_per_sm);
  MKSERVE_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, l.max_smem));
  MKSERVE_CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&l.blocks_per_sm, kernel, kGemvThreads, 0));
  return l;
}

// Blocks along x: one wave of resident blocks, each walking its row groups (no tail wave).
// Several slices (experts) with several tokens each: walking many groups per warp serialises
// their latency, so kSliceBlocksPerSm blocks per SM in all (batch 64 on the H200: 4 beat 1 and
// 2). One token (batch 1): one resident wave measured best.
inline unsigned GemvGridX(const GemvLimits& limits, int64_t smem, int64_t warps, unsigned grid_y,
                          bool several_tokens) {
  constexpr int64_t kReservedSmem = 1024;  // per block, by the runtime
  const int64_t resident = std::max<int64_t>(
      1, std::min<int64_t>(limits.blocks_per_sm, limits.smem_per_sm / (smem + kReservedSmem)));
  const bool slices = grid_y > 1 && several_tokens;
  const int64_t per_sm = slices ? std::max<int64_t>(resident, kSliceBlocksPerSm) : resident;
  const int64_t cap = std::max<int64_t>(1, int64_t{DeviceSmCount()} * per_sm / grid_y);
  return static_cast<unsigned>(std::min(CeilDiv(warps, kGemvWarps), cap));
}

// Launches GemvJobKernel over `groups` row groups (grid x) and grid_y independent slices
// (experts). Shared memory holds kTokens activation rows of k bf16.
template <int kRows, int kVecs, int kTokens, class Job>
void LaunchGemvJob(const Job& job, int64_t groups, int64_t k, unsigned grid_y,
                   cudaStream_t stream) {
  auto* kernel = &GemvJobKernel<kRows, kVecs, kTokens, Job>;
  static const GemvLimits limits = QueryGemvLimits(reinterpret_cast<const void*>(kernel));
  // The staged rows, then at one token with panels the block's partial sums.
  const int64_t partials = ReadsPanels<Job>() && kTokens == 1 ? kGemvThreads * 2 : 0;
  const int64_t smem = kTokens * k * static_cast<int64_t>(sizeof(__nv_bfloat16)) +
                       partials * static_cast<int64_t>(sizeof(float));
  if (smem > limits.max_smem) {
    throw Error("GEMV: k=" + std::to_string(k) + " needs " + std::to_string(smem) +
                " bytes of shared memory, the device allows " + std::to_string(limits.max_smem));
  }
  const unsigned blocks =
      GemvGridX(limits, smem, GemvWarpsWanted<kTokens, Job>(groups), grid_y, kTokens > 1);
  LaunchPdl(kernel, dim3(blocks, grid_y), dim3(kGemvThreads), static_cast<size_t>(smem), stream,
            job);
}

}  // namespace mkserve::cuda
