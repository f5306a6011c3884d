// pipe_probe: does a small dependent load wait behind the weights its own SM has in flight, and
// does it when those weights come by bulk copy (the copy engine) instead of cp.async? Each active
// CTA (the megakernel's shape: 8 worker warps) runs `tasks` tasks one after the other; a task
// stages a 4 KB activation row (one 16-byte load a thread from a buffer L2 holds, then a barrier:
// what a GEMM task does before its first multiply) and streams 512 KB of weights, 4 KB a warp a
// round, two rounds in flight a warp. Variants differ in what is in flight when the staging
// loads are issued, and in the pattern the weights are copied in (contiguous rounds, the GEMM
// body's rows, longer row segments per copy instruction, CTA-wide rings of bulk copies). Prints,
// per variant and number of active SMs, the staging's time (from the first load to the barrier)
// and the per-SM streaming rate. Benchmark, not a test.
//   pipe_probe [tasks]
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <vector>

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/core/mma_sm80.cuh"
#include "megakernel/device/sync.cuh"
#include "probe_barriers.cuh"

namespace {

// The megakernel's worker warps, whose barrier (WorkerSync) the tasks use.
constexpr int kWarps = mkserve::megakernel::kWorkerWarps;
constexpr int kThreads = mkserve::megakernel::kWorkerThreads;
constexpr int kRoundBytes = 4096;  // a warp's round, as the megakernel's weight ring
constexpr int kRounds = 16;        // a warp's rounds a task: 8 x 64 KB = 512 KB a task
constexpr int64_t kTaskBytes = int64_t{kWarps} * kRounds * kRoundBytes;  // 512 KB
constexpr int kStages = 3;  // two rounds in flight while one is read
// Distinct activation rows, one a task (all of them stay in L2), 16 bytes a thread.
constexpr int kActivationRows = 256, kActivationRowBytes = kThreads * 16;
constexpr int kWeightRowBytes = 4096;  // "rows" variants: a weight row of 2048 bf16

enum Variant {
  kStagingFirst,      // staging, then the weights (the megakernel today)
  kCpAsyncInFlight,   // two cp.async rounds issued, then the staging
  kBulkInFlight,      // two bulk-copy rounds issued, then the staging
  kBulkStagingFirst,  // bulk-copy stream, staging first
  kStagingByCpAsync,  // staging by cp.async, the weights right behind it, then wait for it
  kStagingOnly,       // no stream: the staging's latency with every active SM doing only that
  // A GEMM tile's own pattern: a warp's round is 16 rows x 256 bytes, rows 4 KB apart.
  kRowsStagingFirst,  // staging, then cp.async rows (the megakernel today)
  kRowsCpAsyncFirst,  // two cp.async rounds of rows in flight, then staging
  kRowsBulkPrimed,    // two rounds by bulk copies of row segments (one a row), then staging,
                      // then cp.async rounds
  kRowsBulkAll,       // every round by bulk copies of row segments, staging after two
  kRowsHalfWarps,     // rows, staging first, each copy instruction 2 rows x 256 contiguous bytes
  kRowsQuarterWarps,  // rows, staging first, each copy instruction 4 rows x 128 contiguous bytes
  // A CTA-wide ring instead (3 stages of 32 KB, the task as 128 rows of 4 KB, a stage 16 rows x
  // half of K), filled by warp 0, all warps reading every stage, a barrier of the workers a stage;
  // staging first.
  kCtaRingSegments,    // a stage is 16 bulk copies of 2 KB row segments
  kCtaRingContiguous,  // a stage is one bulk copy of 32 contiguous KB
  kVariants
};
const char* const kNames[kVariants] = {"staging, then cp.async weights",
                                       "2 cp.async rounds in flight, then staging",
                                       "2 bulk-copy rounds in flight, then staging",
                                       "staging, then bulk-copy weights",
                                       "staging by cp.async, weights behind it",
                                       "staging only (no stream)",
                                       "rows: staging, then cp.async",
                                       "rows: 2 cp.async rounds in flight, then staging",
                                       "rows: 2 bulk rounds in flight, staging, cp.async",
                                       "rows: bulk rounds, 2 in flight at staging",
                                       "rows: staging, then cp.async, 256 B a half-warp",
                                       "rows: staging, then cp.async, 128 B an 8-lane group",
                                       "CTA ring, stages of 16 x 2 KB row segments",
                                       "CTA ring, stages of 32 KB contiguous"};

using namespace mkserve::megakernel::probe;  // the barrier and bulk-copy helpers

struct alignas(128) ProbeSmem {
  uint4 ring[kWarps][kStages][kRoundBytes / 16];
  uint4 xs[kThreads];
  uint64_t full[kWarps][kStages];
};

__global__ void __launch_bounds__(kThreads, 1)
    PipeKernel(const char* weights, const char* rows, int variant, int active, int tasks,
               uint64_t* staging_ns, uint64_t* total_ns, uint32_t* sink) {
  extern __shared__ uint4 smem_raw[];
  ProbeSmem& s = *reinterpret_cast<ProbeSmem*>(smem_raw);
  if (blockIdx.x >= active) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane < kStages) InitBarrier(&s.full[warp][lane], 1);
  FenceBarrierInit();
  __syncthreads();
  const bool bulk = variant == kBulkInFlight || variant == kBulkStagingFirst;
  const bool streams = variant != kStagingOnly;
  uint32_t acc = 0;
  uint64_t staging = 0;
  int first = 0;        // the warp's rounds so far: the ring slot runs on across tasks
  uint32_t phases = 0;  // bit k: the phase slot k's barrier is in (not every round uses it)
  const uint64_t start = mkserve::megakernel::GlobalTimerNs();
  for (int task = 0; task < tasks; ++task) {
    const char* task_w = weights + (int64_t{task} * active + blockIdx.x) * kTaskBytes;
    const char* row = rows + (task % kActivationRows) * kActivationRowBytes + threadIdx.x * 16;
    // The task's staging, timed from its first load to the barrier; `load` puts this thread's 16
    // bytes of the row into xs (and waits for them).
    auto stage_row = [&](auto load) {
      const uint64_t t0 = mkserve::megakernel::GlobalTimerNs();
      load();
      mkserve::megakernel::WorkerSync();
      if (threadIdx.x == 0) staging += mkserve::megakernel::GlobalTimerNs() - t0;
      acc ^= s.xs[(threadIdx.x + 1) % kThreads].x;
    };
    auto load_row = [&] { s.xs[threadIdx.x] = mkserve::megakernel::LoadCg(row); };
    if (variant == kCtaRingSegments || variant == kCtaRingContiguous) {
      constexpr int kStageBytes = 32768, kTaskStages = kTaskBytes / kStageBytes;
      char* ring = reinterpret_cast<char*>(&s.ring[0][0][0]);
      stage_row(load_row);
      auto issue_stage = [&](int stage) {  // warp 0
        if (stage >= kTaskStages) return;
        const int g = first + stage, slot = g % kStages;
        uint64_t* bar = &s.full[0][slot];
        char* dst = ring + slot * kStageBytes;
        if (lane == 0) ArriveExpectBytes(bar, kStageBytes);
        __syncwarp();
        const int pieces = variant == kCtaRingSegments ? 16 : 1, piece = kStageBytes / pieces;
        if (lane < pieces) {
          // Rows 16 (stage / 2) .. + 16, K half stage % 2 (segments); or 32 KB at stage x 32 KB.
          const char* src =
              variant == kCtaRingSegments
                  ? task_w + int64_t{16 * (stage / 2) + lane} * kWeightRowBytes + (stage % 2) * 2048
                  : task_w + int64_t{stage} * kStageBytes;
          FenceProxyAsync();
          BulkCopy(dst + lane * piece, src, piece, bar);
        }
      };
      if (warp == 0) {
        issue_stage(0);
        issue_stage(1);
      }
      for (int stage = 0; stage < kTaskStages; ++stage) {
        if (warp == 0)
          issue_stage(stage + 2);  // its slot was read by every warp before the barrier
        const int g = first + stage, slot = g % kStages;
        WaitParity(&s.full[0][slot], (phases >> slot) & 1);
        phases ^= 1u << slot;
        const uint4* v = reinterpret_cast<const uint4*>(ring + slot * kStageBytes) + warp * 256;
        for (int i = 0; i < 8; ++i) {
          const uint4 x = v[i * 32 + lane];
          acc ^= x.x ^ x.y ^ x.z ^ x.w;
        }
        mkserve::megakernel::WorkerSync();
      }
      first += kTaskStages;
      continue;
    }
    const char* w = task_w + int64_t{warp} * kRounds * kRoundBytes;  // the warp's 64 KB
    const bool rows_pattern = variant >= kRowsStagingFirst;
    // Round r of the warp's 16 rows (rows pattern): columns [256 r, 256 r + 256) of rows 4 KB
    // apart.
    auto bulk_round = [&](int r) {
      return variant == kRowsBulkAll || (variant == kRowsBulkPrimed && r < 2) || bulk;
    };
    auto issue = [&](int r) {
      const int g = first + r, slot = g % kStages;
      char* dst = reinterpret_cast<char*>(&s.ring[warp][slot][0]);
      if (r >= kRounds) {
        if (!bulk && variant != kRowsBulkAll) mkserve::cuda::CpAsyncCommit();  // keeps the count
        return;
      }
      if (bulk_round(r)) {
        if (lane == 0) ArriveExpectBytes(&s.full[warp][slot], kRoundBytes);
        __syncwarp();
        const int pieces = rows_pattern ? 16 : 1, piece = kRoundBytes / pieces;
        if (lane < pieces) {
          FenceProxyAsync();  // the slot was last read through the generic proxy
          const char* src = rows_pattern ? w + int64_t{lane} * kWeightRowBytes + r * piece
                                         : w + int64_t{r} * kRoundBytes;
          BulkCopy(dst + lane * piece, src, piece, &s.full[warp][slot]);
        }
      } else {
        for (int i = 0; i < kRoundBytes / 16 / 32; ++i) {
          // rows: lane (row lane / 4 (+ 8 for odd i), 16 bytes j = lane % 4 of block i / 2)
          const int64_t at =
              variant == kRowsHalfWarps
                  ? int64_t{2 * i + lane / 16} * kWeightRowBytes + r * 256 + (lane % 16) * 16
              : variant == kRowsQuarterWarps ? int64_t{i / 2 * 4 + lane / 8} * kWeightRowBytes +
                                                   r * 256 + (i % 2) * 128 + (lane % 8) * 16
              : rows_pattern ? int64_t{lane / 4 + (i % 2) * 8} * kWeightRowBytes + r * 256 +
                                   (i / 2) * 64 + (lane % 4) * 16
                             : int64_t{r} * kRoundBytes + (i * 32 + lane) * 16;
          mkserve::cuda::CpAsync16(&s.ring[warp][slot][i * 32 + lane], w + at, true);
        }
        mkserve::cuda::CpAsyncCommit();
      }
    };
    const bool early = variant == kCpAsyncInFlight || variant == kBulkInFlight ||
                       variant == kRowsCpAsyncFirst || variant == kRowsBulkPrimed ||
                       variant == kRowsBulkAll;
    if (streams && early) {
      issue(0);
      issue(1);
    }
    mkserve::megakernel::WorkerSync();  // every warp has issued what it issues
    if (variant == kStagingByCpAsync) {
      stage_row([&] {
        mkserve::cuda::CpAsync16(&s.xs[threadIdx.x], row, true);
        mkserve::cuda::CpAsyncCommit();
        issue(0);
        issue(1);
        mkserve::cuda::CpAsyncWait<2>();  // the staging's group
      });
    } else {
      stage_row(load_row);
    }
    if (streams && !early && variant != kStagingByCpAsync) {
      issue(0);
      issue(1);
    }
    for (int r = 0; streams && r < kRounds; ++r) {
      issue(r + 2);
      const int g = first + r, slot = g % kStages;
      if (bulk_round(r)) {
        WaitParity(&s.full[warp][slot], (phases >> slot) & 1);
        phases ^= 1u << slot;
      } else {
        mkserve::cuda::CpAsyncWait<2>();
        __syncwarp();
      }
      for (int i = 0; i < kRoundBytes / 16 / 32; ++i) {
        const uint4 v = s.ring[warp][slot][i * 32 + lane];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
      }
      __syncwarp();
    }
    first += kRounds;
    mkserve::megakernel::WorkerSync();  // tasks run one after the other
  }
  if (threadIdx.x == 0) {
    total_ns[blockIdx.x] = mkserve::megakernel::GlobalTimerNs() - start;
    staging_ns[blockIdx.x] = staging;
  }
  if (acc == 0x12345678u) sink[0] = acc;  // keeps the loads
}

