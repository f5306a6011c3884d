// stream_probe: how fast one SM of a persistent kernel streams weight tiles into tensor-core
// fragments, by loading method. Each active CTA (288 threads, 8 worker warps, the megakernel's
// shape) runs `items` tiles of 128 rows x 2048 bf16 (512 KB, an expert gate/up item) one after
// the other; a warp owns 16 rows and feeds them to mma.sync as the megakernel's GEMV does. Prints
// one row per (method, active SMs): per-SM GB/s and the aggregate TB/s. Benchmark, not a test.
// Methods: registers (loads straight into fragments), a per-warp cp.async ring, bulk copies of
// 16-32 KB contiguous ranges by the spare warp into a CTA-wide ring, per-warp bulk copies of one
// row segment each, and tensor-map (2D TMA) boxes of rows x 128 bytes into a CTA-wide ring.
//   stream_probe [items]
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <vector>

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/core/kernel_common.cuh"
#include "backends/cuda/core/mma_sm80.cuh"
#include "megakernel/device/sync.cuh"
#include "probe_barriers.cuh"

namespace {

constexpr int kWarps = 8, kThreads = kWarps * 32 + 32;
static_assert(kWarps == mkserve::megakernel::kWorkerWarps, "WorkerSync is their barrier");
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

// Bulk copies (the copy engine, as TMA): the spare warp's lane 0 copies kStageBytes of the item
// at a time into a ring of kStages stages with one cp.async.bulk each, completing on the stage's
// "full" mbarrier; the 8 worker warps each consume an eighth of a stage (the same 4 KB a warp
// and 4 mma pairs per stage as the cp.async ring) and arrive on its "empty" mbarrier.
using namespace mkserve::megakernel::probe;  // the barrier and bulk-copy helpers

__device__ void BulkLoad(void* dst, const void* src, uint32_t bytes, uint64_t* full) {
  ArriveExpectBytes(full, bytes);
  BulkCopy(dst, src, bytes, full);
}

constexpr int kMaxBulkStages = 8;
constexpr int64_t kItemBytes = kItemElements * 2;

template <int kStages, int kStageBytes>
__device__ void BulkProducer(const __nv_bfloat16* weights, int active, int items, char* ring,
                             uint64_t* full, uint64_t* empty) {
  constexpr int kPerItem = kItemBytes / kStageBytes;
  for (int s = 0; s < items * kPerItem; ++s) {
    const int slot = s % kStages;
    if (s >= kStages) WaitParity(&empty[slot], (s / kStages - 1) & 1);
    const char* item = reinterpret_cast<const char*>(
        weights + (int64_t{s / kPerItem} * active + blockIdx.x) * kItemElements);
    BulkLoad(ring + slot * kStageBytes, item + (s % kPerItem) * int64_t{kStageBytes}, kStageBytes,
             &full[slot]);
  }
}

template <int kStages, int kStageBytes>
__device__ void BulkConsumer(int items, const char* ring, uint64_t* full, uint64_t* empty,
                             float (&acc)[4]) {
  constexpr int kPerItem = kItemBytes / kStageBytes;
  constexpr int kWarpVecs = kStageBytes / 16 / kWarps;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int s = 0; s < items * kPerItem; ++s) {
    const int slot = s % kStages;
    WaitParity(&full[slot], (s / kStages) & 1);
    const uint4* v = reinterpret_cast<const uint4*>(ring + slot * kStageBytes) + warp * kWarpVecs;
#pragma unroll
    for (int u = 0; u < kWarpVecs / 64; ++u)
      Mma2(acc, v[(2 * u) * 32 + lane], v[(2 * u + 1) * 32 + lane]);
    __syncwarp();
    if (lane == 0) Arrive(&empty[slot]);
  }
}

