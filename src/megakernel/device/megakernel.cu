#include "megakernel/device/megakernel.h"

#include <algorithm>
#include <cstddef>
#include <string>

#include "backends/cuda/core/cuda_check.h"
#include "common/error.h"
#include "megakernel/device/ops_attention.cuh"
#include "megakernel/device/ops_linear.cuh"
#include "megakernel/device/ops_moe.cuh"
#include "megakernel/device/ops_rows.cuh"

namespace mkserve::megakernel {
namespace {

inline constexpr int kRingSlots = 4;  // descriptors the controller warp may run ahead

// Shared memory of one CTA. The op scratch is a union: one task runs at a time. Keep what comes
// before it as it is: a 160-byte member added here made every batch about 3 % slower (H200, 8K:
// batch 1 3.25 -> 3.36 ms, batch 8 9.54 -> 9.71), so the fused norm's sums live in GemvSmem.
struct KernelSmem {
  TaskDescriptor ring[kRingSlots];
  uint32_t loaded;             // descriptors the controller has placed (written by the controller)
  uint32_t consumed;           // tasks the workers have finished (written by worker thread 0)
  uint32_t stop;               // a wait gave up (watchdog abort): everyone leaves
  int32_t claim;               // the item a claim loop took, -1 when the queue is empty
  ExpertWorkItem expert_item;  // its record (written by worker thread 0)
  AttentionWorkItem attention_item;
  uint64_t claim_start_ns, claim_ready_ns;  // the item timeline (worker thread 0)
  union {
    GemvSmem gemv;
    AttentionSmem attention;
    RowScratch rows;
    FinalizeSmem finalize;
  } op;
};

// The expert items' weight ring starts where the GEMM scratch ends: it overlaps only the other
// ops' scratch in the union (attention stages, finalize tables), and no other op runs while an
// expert item streams.
constexpr size_t kWeightRingOffset = offsetof(KernelSmem, op) + sizeof(GemvSmem);
static_assert(kWeightRingOffset % 16 == 0);

__device__ inline uint4* WeightRing(KernelSmem& s) {
  return reinterpret_cast<uint4*>(reinterpret_cast<char*>(&s) + kWeightRingOffset);
}

__device__ inline volatile uint32_t& Volatile(uint32_t& v) {
  return *const_cast<volatile uint32_t*>(&v);
}

// The controller warp: copies this SM's descriptors into the ring while the workers run.
__device__ void ControllerLoop(const TaskDescriptor* tasks, uint32_t count, KernelSmem& s) {
  const int lane = threadIdx.x % 32;
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t go = 1;
    if (lane == 0) {
      while (i - Volatile(s.consumed) >= kRingSlots && Volatile(s.stop) == 0) __nanosleep(20);
      go = Volatile(s.stop) == 0;
    }
    if (__shfl_sync(0xffffffffu, go, 0) == 0) return;  // one decision for the whole warp
    if (lane < kTaskWords / 4) {
      reinterpret_cast<uint4*>(&s.ring[i % kRingSlots])[lane] =
          reinterpret_cast<const uint4*>(&tasks[i])[lane];
    }
    __threadfence_block();
    __syncwarp();
    if (lane == 0) Volatile(s.loaded) = i + 1;
  }
}

// Worker thread 0 takes the next item of queue `queue` (`count` items), copies its record into
// shared memory and, when it has a wait, waits for it. Returns the item index or -1 (queue empty
// or the step was abandoned), for every worker. One load of the record, not one for its wait and
// another for the workers: each dependent L2 round trip here sits before the item's first weight
// load (about 1 us apiece while the SMs stream).
template <class Item>
__device__ int ClaimNext(const StepParams& p, uint32_t queue, uint32_t count, const Item* items,
                         uint32_t wait_base, Item& staged, KernelSmem& s) {
  if (threadIdx.x == 0) {
    if (p.item_timeline != nullptr) s.claim_start_ns = GlobalTimerNs();
    int32_t claimed = -1;
    const uint32_t index = atomicAdd(p.queue_heads + queue, 1u);
    if (index < count) {
      claimed = static_cast<int32_t>(index);
      Item item;
      for (int i = 0; i < static_cast<int>(sizeof(Item) / 16); ++i) {
        reinterpret_cast<uint4*>(&item)[i] =
            LoadCg(reinterpret_cast<const uint4*>(items + index) + i);
      }
      staged = item;
      if (item.wait_unit != kNoCounter &&
          !SpinUntil(p, wait_base + item.wait_unit, item.wait_target)) {
        s.stop = 1;
        claimed = -1;
      }
      if (p.item_timeline != nullptr) s.claim_ready_ns = GlobalTimerNs();
    }
    s.claim = claimed;
  }
  WorkerSync();
  return s.claim;
}

// Worker thread 0, after the item's signal: its record in the item timeline, when there is one.
__device__ inline void RecordItem(const StepParams& p, uint32_t queue, int index,
                                  const KernelSmem& s) {
  if (p.item_timeline == nullptr) return;
  p.item_timeline[static_cast<int64_t>(queue) * p.item_stride + index] = {
      s.claim_start_ns, s.claim_ready_ns, GlobalTimerNs(), blockIdx.x, 1};
}

__device__ void RunExpertClaims(const StepParams& p, const TaskDescriptor& d, bool down,
                                KernelSmem& s) {
  const uint32_t queue = d.arg[kArgQueue];
  const ExpertWorkItem* items = p.expert_items + p.queue_offsets[queue];
  // The finalize wrote the count before the claim task's wait was met; it does not change.
  const uint32_t count = threadIdx.x == 0 ? LoadCgU(p.queue_counts + queue) : 0;
  for (;;) {
    const int index = ClaimNext(p, queue, count, items, d.arg[kArgItemWaitBase], s.expert_item, s);
    if (index < 0) return;
    const ExpertWorkItem item = s.expert_item;
    RunExpertItem(p, d.layer, item, down, s.op.gemv, RingRounds{WeightRing(s)});
    WorkerSync();
    if (threadIdx.x == 0) {
      const uint32_t base = d.arg[kArgItemSignalBase];
      if (!down) {
        Arrive(p, base + item.signal_unit, item.arrive_weight);
      } else {
        FenceAcqRel();
        for (uint32_t i = 0; i < item.row_count; ++i) {
          const int32_t a = LoadCgI(p.bucket_assignment + item.bucket_begin + i);
          atomicAdd(p.counters + base + a / p.top_k, item.arrive_weight);
        }
      }
      RecordItem(p, queue, index, s);
    }
  }
}

__device__ void RunAttentionClaims(const StepParams& p, const TaskDescriptor& d, KernelSmem& s) {
  const uint32_t queue = d.arg[kArgQueue];
  const LayerParams& layer = p.layers[d.layer];
  const uint32_t count = threadIdx.x == 0 ? LoadCgU(p.queue_counts + queue) : 0;  // host-written
  for (;;) {
    const int index =
        ClaimNext(p, queue, count, p.attention_items, d.arg[kArgItemWaitBase], s.attention_item, s);
    if (index < 0) return;
    const AttentionWorkItem item = s.attention_item;
    const PageRange pages{static_cast<int>(item.page_begin), static_cast<int>(item.page_end)};
    AttendSplit(p, layer, static_cast<int>(d.arg[kArgWindow]), item.row, item.kv_head, item.split,
                pages, false, s.op.attention);
    // Slots this split stands in for (split, split + arrive_weight) hold no keys.
    const int per_kv = p.num_heads / p.num_kv_heads;
    for (int i = threadIdx.x; i < per_kv * static_cast<int>(item.arrive_weight - 1);
         i += kWorkerThreads) {
      const int head = item.kv_head * per_kv + i % per_kv;
      const int64_t at = StatIndex(p, item.row, head, item.split + 1 + i / per_kv);
      p.attn_stats[2 * at] = -INFINITY;
      p.attn_stats[2 * at + 1] = 0.0f;
    }
    WorkerSync();
    if (threadIdx.x == 0) {
      Arrive(p, d.arg[kArgItemSignalBase] + item.signal_unit, item.arrive_weight);
      RecordItem(p, queue, index, s);
    }
  }
}

// Inlined into the kernel by force: once the fused norm made OpQkv larger the compiler made
// RunTask a function the kernel calls (its PTX showed the call), and every batch ran 7-10 %
// slower (H200, 8K: batch 1 3.36 -> 3.60 ms, batch 8 9.70 -> 10.21).
__device__ __forceinline__ void RunTask(const StepParams& p, const TaskDescriptor& d,
                                        KernelSmem& s) {
  switch (d.opcode) {
    case kEmbed:
      return OpEmbed(p, d, s.op.rows);
    case kJoin:
      return OpJoin(p, d, s.op.rows);
    case kQkv:
      return OpQkv(p, d, s.op.gemv, RingRounds{WeightRing(s)});
    case kAttention:
      return OpAttention(p, d, s.op.attention);
    case kAttentionClaim:
      return RunAttentionClaims(p, d, s);
    case kAttentionCombine:
      return OpAttentionCombine(p, d);
    case kOProj:
      return OpOProj(p, d, s.op.gemv, RingRounds{WeightRing(s)});
    case kDenseGateUp:
      return OpDenseGateUp(p, d, s.op.gemv);
    case kDenseDown:
      return OpDenseDown(p, d, s.op.gemv, RingRounds{WeightRing(s)});
    case kRouter:
      return OpRouter(p, d, s.op.gemv);
    case kTopK:
    case kMoeFinalize: {  // one call site of the top-k: with kFlagWithTopK the finalize runs it
      const bool routed_here = d.opcode == kMoeFinalize && (d.flags & kFlagWithTopK) != 0;
      FinalizeSmem& f = s.op.finalize;
      if (routed_here) {
        for (int e = threadIdx.x; e < p.num_experts; e += kWorkerThreads) f.counts[e] = 0;
        WorkerSync();
      }
      if (d.opcode == kTopK || routed_here) {
        OpTopK(p, d,
               routed_here
                   ? TopKSlots{reinterpret_cast<uint32_t*>(f.counts), f.pick_ids, f.pick_slots}
                   : TopKSlots{p.expert_counts + static_cast<int64_t>(d.layer) * p.num_experts});
      }
      if (d.opcode == kTopK) return;
      if (routed_here) WorkerSync();  // the counts and picks in shared memory are complete
      return OpMoeFinalize(p, d, f, routed_here);
    }
    case kExpertGateUpClaim:
      return RunExpertClaims(p, d, false, s);
    case kExpertDownClaim:
      return RunExpertClaims(p, d, true, s);
    case kMoeCombine:
      return OpMoeCombine(p, d, s.op.rows);
    case kLmHead:
      return OpLmHead(p, d, s.op.gemv, RingRounds{WeightRing(s)});
    default:  // kNop; the host refuses opcodes the kernel does not run
      return;
  }
}

__global__ void __launch_bounds__(kBlockThreads, 1)
    MegakernelKernel(const __grid_constant__ StepParams p,
                     const __grid_constant__ TaskLists lists) {
  extern __shared__ uint4 smem_raw[];
  KernelSmem& s = *reinterpret_cast<KernelSmem*>(smem_raw);
  const uint32_t count = lists.counts[blockIdx.x];
  const TaskDescriptor* tasks =
      lists.tasks + static_cast<int64_t>(blockIdx.x) * lists.max_tasks_per_sm;
  if (threadIdx.x == 0) {
    s.loaded = 0;
    s.consumed = 0;
    s.stop = 0;
  }
  __syncthreads();  // the only CTA-wide barrier: before the roles split
  if (threadIdx.x >= kWorkerThreads) {
    ControllerLoop(tasks, count, s);
    return;
  }
  for (uint32_t i = 0; i < count; ++i) {
    if (threadIdx.x == 0) {
      while (Volatile(s.loaded) <= i) __nanosleep(20);
    }
    WorkerSync();
    const TaskDescriptor& d = s.ring[i % kRingSlots];
    uint64_t start = 0;
    if (threadIdx.x == 0) start = GlobalTimerNs();
    uint64_t ready_at = 0;
    if (threadIdx.x == 0) {
      const bool ready = SpinUntil(p, d.wait0_counter, d.wait0_target) &&
                         SpinUntil(p, d.wait1_counter, d.wait1_target);
      if (!ready) Volatile(s.stop) = 1;
      ready_at = GlobalTimerNs();
    }
    WorkerSync();
    if (Volatile(s.stop) != 0) return;
    RunTask(p, d, s);
    WorkerSync();
    if (Volatile(s.stop) != 0) return;
    if (threadIdx.x == 0) {
      if (!IsClaimOpcode(d.opcode)) Arrive(p, d.signal_counter);
      if (p.timeline != nullptr) {
        p.timeline[static_cast<int64_t>(blockIdx.x) * lists.max_tasks_per_sm + i] = {
            start, ready_at, GlobalTimerNs()};
      }
      Volatile(s.consumed) = i + 1;  // the ring slot may be refilled
    }
  }
}

struct ZeroArgs {
  ZeroRegion regions[kMaxZeroRegions];
  int count;
};

__global__ void ZeroRegionsKernel(ZeroArgs args) {
  for (int r = 0; r < args.count; ++r) {
    uint32_t* words = static_cast<uint32_t*>(args.regions[r].data);
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
         i < args.regions[r].words; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      words[i] = 0;
    }
  }
}

}  // namespace

