// topk_probe: how long one warp takes to rank a router row's top k, by algorithm, alone on an SM
// (the megakernel's ranking claim does this while the rest of its SM waits; in a batch-1 step it
// is on the path to every layer's first expert item). Inside the whole kernel any change also
// moves every batch 1-3 % by its code alone; here only the algorithm's own time shows. Benchmark,
// not a test: it prints one row per algorithm (median ns a row, clock cycles a pick, rows whose
// picks differ from the CPU's exact ranking) for random rows with ties, NaNs and near-ties.
// Algorithms: the megakernel's `WarpTopK` (sorted lanes), the per-pick scan it replaced, and one
// reduction a pick on a packed key (the key's high 24 bits and the inverted id: near-ties within
// the low 8 bits of a key may rank differently, which the mismatch column counts).
//   topk_probe [experts (128)] [top_k (8)] [rows (2000)]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <vector>

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/core/device_buffer.h"
#include "megakernel/device/ops_moe.cuh"
#include "topk_rows.h"

namespace {

using mkserve::megakernel::kMaxExperts;
using mkserve::megakernel::LogitKey;
using mkserve::megakernel::RowKeys;
using mkserve::megakernel::StepParams;
using mkserve::megakernel::topk_rows::CpuTopK;
using mkserve::megakernel::topk_rows::RandomRows;

enum Algorithm { kSortedLanes, kScan, kPackedKey, kAlgorithmCount };
const char* const kNames[] = {"sorted lanes (WarpTopK)", "scan a lane's slots each pick",
                              "packed key, one reduction a pick"};

// The scan the megakernel ran before its sorted lanes: each pick scans every slot of the lane,
// two reductions find the key and the lowest id holding it, the holder clears it.
__device__ int32_t ScanTopK(int top_k, RowKeys row) {
  const int lane = threadIdx.x % 32;
  int32_t mine = -1;
  for (int j = 0; j < top_k; ++j) {
    uint32_t best = 0, best_id = 0xFFFFFFFFu;
#pragma unroll
    for (int i = 0; i < kMaxExperts / 32; ++i) {
      if (row.keys[i] > best) {
        best = row.keys[i];
        best_id = static_cast<uint32_t>(lane + i * 32);
      }
    }
    const uint32_t top = __reduce_max_sync(0xffffffffu, best);
    const uint32_t id = __reduce_min_sync(0xffffffffu, best == top ? best_id : 0xFFFFFFFFu);
#pragma unroll
    for (int i = 0; i < kMaxExperts / 32; ++i) {
      if (static_cast<uint32_t>(lane + i * 32) == id) row.keys[i] = 0;
    }
    if (lane == j) mine = static_cast<int32_t>(id);
  }
  return mine;
}

// One reduction a pick: the key's high 24 bits above 255 - id (experts up to 256), so the
// largest word is the largest key and, among keys equal in those bits, the lowest id.
__device__ int32_t PackedTopK(int top_k, const RowKeys& row) {
  const int lane = threadIdx.x % 32;
  uint32_t word[kMaxExperts / 32];
#pragma unroll
  for (int i = 0; i < kMaxExperts / 32; ++i) {
    word[i] = row.keys[i] == 0 ? 0u : (row.keys[i] & 0xFFFFFF00u) | (255u - (lane + i * 32));
  }
  int32_t mine = -1;
  for (int j = 0; j < top_k; ++j) {
    uint32_t best = 0;
#pragma unroll
    for (int i = 0; i < kMaxExperts / 32; ++i) best = max(best, word[i]);
    const uint32_t top = __reduce_max_sync(0xffffffffu, best);
#pragma unroll
    for (int i = 0; i < kMaxExperts / 32; ++i) {
      if (word[i] == top) word[i] = 0;
    }
    if (lane == j) mine = top == 0 ? -1 : static_cast<int32_t>(255u - (top & 0xFFu));
  }
  return mine;
}

// One warp ranks every row, timing each: ids[row][k], ns[row], cycles[row].
__global__ void ProbeKernel(int algorithm, const float* logits, int experts, int top_k, int rows,
                            int32_t* ids, uint64_t* ns, uint64_t* cycles) {
  const int lane = threadIdx.x % 32;
  StepParams p;
  p.num_experts = experts;
  p.top_k = top_k;
  p.sigmoid_router = 1;
  for (int r = 0; r < rows; ++r) {
    RowKeys row;
#pragma unroll
    for (int i = 0; i < kMaxExperts / 32; ++i) {
      const int e = lane + i * 32;
      const float v = e < experts ? logits[static_cast<int64_t>(r) * experts + e] : 0.0f;
      row.keys[i] = e < experts ? LogitKey(isnan(v) ? -INFINITY : v) : 0u;
    }
    __syncwarp();
    const uint64_t t0 = mkserve::megakernel::GlobalTimerNs();
    const int64_t c0 = clock64();
    int32_t mine = -1;
    if (algorithm == kSortedLanes) {
      mine = mkserve::megakernel::WarpTopK(p, row).expert;
    } else if (algorithm == kScan) {
      mine = ScanTopK(top_k, row);
    } else {
      mine = PackedTopK(top_k, row);
    }
    // The stamps take the picks as an input, so neither is read before they are known.
    const uint32_t done = __reduce_or_sync(0xffffffffu, static_cast<uint32_t>(mine));
    int64_t c1;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c1) : "r"(done) : "memory");
    uint64_t t1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1) : "r"(done) : "memory");
    if (lane < top_k) ids[static_cast<int64_t>(r) * top_k + lane] = mine;
    if (lane == 0) {
      ns[r] = t1 - t0;
      cycles[r] = static_cast<uint64_t>(c1 - c0);
    }
  }
}

