// stream_probe: how fast one SM of a persistent kernel streams weight tiles into tensor-core
// fragments, by loading method. Each active CTA (288 threads, 8 worker warps, the megakernel's
// shape) runs `items` tiles of 128 rows x 2048 bf16 (512 KB, an expert gate/up item) one after
// the other; a warp owns 16 rows and feeds them to mma.sync as the megakernel's GEMV does. Prints
// one row per (method, active SMs): per-SM GB/s and the aggregate TB/s. Benchmark, not a test.
//   stream_probe [items]
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/core/kernel_common.cuh"
#include "backends/cuda/core/mma_sm80.cuh"
#include "megakernel/device/sync.cuh"

namespace {

constexpr int kWarps = 8, kThreads = kWarps * 32 + 32;
constexpr int kRows = 128, kK = 2048, kChunk = 32;
constexpr int64_t kItemElements = int64_t{kRows} * kK;
constexpr int kRingStageChunks = 4;  // cp.async: 32-element chunks per ring stage
constexpr int kMaxRingStages = 6;

__device__ void Mma2(float (&acc)[4], uint4 p, uint4 q) {
  const uint32_t a0[4] = {p.x, q.x, p.y, q.y}, a1[4] = {p.z, q.z, p.w, q.w};
  mkserve::cuda::MmaBf16(acc, a0, 0x3f803f80u, 0x3f803f80u);
  mkserve::cuda::MmaBf16(acc, a1, 0x3f803f80u, 0x3f803f80u);
}

// Registers: kUnroll chunks of loads issued, then consumed.
template <int kUnroll>
__device__ void StreamRegisters(const __nv_bfloat16* w0, const __nv_bfloat16* w1, float (&acc)[4]) {
  const int j = threadIdx.x % 4;
  for (int c = 0; c < kK / kChunk; c += kUnroll) {
    uint4 p[kUnroll], q[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      p[u] = mkserve::cuda::LoadStreaming(w0 + (c + u) * kChunk + j * 8).raw;
      q[u] = mkserve::cuda::LoadStreaming(w1 + (c + u) * kChunk + j * 8).raw;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) Mma2(acc, p[u], q[u]);
  }
}

// cp.async ring of kStages stages per warp; each lane reads back only what it copied.
template <int kStages>
__device__ void StreamRing(const __nv_bfloat16* w0, const __nv_bfloat16* w1, uint4* ring,
                           float (&acc)[4]) {
  const int lane = threadIdx.x % 32, j = lane % 4;
  constexpr int kStageVecs = kRingStageChunks * 2 * 32;  // uint4 per stage per warp
  constexpr int kStagesTotal = kK / kChunk / kRingStageChunks;
  auto issue = [&](int stage) {
    uint4* slot = ring + (stage % kStages) * kStageVecs;
#pragma unroll
    for (int u = 0; u < kRingStageChunks; ++u) {
      const int c = stage * kRingStageChunks + u;
      mkserve::cuda::CpAsync16(slot + (2 * u) * 32 + lane, w0 + c * kChunk + j * 8, true);
      mkserve::cuda::CpAsync16(slot + (2 * u + 1) * 32 + lane, w1 + c * kChunk + j * 8, true);
    }
    mkserve::cuda::CpAsyncCommit();
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) issue(s);
  for (int stage = 0; stage < kStagesTotal; ++stage) {
    if (stage + kStages - 1 < kStagesTotal) {
      issue(stage + kStages - 1);
    } else {
      mkserve::cuda::CpAsyncCommit();  // an empty group keeps the count
    }
    mkserve::cuda::CpAsyncWait<kStages - 1>();
    const uint4* slot = ring + (stage % kStages) * kStageVecs;
#pragma unroll
    for (int u = 0; u < kRingStageChunks; ++u)
      Mma2(acc, slot[(2 * u) * 32 + lane], slot[(2 * u + 1) * 32 + lane]);
  }
}

__global__ void __launch_bounds__(kThreads, 1)
    ProbeKernel(const __nv_bfloat16* weights, int method, int active, int items, uint64_t* times,
                float* sink) {
  extern __shared__ uint4 ring_smem[];
  if (blockIdx.x >= active || threadIdx.x >= kWarps * 32) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  asm volatile("bar.sync 1, %0;" ::"n"(kWarps * 32));
  const uint64_t start = mkserve::megakernel::GlobalTimerNs();
  float acc[4] = {};
  for (int item = 0; item < items; ++item) {
    const __nv_bfloat16* base = weights + (int64_t{item} * active + blockIdx.x) * kItemElements;
    if (method == 1 || method == 3) {  // the whole item to L2 first
      for (int i = threadIdx.x; i < kRows * kK * 2 / 128; i += kWarps * 32) {
        mkserve::cuda::PrefetchL2(reinterpret_cast<const char*>(base) + i * 128);
      }
    }
    const __nv_bfloat16* w0 = base + (warp * 16 + lane / 4) * int64_t{kK};
    const __nv_bfloat16* w1 = w0 + 8 * int64_t{kK};
    switch (method) {
      case 0:
      case 1:
        StreamRegisters<8>(w0, w1, acc);
        break;
      case 2:
      case 3:
        StreamRegisters<4>(w0, w1, acc);
        break;
      case 4:
        StreamRing<2>(w0, w1, ring_smem + warp * 2 * kRingStageChunks * 64, acc);
        break;
      case 5:
        StreamRing<4>(w0, w1, ring_smem + warp * 4 * kRingStageChunks * 64, acc);
        break;
      case 6:
        StreamRing<6>(w0, w1, ring_smem + warp * 6 * kRingStageChunks * 64, acc);
        break;
    }
    asm volatile("bar.sync 1, %0;" ::"n"(kWarps * 32));  // items run one after the other
  }
  if (threadIdx.x == 0) times[blockIdx.x] = mkserve::megakernel::GlobalTimerNs() - start;
  if (acc[0] == 123.0f) sink[0] = acc[1];  // keeps the loads
}

}  // namespace