int Run(int argc, char** argv) {
  const int tasks = argc > 1 ? std::atoi(argv[1]) : 16;
  if (tasks < 1) throw std::runtime_error("tasks must be at least 1");
  int sms = 0;
  MKSERVE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int64_t weight_bytes = int64_t{sms} * tasks * kTaskBytes;
  char *weights = nullptr, *rows = nullptr;
  uint64_t *staging = nullptr, *total = nullptr;
  uint32_t* sink = nullptr;
  MKSERVE_CUDA_CHECK(cudaMalloc(&weights, weight_bytes));
  MKSERVE_CUDA_CHECK(cudaMemset(weights, 0x3c, weight_bytes));
  MKSERVE_CUDA_CHECK(cudaMalloc(&rows, int64_t{kActivationRows} * kActivationRowBytes));
  MKSERVE_CUDA_CHECK(cudaMemset(rows, 0x11, int64_t{kActivationRows} * kActivationRowBytes));
  MKSERVE_CUDA_CHECK(cudaMalloc(&staging, sms * sizeof(uint64_t)));
  MKSERVE_CUDA_CHECK(cudaMalloc(&total, sms * sizeof(uint64_t)));
  MKSERVE_CUDA_CHECK(cudaMalloc(&sink, sizeof(uint32_t)));
  const int smem = sizeof(ProbeSmem);
  MKSERVE_CUDA_CHECK(
      cudaFuncSetAttribute(PipeKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  std::printf(
      "| variant | active SMs | staging us (mean) | staging us (worst SM mean) | per-SM GB/s |\n"
      "|---|---|---|---|---|\n");
  for (int variant = 0; variant < kVariants; ++variant) {
    for (int active : {sms, sms / 4}) {
      double best_total = 1e30, best_staging = 0, best_worst = 0;
      for (int rep = 0; rep < 3; ++rep) {
        PipeKernel<<<sms, kThreads, smem>>>(weights, rows, variant, active, tasks, staging, total,
                                            sink);
        MKSERVE_CUDA_CHECK_LAUNCH();
        MKSERVE_CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<uint64_t> st(sms), tt(sms);
        MKSERVE_CUDA_CHECK(
            cudaMemcpy(st.data(), staging, sms * sizeof(uint64_t), cudaMemcpyDeviceToHost));
        MKSERVE_CUDA_CHECK(
            cudaMemcpy(tt.data(), total, sms * sizeof(uint64_t), cudaMemcpyDeviceToHost));
        double sum_total = 0, sum_staging = 0, worst = 0;
        for (int s = 0; s < active; ++s) {
          sum_total += tt[s];
          sum_staging += st[s];
          worst = std::max(worst, static_cast<double>(st[s]));
        }
        if (sum_total < best_total) {
          best_total = sum_total;
          best_staging = sum_staging / active / tasks / 1e3;
          best_worst = worst / tasks / 1e3;
        }
      }
      const double bytes = variant == kStagingOnly ? 0.0 : static_cast<double>(kTaskBytes);
      std::printf("| %s | %d | %.2f | %.2f | %.1f |\n", kNames[variant], active, best_staging,
                  best_worst, bytes * tasks / (best_total / active));
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pipe_probe: %s\n", e.what());
    return 1;
  }
}
