// Small helpers shared by the layered kernels: warp reductions, 16-byte bf16 vectors, and the
// head_dim dispatch of the attention kernels (head_dim.h).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "backends/cuda/core/head_dim.h"

namespace mkserve::cuda {

inline constexpr int kWarpSize = 32;
inline constexpr int kVecElements = 8;  // bf16 per 16-byte load
inline constexpr float kLog2e = 1.4426950408889634f;

__device__ inline float WarpSum(float value) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  }
  return value;
}

__device__ inline float WarpMax(float value) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  }
  return value;
}

// Sum over the block; `scratch` holds one float per warp. Every thread gets the result.
__device__ inline float BlockSum(float value, float* scratch) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int num_warps = (blockDim.x + kWarpSize - 1) / kWarpSize;
  value = WarpSum(value);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < num_warps; ++w) total += scratch[w];
  return total;
}

struct Bf16x8 {
  uint4 raw;
};

__device__ inline Bf16x8 LoadBf16x8(const __nv_bfloat16* p) {
  return Bf16x8{*reinterpret_cast<const uint4*>(p)};
}

// Weights are read once per step: read-only path, no L1 allocation (keeps L1 for activations).
__device__ inline Bf16x8 LoadStreaming(const __nv_bfloat16* p) {
  Bf16x8 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.raw.x), "=r"(v.raw.y), "=r"(v.raw.z), "=r"(v.raw.w)
               : "l"(p));
  return v;
}

// Warms L2 with a weight line before the kernel may read its inputs (see WaitForPrevious).
__device__ inline void PrefetchL2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// Programmatic dependent launch (sm_90): a kernel launched by LaunchPdl may start while the one
// before it is still running. It must call WaitForPrevious before reading anything the previous
// kernels wrote, or writing anything they read; AllowNext lets the next kernel start early.
// Both are no-ops for a plain launch.
__device__ inline void WaitForPrevious() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ inline void AllowNext() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ inline void Bf16x8ToFloat(const Bf16x8& v, float (&out)[kVecElements]) {
  const __nv_bfloat162* pairs = reinterpret_cast<const __nv_bfloat162*>(&v.raw);
#pragma unroll
  for (int i = 0; i < kVecElements / 2; ++i) {
    float2 f = __bfloat1622float2(pairs[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

__device__ inline float Dot8(const Bf16x8& a, const Bf16x8& b) {
  float fa[kVecElements], fb[kVecElements];
  Bf16x8ToFloat(a, fa);
  Bf16x8ToFloat(b, fb);
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kVecElements; ++i) sum = fmaf(fa[i], fb[i], sum);
  return sum;
}

__device__ inline float Silu(float x) { return x / (1.0f + expf(-x)); }

inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace mkserve::cuda
