#include "backends/cuda/prefill/router_prefill.h"

#include <string>

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/core/kernel_common.cuh"
#include "backends/cuda/core/mma_sm80.cuh"
#include "common/error.h"

namespace mkserve::cuda {
namespace {

constexpr int kTileM = 64;   // tokens per CTA, 16 per warp
constexpr int kTileN = 128;  // experts per CTA
constexpr int kTileK = 32;
constexpr int kTerms = 3;  // hi, mid, lo
constexpr int kStride = kTileK + 8;
constexpr int kThreads = 128;
constexpr int kXLoads = kTileM * kTileK / 4 / kThreads;  // float4 per thread per tile
constexpr int kWLoads = kTileN * kTileK / kVecElements / kThreads;
constexpr int kStageElements = (kTerms * kTileM + kTileN) * kStride;
constexpr size_t kSmemBytes = 2 * kStageElements * sizeof(__nv_bfloat16);

struct XTile {
  float4 v[kXLoads];
};

__device__ XTile LoadX(const float* x, int m, int64_t k, int64_t row0, int64_t k0) {
  XTile t;
#pragma unroll
  for (int i = 0; i < kXLoads; ++i) {
    const int idx = threadIdx.x + i * kThreads, r = idx / (kTileK / 4),
              c = (idx % (kTileK / 4)) * 4;
    t.v[i] = row0 + r < m ? *reinterpret_cast<const float4*>(x + (row0 + r) * k + k0 + c)
                          : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  return t;
}

// x = hi + mid + lo: each term is the bf16 rounding of what the previous ones left over.
__device__ void StoreSplit(const XTile& t, __nv_bfloat16* stage) {
#pragma unroll
  for (int i = 0; i < kXLoads; ++i) {
    const int idx = threadIdx.x + i * kThreads, r = idx / (kTileK / 4),
              c = (idx % (kTileK / 4)) * 4;
    float rest[4] = {t.v[i].x, t.v[i].y, t.v[i].z, t.v[i].w};
#pragma unroll
    for (int term = 0; term < kTerms; ++term) {
      __nv_bfloat16 b[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        b[e] = __float2bfloat16_rn(rest[e]);
        rest[e] -= __bfloat162float(b[e]);
      }
      *reinterpret_cast<uint2*>(stage + (term * kTileM + r) * kStride + c) =
          *reinterpret_cast<const uint2*>(b);
    }
  }
}

__device__ void LoadW(const __nv_bfloat16* w, int64_t n, int64_t k, int64_t n0, int64_t k0,
                      __nv_bfloat16* w_tile) {
#pragma unroll
  for (int i = 0; i < kWLoads; ++i) {
    const int idx = threadIdx.x + i * kThreads, r = idx / (kTileK / kVecElements);
    const int c = (idx % (kTileK / kVecElements)) * kVecElements;
    const bool valid = n0 + r < n;
    CpAsync16(w_tile + r * kStride + c, w + (valid ? n0 + r : 0) * k + k0 + c, valid);
  }
}

__device__ void MmaStage(const __nv_bfloat16* stage, float (&acc)[kTileN / 8][4]) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const __nv_bfloat16* w_tile = stage + kTerms * kTileM * kStride;
#pragma unroll
  for (int kk = 0; kk < kTileK / 16; ++kk) {
    uint32_t af[kTerms][4];
#pragma unroll
    for (int term = 0; term < kTerms; ++term) {
      const int row = term * kTileM + warp * 16 + lane % 8 + ((lane / 8) % 2) * 8;
      LdMatrixX4(af[term], SharedAddress(stage + row * kStride + kk * 16 + (lane / 16) * 8));
    }
#pragma unroll
    for (int jp = 0; jp < kTileN / 16; ++jp) {
      const int row = jp * 16 + lane % 8 + (lane / 16) * 8;
      uint32_t b[4];
      LdMatrixX4(b, SharedAddress(w_tile + row * kStride + kk * 16 + ((lane / 8) % 2) * 8));
#pragma unroll
      for (int term = kTerms - 1; term >= 0; --term) {  // small terms first
        MmaBf16(acc[2 * jp], af[term], b[0], b[1]);
        MmaBf16(acc[2 * jp + 1], af[term], b[2], b[3]);
      }
    }
  }
}

// Grid (token tiles, expert tiles); x prefetched into registers, w through cp.async, 2 stages.
__global__ void __launch_bounds__(kThreads)
    RouterPrefillKernel(const float* x, int m, int64_t k, const __nv_bfloat16* w, int64_t n,
                        float* out) {
  extern __shared__ __align__(16) unsigned char smem[];
  auto* stages = reinterpret_cast<__nv_bfloat16*>(smem);
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kTileM;
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * kTileN;
  const int64_t k_tiles = k / kTileK;
  XTile next = LoadX(x, m, k, row0, 0);
  LoadW(w, n, k, n0, 0, stages + kTerms * kTileM * kStride);
  CpAsyncCommit();
  StoreSplit(next, stages);
  float acc[kTileN / 8][4] = {};
  for (int64_t kt = 0; kt < k_tiles; ++kt) {
    __nv_bfloat16* stage = stages + (kt % 2) * kStageElements;
    __nv_bfloat16* other = stages + ((kt + 1) % 2) * kStageElements;
    const bool more = kt + 1 < k_tiles;
    if (more) {
      next = LoadX(x, m, k, row0, (kt + 1) * kTileK);
      LoadW(w, n, k, n0, (kt + 1) * kTileK, other + kTerms * kTileM * kStride);
    }
    CpAsyncCommit();
    CpAsyncWait<1>();
    __syncthreads();  // this stage's x split and w visible to every warp
    MmaStage(stage, acc);
    if (more) StoreSplit(next, other);
    __syncthreads();  // this stage fully read before the next iteration refills it
  }
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t row = row0 + warp * 16 + lane / 4 + 8 * h;
    if (row >= m) continue;
#pragma unroll
    for (int j = 0; j < kTileN / 8; ++j) {
      const int64_t col = n0 + j * 8 + 2 * (lane % 4);
      if (col < n) out[row * n + col] = acc[j][2 * h];
      if (col + 1 < n) out[row * n + col + 1] = acc[j][2 * h + 1];
    }
  }
}

}  // namespace

bool RouterLogitsPrefillSupports(int64_t k, int64_t n) { return k > 0 && k % kTileK == 0 && n > 0; }

void RouterLogitsPrefill(const float* x, int64_t m, int64_t k, const __nv_bfloat16* w, int64_t n,
                         float* out, cudaStream_t stream) {
  if (!RouterLogitsPrefillSupports(k, n) || m < 0 || m > INT32_MAX / 2) {
    throw Error("RouterLogitsPrefill: unsupported shape m=" + std::to_string(m) +
                " k=" + std::to_string(k) + " n=" + std::to_string(n) + " (k a multiple of 32)");
  }
  if (m == 0) return;
  static const cudaError_t attribute =
      cudaFuncSetAttribute(RouterPrefillKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(kSmemBytes));
  MKSERVE_CUDA_CHECK(attribute);
  const dim3 grid(static_cast<unsigned>(CeilDiv(m, kTileM)),
                  static_cast<unsigned>(CeilDiv(n, kTileN)));
  RouterPrefillKernel<<<grid, kThreads, kSmemBytes, stream>>>(x, static_cast<int>(m), k, w, n, out);
  MKSERVE_CUDA_CHECK_LAUNCH();
}

}  // namespace mkserve::cuda