// Per-warp bulk ring: the warp's own 16 rows, kSegElems of K a stage, one bulk copy per row
// (lanes 0-15) completing on the stage's mbarrier; the warp reads back as the cp.async ring does.
// The shape a GEMM tile's warp could take without any cross-warp hand-off.
template <int kStages, int kSegElems>
__device__ void StreamWarpBulk(const __nv_bfloat16* w, uint4* ring, uint64_t* full, int item,
                               float (&acc)[4]) {
  const int lane = threadIdx.x % 32;
  constexpr int kSegBytes = kSegElems * 2, kStageBytes = 16 * kSegBytes;
  constexpr int kSteps = kK / kSegElems, kChunks = kSegElems / kChunk;
  const int first = item * kSteps;  // the barriers' phases run on across items
  auto issue = [&](int step) {
    const int slot = (first + step) % kStages;
    if (lane == 0) ArriveExpectBytes(&full[slot], kStageBytes);
    __syncwarp();
    if (lane < 16) {
      FenceProxyAsync();
      BulkCopy(reinterpret_cast<char*>(ring) + slot * kStageBytes + lane * kSegBytes,
               w + lane * int64_t{kK} + step * kSegElems, kSegBytes, &full[slot]);
    }
  };
  for (int step = 0; step < kStages - 1 && step < kSteps; ++step) issue(step);
  for (int step = 0; step < kSteps; ++step) {
    if (step + kStages - 1 < kSteps) issue(step + kStages - 1);
    const int g = first + step;
    WaitParity(&full[g % kStages], (g / kStages) & 1);
    const char* stage = reinterpret_cast<const char*>(ring) + (g % kStages) * kStageBytes;
    // Lane (row r = lane / 4, j = lane % 4): 16 bytes of rows r and r + 8 per 32-element chunk.
    const int r = lane / 4, j = lane % 4;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const uint4 p = *reinterpret_cast<const uint4*>(stage + r * kSegBytes + c * 64 + j * 16);
      const uint4 q =
          *reinterpret_cast<const uint4*>(stage + (r + 8) * kSegBytes + c * 64 + j * 16);
      Mma2(acc, p, q);
    }
    __syncwarp();
  }
}

// Tensor-map (2D TMA) boxes of 64 K-elements x 128 rows (16 KB, 128-byte swizzle), kBoxes a
// stage, copied by the spare warp's lane 0 into a CTA-wide ring: the copy engine walks the rows
// itself, so a GEMM tile's rows need not be contiguous. Each warp consumes its 16 rows of a box
// (2 KB: two mma pairs), un-swizzling the 16-byte chunks (chunk c of row r sits at c ^ (r % 8)).
constexpr int kBoxK = 64, kBoxBytes = kBoxK * 2 * kRows;

template <int kStages, int kBoxes, int kBoxRows = kRows>
__device__ void StreamTensorMap(const CUtensorMap& map, int active, int items, char* ring,
                                uint64_t* full, uint64_t* empty, float (&acc)[4]) {
  constexpr int kStageBytes = kBoxes * kBoxBytes, kPerItem = kK / kBoxK / kBoxes;
  if (threadIdx.x == kWarps * 32) {
    for (int s = 0; s < items * kPerItem; ++s) {
      const int slot = s % kStages;
      if (s >= kStages) WaitParity(&empty[slot], (s / kStages - 1) & 1);
      ArriveExpectBytes(&full[slot], kStageBytes);
      const int row = ((s / kPerItem) * active + blockIdx.x) * kRows;
      for (int b = 0; b < kBoxes; ++b) {
        const int k = ((s % kPerItem) * kBoxes + b) * kBoxK;
        // kRows / kBoxRows boxes of kBoxRows rows land one after the other: the same layout.
        for (int part = 0; part < kRows / kBoxRows; ++part) {
          asm volatile(
              "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], "
              "[%1, {%2, %3}], [%4];" ::"r"(SmemAddress(ring + slot * kStageBytes + b * kBoxBytes +
                                                        part * kBoxRows * kBoxK * 2)),
              "l"(&map), "r"(k), "r"(row + part * kBoxRows), "r"(SmemAddress(&full[slot]))
              : "memory");
        }
      }
    }
  } else if (threadIdx.x < kWarps * 32) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r = lane / 4, j = lane % 4;
    for (int s = 0; s < items * kPerItem; ++s) {
      const int slot = s % kStages;
      WaitParity(&full[slot], (s / kStages) & 1);
#pragma unroll
      for (int b = 0; b < kBoxes; ++b) {
        const char* box = ring + slot * kStageBytes + b * kBoxBytes;
        const char* row0 = box + (warp * 16 + r) * 128;
#pragma unroll
        for (int block = 0; block < 2; ++block) {
          const int chunk = (block * 4 + j) ^ r;
          Mma2(acc, *reinterpret_cast<const uint4*>(row0 + chunk * 16),
               *reinterpret_cast<const uint4*>(row0 + 8 * 128 + chunk * 16));
        }
      }
      __syncwarp();
      if (lane == 0) Arrive(&empty[slot]);
    }
  }
}