template <class T>
T Median(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Run(int argc, char** argv) {
  using mkserve::cuda::DeviceBuffer;
  const int experts = argc > 1 ? std::atoi(argv[1]) : 128;
  const int top_k = argc > 2 ? std::atoi(argv[2]) : 8;
  const int rows = argc > 3 ? std::atoi(argv[3]) : 2000;
  if (experts < 1 || experts > kMaxExperts || top_k < 1 || top_k > 32 || top_k > experts ||
      rows < 1) {
    std::fprintf(stderr, "topk_probe: experts 1..%d, top_k 1..min(32, experts), rows >= 1\n",
                 kMaxExperts);
    return 2;
  }
  const std::vector<float> logits = RandomRows(experts, rows);
  const std::vector<int32_t> want = CpuTopK(logits, experts, top_k, rows);
  DeviceBuffer<float> logits_d(static_cast<int64_t>(logits.size()));
  MKSERVE_CUDA_CHECK(
      cudaMemcpy(logits_d.data(), logits.data(), logits_d.bytes(), cudaMemcpyHostToDevice));
  DeviceBuffer<int32_t> ids_d(static_cast<int64_t>(rows) * top_k);
  DeviceBuffer<uint64_t> ns_d(rows), cycles_d(rows);
  std::printf("%d experts, top %d, %d rows, one warp\n\n", experts, top_k, rows);
  std::printf("| algorithm | ns a row | cycles a pick | rows unlike the CPU's ranking |\n");
  std::printf("|---|---|---|---|\n");
  for (int a = 0; a < kAlgorithmCount; ++a) {
    for (int pass = 0; pass < 2; ++pass) {  // the first pass warms the instruction caches
      ProbeKernel<<<1, 32>>>(a, logits_d.data(), experts, top_k, rows, ids_d.data(), ns_d.data(),
                             cycles_d.data());
      MKSERVE_CUDA_CHECK(cudaGetLastError());
      MKSERVE_CUDA_CHECK(cudaDeviceSynchronize());
    }
    std::vector<int32_t> ids(static_cast<size_t>(rows) * top_k);
    std::vector<uint64_t> ns(rows), cycles(rows);
    MKSERVE_CUDA_CHECK(cudaMemcpy(ids.data(), ids_d.data(), ids_d.bytes(), cudaMemcpyDeviceToHost));
    MKSERVE_CUDA_CHECK(cudaMemcpy(ns.data(), ns_d.data(), ns_d.bytes(), cudaMemcpyDeviceToHost));
    MKSERVE_CUDA_CHECK(
        cudaMemcpy(cycles.data(), cycles_d.data(), cycles_d.bytes(), cudaMemcpyDeviceToHost));
    int unlike = 0;
    for (int r = 0; r < rows; ++r) {
      unlike += !std::equal(ids.begin() + static_cast<int64_t>(r) * top_k,
                            ids.begin() + static_cast<int64_t>(r + 1) * top_k,
                            want.begin() + static_cast<int64_t>(r) * top_k);
    }
    std::printf("| %s | %llu | %.0f | %d |\n", kNames[a],
                static_cast<unsigned long long>(Median(ns)),
                static_cast<double>(Median(cycles)) / top_k, unlike);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "topk_probe: %s\n", e.what());
    return 1;
  }
}