size_t MegakernelSmemBytes() {
  return std::max(
      sizeof(KernelSmem),
      kWeightRingOffset + sizeof(uint4) * kWorkerWarps * static_cast<size_t>(kWeightRingWarpVecs));
}

int MegakernelGridSize() {
  static const int grid = [] {
    int device = 0, sms = 0, per_sm = 0;
    MKSERVE_CUDA_CHECK(cudaGetDevice(&device));
    MKSERVE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    MKSERVE_CUDA_CHECK(cudaFuncSetAttribute(&MegakernelKernel,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(MegakernelSmemBytes())));
    MKSERVE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, &MegakernelKernel, kBlockThreads, MegakernelSmemBytes()));
    if (per_sm < 1) {
      throw Error("megakernel: one CTA of " + std::to_string(kBlockThreads) + " threads and " +
                  std::to_string(MegakernelSmemBytes()) +
                  " bytes of shared memory cannot be resident on an SM of this device");
    }
    return sms;
  }();
  return grid;
}

void LaunchMegakernel(const StepParams& params, const TaskLists& lists, cudaStream_t stream) {
  const int grid = MegakernelGridSize();
  if (lists.num_sms != grid) {
    throw Error("megakernel: the task lists are for " + std::to_string(lists.num_sms) +
                " SMs, this device has " + std::to_string(grid) + "; rebuild the schedule");
  }
  cudaLaunchAttribute cooperative{};
  cooperative.id = cudaLaunchAttributeCooperative;
  cooperative.val.cooperative = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(grid));
  config.blockDim = dim3(kBlockThreads);
  config.dynamicSmemBytes = MegakernelSmemBytes();
  config.stream = stream;
  config.attrs = &cooperative;
  config.numAttrs = 1;
  MKSERVE_CUDA_CHECK(cudaLaunchKernelEx(&config, &MegakernelKernel, params, lists));
}

void ZeroRegions(std::span<const ZeroRegion> regions, cudaStream_t stream) {
  if (regions.size() > static_cast<size_t>(kMaxZeroRegions)) {
    throw Error("megakernel: " + std::to_string(regions.size()) + " regions to zero, at most " +
                std::to_string(kMaxZeroRegions));
  }
  ZeroArgs args{};
  args.count = static_cast<int>(regions.size());
  for (size_t i = 0; i < regions.size(); ++i) args.regions[i] = regions[i];
  ZeroRegionsKernel<<<264, 256, 0, stream>>>(args);
  MKSERVE_CUDA_CHECK_LAUNCH();
}

}  // namespace mkserve::megakernel