int Run(int argc, char** argv) {
  const int items = argc > 1 ? std::atoi(argv[1]) : 4;
  int sms = 0;
  MKSERVE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int64_t elements = kItemElements * items * sms;
  __nv_bfloat16* weights = nullptr;
  uint64_t* times = nullptr;
  float* sink = nullptr;
  MKSERVE_CUDA_CHECK(cudaMalloc(&weights, elements * 2));
  MKSERVE_CUDA_CHECK(cudaMemset(weights, 0x3c, elements * 2));
  MKSERVE_CUDA_CHECK(cudaMalloc(&times, sms * sizeof(uint64_t)));
  MKSERVE_CUDA_CHECK(cudaMalloc(&sink, sizeof(float)));
  const int smem = kWarps * kMaxRingStages * kRingStageChunks * 64 * 16;
  MKSERVE_CUDA_CHECK(
      cudaFuncSetAttribute(ProbeKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const char* names[] = {"registers, unroll 8",          "registers, unroll 8, L2 prefetch",
                         "registers, unroll 4",          "registers, unroll 4, L2 prefetch",
                         "cp.async ring, 2 x 4 KB/warp", "cp.async ring, 4 x 4 KB/warp",
                         "cp.async ring, 6 x 4 KB/warp"};
  std::printf("| method | active SMs | per-SM GB/s | aggregate TB/s |\n|---|---|---|---|\n");
  for (int method = 0; method < 7; ++method) {
    for (int active : {sms, sms * 3 / 4, sms / 4}) {
      double best_ns = 1e30, mean_ns = 0;
      for (int rep = 0; rep < 3; ++rep) {
        ProbeKernel<<<sms, kThreads, smem>>>(weights, method, active, items, times, sink);
        MKSERVE_CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<uint64_t> t(sms);
        MKSERVE_CUDA_CHECK(
            cudaMemcpy(t.data(), times, sms * sizeof(uint64_t), cudaMemcpyDeviceToHost));
        double worst = 0, sum = 0;
        for (int s = 0; s < active; ++s) {
          worst = std::max(worst, static_cast<double>(t[s]));
          sum += t[s];
        }
        if (worst < best_ns) {
          best_ns = worst;
          mean_ns = sum / active;
        }
      }
      const double bytes_per_sm = kItemElements * 2.0 * items;
      std::printf("| %s | %d | %.1f | %.2f |\n", names[method], active, bytes_per_sm / mean_ns,
                  bytes_per_sm * active / best_ns / 1e3);
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stream_probe: %s\n", e.what());
    return 1;
  }
}