template <int kStages, int kStageBytes>
__device__ void StreamBulk(const __nv_bfloat16* weights, int active, int items, char* ring,
                           uint64_t* full, uint64_t* empty, float (&acc)[4]) {
  if (threadIdx.x == kWarps * 32) {
    BulkProducer<kStages, kStageBytes>(weights, active, items, ring, full, empty);
  } else if (threadIdx.x < kWarps * 32) {
    BulkConsumer<kStages, kStageBytes>(items, ring, full, empty, acc);
  }
}

__global__ void __launch_bounds__(kThreads, 1)
    ProbeKernel(const __grid_constant__ CUtensorMap map, const __grid_constant__ CUtensorMap map64,
                const __grid_constant__ CUtensorMap map8, const __grid_constant__ CUtensorMap map16,
                const __grid_constant__ CUtensorMap map32, const __nv_bfloat16* weights, int method,
                int active, int items, uint64_t* times, float* sink) {
  extern __shared__ uint4 ring_smem[];
  __shared__ uint64_t full[kMaxBulkStages], empty[kMaxBulkStages];
  if (blockIdx.x >= active) return;
  if ((method >= 7 && method <= 9) || method >= 14) {  // CTA-wide rings: the spare warp produces
    if (threadIdx.x < kMaxBulkStages) {
      InitBarrier(&full[threadIdx.x], 1);
      InitBarrier(&empty[threadIdx.x], kWarps);
    }
    FenceBarrierInit();
    __syncthreads();
    const uint64_t start = mkserve::megakernel::GlobalTimerNs();
    float acc[4] = {};
    // 1024-byte aligned, as the 128-byte swizzle needs.
    char* ring =
        reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(ring_smem) + 1023) / 1024 * 1024);
    switch (method) {
      case 7:
        StreamBulk<4, 32768>(weights, active, items, ring, full, empty, acc);
        break;
      case 8:
        StreamBulk<6, 32768>(weights, active, items, ring, full, empty, acc);
        break;
      case 9:
        StreamBulk<8, 16384>(weights, active, items, ring, full, empty, acc);
        break;
      case 14:
        StreamTensorMap<8, 1>(map, active, items, ring, full, empty, acc);
        break;
      case 15:
        StreamTensorMap<4, 2>(map, active, items, ring, full, empty, acc);
        break;
      case 16:
        StreamTensorMap<6, 2>(map, active, items, ring, full, empty, acc);
        break;
      case 17:
        StreamTensorMap<4, 2, 64>(map64, active, items, ring, full, empty, acc);
        break;
      case 18:
        StreamTensorMap<4, 2, 8>(map8, active, items, ring, full, empty, acc);
        break;
      case 19:
        StreamTensorMap<4, 2, 16>(map16, active, items, ring, full, empty, acc);
        break;
      case 20:
        StreamTensorMap<4, 2, 32>(map32, active, items, ring, full, empty, acc);
        break;
    }
    if (threadIdx.x >= kWarps * 32) return;
    mkserve::megakernel::WorkerSync();
    if (threadIdx.x == 0) times[blockIdx.x] = mkserve::megakernel::GlobalTimerNs() - start;
    if (acc[0] == 123.0f) sink[0] = acc[1];
    return;
  }
  if (threadIdx.x >= kWarps * 32) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __shared__ uint64_t warp_full[kWarps][kMaxBulkStages];
  if (method >= 10) {
    if (lane < kMaxBulkStages) {
      InitBarrier(&warp_full[warp][lane], 1);
    }
    FenceBarrierInit();
    __syncwarp();
  }
  mkserve::megakernel::WorkerSync();
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
      case 10:  // 3 stages of 16 x 256 B
        StreamWarpBulk<3, 128>(w0 - (lane / 4) * int64_t{kK}, ring_smem + warp * 3 * 256,
                               warp_full[warp], item, acc);
        break;
      case 11:  // 6 stages of 16 x 256 B
        StreamWarpBulk<6, 128>(w0 - (lane / 4) * int64_t{kK}, ring_smem + warp * 6 * 256,
                               warp_full[warp], item, acc);
        break;
      case 12:  // 3 stages of 16 x 512 B
        StreamWarpBulk<3, 256>(w0 - (lane / 4) * int64_t{kK}, ring_smem + warp * 3 * 512,
                               warp_full[warp], item, acc);
        break;
      case 13:  // 5 stages of 16 x 256 B
        StreamWarpBulk<5, 128>(w0 - (lane / 4) * int64_t{kK}, ring_smem + warp * 5 * 256,
                               warp_full[warp], item, acc);
        break;
    }
    mkserve::megakernel::WorkerSync();  // items run one after the other
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
  const int smem = kWarps * kMaxRingStages * kRingStageChunks * 64 * 16 + 1024;
  // The weights as one 2D tensor [rows][kK] for the tensor-map methods (driver entry point: no
  // link against libcuda).
  void* encode = nullptr;
  cudaDriverEntryPointQueryResult found{};
  MKSERVE_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &encode, 12000,
                                                      cudaEnableDefault, &found));
  if (encode == nullptr) throw std::runtime_error("no cuTensorMapEncodeTiled");
  auto encode_map = [&](cuuint32_t box_rows) {
    CUtensorMap map{};
    const cuuint64_t dims[2] = {kK, static_cast<cuuint64_t>(kRows) * items * sms};
    const cuuint64_t strides[1] = {kK * 2};
    const cuuint32_t box[2] = {kBoxK, box_rows}, element_strides[2] = {1, 1};
    const CUresult encoded = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(encode)(
        &map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, weights, dims, strides, box, element_strides,
        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (encoded != CUDA_SUCCESS) throw std::runtime_error("cuTensorMapEncodeTiled failed");
    return map;
  };
  const CUtensorMap map = encode_map(kRows), map64 = encode_map(64), map8 = encode_map(8),
                    map16 = encode_map(16), map32 = encode_map(32);
  MKSERVE_CUDA_CHECK(
      cudaFuncSetAttribute(ProbeKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const char* names[] = {"registers, unroll 8",
                         "registers, unroll 8, L2 prefetch",
                         "registers, unroll 4",
                         "registers, unroll 4, L2 prefetch",
                         "cp.async ring, 2 x 4 KB/warp",
                         "cp.async ring, 4 x 4 KB/warp",
                         "cp.async ring, 6 x 4 KB/warp",
                         "bulk copies, 4 x 32 KB",
                         "bulk copies, 6 x 32 KB",
                         "bulk copies, 8 x 16 KB",
                         "warp bulk ring, 3 x 16 x 256 B",
                         "warp bulk ring, 6 x 16 x 256 B",
                         "warp bulk ring, 3 x 16 x 512 B",
                         "warp bulk ring, 5 x 16 x 256 B",
                         "tensor map, 8 x 1 box of 128 rows",
                         "tensor map, 4 x 2 boxes of 128 rows",
                         "tensor map, 6 x 2 boxes of 128 rows",
                         "tensor map, 4 x 2 x 2 boxes of 64 rows",
                         "tensor map, 4 x 2 x 16 boxes of 8 rows",
                         "tensor map, 4 x 2 x 8 boxes of 16 rows",
                         "tensor map, 4 x 2 x 4 boxes of 32 rows"};
  static_assert(sizeof(names) / sizeof(names[0]) == 21);
  std::printf("| method | active SMs | per-SM GB/s | aggregate TB/s |\n|---|---|---|---|\n");
  for (int method = 0; method < static_cast<int>(sizeof(names) / sizeof(names[0])); ++method) {
    for (int active : {sms, sms * 3 / 4, sms / 4}) {
      double best_ns = 1e30, mean_ns = 0;
      for (int rep = 0; rep < 3; ++rep) {
        ProbeKernel<<<sms, kThreads, smem>>>(map, map64, map8, map16, map32, weights, method,
                                             active, items, times, sink);
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
