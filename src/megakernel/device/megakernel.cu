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
#include "megakernel/device/ops_sample.cuh"

namespace mkserve::megakernel {
namespace {

inline constexpr int kRingSlots = 4;  // descriptors the controller warp may run ahead

// Shared memory of one CTA. The op scratch is a union: one task runs at a time. It must start on
// a 128-byte boundary (the static_assert below): a 16-byte member added before it made every
// batch about 20 % slower (H200, 8K: batch 1 3.16 -> 3.82 ms, batch 8 9.50 -> 11.54, batch 64
// 29.3 -> 33.4), while 128-384 bytes more measured the same as none. New members go in
// ControllerMailbox, after everything else.
struct KernelSmem {
  TaskDescriptor ring[kRingSlots];
  uint32_t loaded;             // descriptors the controller has placed (written by the controller)
  uint32_t done;               // tasks the workers have finished (written by worker thread 0)
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
static_assert(offsetof(KernelSmem, op) % 128 == 0 && kWeightRingOffset % 128 == 0);
static_assert(kMaxPrimedRouterBytes <= kWorkerWarps * kWeightRingWarpVecs * sizeof(uint4),
              "a primed router slice lies in the weight ring");

__device__ inline uint4* WeightRing(KernelSmem& s) {
  return reinterpret_cast<uint4*>(reinterpret_cast<char*>(&s) + kWeightRingOffset);
}

// A claimed item's arrivals, posted by worker thread 0 for the controller to make: `weight` on
// counter base + unit, or, with row_count > 0 (expert down), on base + the batch row of each of
// the routed rows [bucket_begin, bucket_begin + row_count).
struct ItemSignal {
  uint32_t base, unit, weight, bucket_begin, row_count;
};

inline constexpr int kItemSignalSlots = 4;

// What the worker warps and the controller hand each other besides the descriptors. It lies after
// everything else in shared memory: members added before the op union move every op's scratch
// (see KernelSmem).
struct ControllerMailbox {
  // Per ring slot: 1 + the task whose waits the controller found met ahead.
  uint32_t ready[kRingSlots];
  uint32_t items_posted;  // item signals posted (worker thread 0)
  uint32_t items_made;    // item signals made (controller)
  ItemSignal items[kItemSignalSlots];
  // The workers' only: a gate/up claim's own picks (kFlagTopKInClaims), kept across its items
  // (the op scratch is the items' GEMM scratch).
  int32_t pick_experts[kMaxTopKInClaimsBatch * kMaxTopK];
  float pick_weights[kMaxTopKInClaimsBatch * kMaxTopK];
};

constexpr size_t kMailboxOffset =
    (std::max(sizeof(KernelSmem),
              kWeightRingOffset +
                  sizeof(uint4) * kWorkerWarps * static_cast<size_t>(kWeightRingWarpVecs)) +
     15) /
    16 * 16;

// kSample's scratch starts at the op union and runs over the weight ring: no GEMM runs after it.
static_assert(offsetof(KernelSmem, op) + sizeof(SampleSmem) <= kMailboxOffset,
              "the sampling scratch overlaps the controller mailbox");

__device__ inline ControllerMailbox& Mailbox(KernelSmem& s) {
  return *reinterpret_cast<ControllerMailbox*>(reinterpret_cast<char*>(&s) + kMailboxOffset);
}

// Worker thread 0: hands an item's arrivals to the controller (waiting while the mailbox is full).
__device__ inline void PostItemSignal(KernelSmem& s, const ItemSignal& signal) {
  ControllerMailbox& m = Mailbox(s);
  const uint32_t n = m.items_posted;  // only this thread writes it
  while (n - LoadAcquireCta(m.items_made) >= kItemSignalSlots) __nanosleep(20);
  m.items[n % kItemSignalSlots] = signal;
  StoreReleaseCta(m.items_posted, n + 1);
}

__device__ inline volatile uint32_t& Volatile(uint32_t& v) {
  return *const_cast<volatile uint32_t*>(&v);
}

// The controller warp, beside the workers for the whole step: keeps the descriptor ring filled,
// signals each finished task's counter (its fence and add leave the workers' path: they start
// the next task at once) and checks the next task's waits ahead, so that a wait met long ago
// costs the workers no L2 round trip. Signals go out in task order, each after its task's
// stores (worker barrier, then the release store of `done`, then the fence here), so the
// schedule's dependencies are those of workers that signal themselves.
__device__ void ControllerLoop(const StepParams& p, const TaskDescriptor* tasks, uint32_t count,
                               KernelSmem& s) {
  const int lane = threadIdx.x % 32;
  ControllerMailbox& m = Mailbox(s);
  uint32_t loaded = 0, signalled = 0, items_made = 0, checked = 0;
  while (signalled < count) {
    uint32_t done = 0, posted = 0, stop = 0;
    if (lane == 0) {
      done = LoadAcquireCta(s.done);
      posted = LoadAcquireCta(m.items_posted);
      stop = Volatile(s.stop);
    }
    done = __shfl_sync(0xffffffffu, done, 0);
    posted = __shfl_sync(0xffffffffu, posted, 0);
    if (__shfl_sync(0xffffffffu, stop, 0) != 0) return;  // the workers have left
    const bool progress = signalled < done || items_made < posted ||
                          (loaded < count && loaded - signalled < kRingSlots);
    if (lane == 0 && (signalled < done || items_made < posted)) {
      FenceAcqRel();  // one fence releases every task and item finished since the last look
      for (; items_made < posted; ++items_made) {
        const ItemSignal& signal = m.items[items_made % kItemSignalSlots];
        if (signal.row_count == 0) {
          RedAdd(p.counters + signal.base + signal.unit, signal.weight);
        } else {
          for (uint32_t i = 0; i < signal.row_count; ++i) {
            const int32_t a = LoadCgI(p.bucket_assignment + signal.bucket_begin + i);
            RedAdd(p.counters + signal.base + a / p.top_k, signal.weight);
          }
        }
        StoreReleaseCta(m.items_made, items_made + 1);  // the slot may be posted again
      }
      for (; signalled < done; ++signalled) {
        const TaskDescriptor& d = s.ring[signalled % kRingSlots];
        if (!IsClaimOpcode(d.opcode) && d.signal_counter != kNoCounter) {
          RedAdd(p.counters + d.signal_counter, 1u);
        }
      }
    }
    signalled = __shfl_sync(0xffffffffu, signalled, 0);
    items_made = __shfl_sync(0xffffffffu, items_made, 0);
    for (; loaded < count && loaded - signalled < kRingSlots; ++loaded) {
      if (lane < kTaskWords / 4) {
        reinterpret_cast<uint4*>(&s.ring[loaded % kRingSlots])[lane] =
            reinterpret_cast<const uint4*>(&tasks[loaded])[lane];
      }
      __syncwarp();
      if (lane == 0) StoreReleaseCta(s.loaded, loaded + 1);
    }
    // The task after the one the workers run: are its waits met already? One look per task,
    // after the signals: a load here holds up the next signal for an L2 round trip.
    const uint32_t next = done + 1;
    if (next < loaded && checked <= next) {
      checked = next + 1;
      if (lane == 0) {
        const TaskDescriptor& d = s.ring[next % kRingSlots];
        if (CounterReached(p, d.wait0_counter, d.wait0_target) &&
            CounterReached(p, d.wait1_counter, d.wait1_target)) {
          // The acquire loads, then this release: the workers read what those waits guard.
          StoreReleaseCta(m.ready[next % kRingSlots], next + 1);
        }
      }
    }
    if (!progress) __nanosleep(20);
  }
}

// An item's record as a queue holds it: one load of every field.
template <class Item>
__device__ inline Item LoadRecord(const Item* items, uint32_t index) {
  Item item;
  for (int i = 0; i < static_cast<int>(sizeof(Item) / 16); ++i) {
    reinterpret_cast<uint4*>(&item)[i] = LoadCg(reinterpret_cast<const uint4*>(items + index) + i);
  }
  return item;
}

// Where a claim's items come from: the records of its queue, or, for expert items by pick
// (kFlagPickItems, `records` null), their index: the fields follow from it and the expert is the
// one load (the top-k's id of the pick), or with kFlagTopKInClaims the claim's own pick (gate/up)
// or a load after the item's wait (down: the pick's gate/up tile 0 wrote it). `AfterWait`
// completes the record once the item's wait is met.
template <class Item>
struct ItemSource {
  const Item* records;
  __device__ Item operator()(const StepParams&, uint32_t index) const {
    return LoadRecord(records, index);
  }
  __device__ void AfterWait(const StepParams&, uint32_t, Item&) const {}
};
template <>
struct ItemSource<ExpertWorkItem> {
  const ExpertWorkItem* records;
  uint32_t tiles, up_tiles;  // by pick: this queue's tiles per pick, the gate/up tiles per pick
  bool down;
  const int32_t* own_picks = nullptr;  // kFlagTopKInClaims, gate/up: the claim's picks
  bool expert_after_wait = false;      // kFlagTopKInClaims, down
  __device__ ExpertWorkItem operator()(const StepParams& p, uint32_t index) const {
    if (records != nullptr) return LoadRecord(records, index);
    const int32_t expert = own_picks != nullptr ? own_picks[index / tiles]
                           : expert_after_wait  ? 0
                                                : LoadCgI(p.topk_ids + index / tiles);
    return ExpertItemByPick(index, tiles, up_tiles, down, static_cast<uint32_t>(expert));
  }
  __device__ void AfterWait(const StepParams& p, uint32_t index, ExpertWorkItem& item) const {
    if (expert_after_wait) item.expert = static_cast<uint32_t>(LoadCgI(p.topk_ids + index / tiles));
  }
};

// Worker thread 0 takes the next item of queue `queue` (`count` items), copies its record (from
// `source`) into shared memory and, when it has a wait, waits for it. Returns the item index or
// -1 (queue empty or the step was abandoned), for every worker. One load of the record, not one
// for its wait and another for the workers: each dependent L2 round trip here sits before the
// item's first weight load (about 1 us apiece while the SMs stream).
template <class Item, class Source>
__device__ int ClaimNext(const StepParams& p, uint32_t queue, uint32_t count, Source source,
                         uint32_t wait_base, Item& staged, KernelSmem& s) {
  if (threadIdx.x == 0) {
    if (p.item_timeline != nullptr) s.claim_start_ns = GlobalTimerNs();
    int32_t claimed = -1;
    const uint32_t index = atomicAdd(p.queue_heads + queue, 1u);
    if (index < count) {
      claimed = static_cast<int32_t>(index);
      const Item item = source(p, index);
      staged = item;
      if (item.wait_unit != kNoCounter &&
          !SpinUntil(p, wait_base + item.wait_unit, item.wait_target)) {
        s.stop = 1;
        claimed = -1;
      }
      source.AfterWait(p, index, staged);
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

// kFlagTopKInClaims, gate/up: the picks of the claim's rows (a warp a row) into the mailbox, where
// they outlive the items' use of the op scratch. The first claims to get here rank them from the
// layer's router logits and publish them; the later ones, whose SMs ran QKV or attention
// meanwhile, read them and skip the ranking. Every ranker writes the same words, and a word is a
// whole pick, so a reader that finds one of its row's k still zero ranks the row itself.
__device__ void TakePicks(const StepParams& p, const TaskDescriptor& d, KernelSmem& s) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int row = d.row_begin + warp; row < static_cast<int>(d.row_end); row += kWorkerWarps) {
    uint64_t* published =
        p.published_picks + (static_cast<int64_t>(d.layer) * p.batch + row) * p.top_k;
    const uint64_t word = lane < p.top_k ? LoadRelaxed(published + lane) : 1u;
    const RowKeys keys = LoadRowKeys(p, d.layer, row);  // in flight beside the word
    LanePick pick;
    if (__all_sync(0xffffffffu, word != 0)) {
      pick = {static_cast<int32_t>(word >> 32) - 1, __uint_as_float(static_cast<uint32_t>(word))};
    } else {
      pick = WarpTopK(p, keys);
      if (lane < p.top_k) {
        StoreRelaxed(published + lane,
                     (static_cast<uint64_t>(pick.expert + 1) << 32) | __float_as_uint(pick.weight));
      }
    }
    if (lane < p.top_k) {
      Mailbox(s).pick_experts[row * p.top_k + lane] = pick.expert;
      Mailbox(s).pick_weights[row * p.top_k + lane] = pick.weight;
    }
  }
  WorkerSync();
}

__device__ void RunExpertClaims(const StepParams& p, const TaskDescriptor& d, bool down,
                                KernelSmem& s) {
  const uint32_t queue = d.arg[kArgQueue];
  const bool by_pick = (d.flags & kFlagPickItems) != 0;
  const bool routes = (d.flags & kFlagTopKInClaims) != 0;
  if (routes && !down) TakePicks(p, d, s);
  const ItemSource<ExpertWorkItem> source{
      by_pick ? nullptr : p.expert_items + p.queue_offsets[queue],
      d.arg[kArgTiles],
      d.arg[kArgTiles2],
      down,
      routes && !down ? Mailbox(s).pick_experts : nullptr,
      routes && down};
  // The finalize wrote the count before the claim task's wait was met; it does not change. By
  // pick it is every pick's tiles.
  uint32_t count = 0;
  if (threadIdx.x == 0) {
    count = by_pick ? (d.row_end - d.row_begin) * p.top_k * d.arg[kArgTiles]
                    : LoadCgU(p.queue_counts + queue);
  }
  const uint32_t max_items = d.arg[kArgMaxItems];  // 0: until the queue is empty
  for (uint32_t taken = 0; max_items == 0 || taken < max_items; ++taken) {
    const int index = ClaimNext(p, queue, count, source, d.arg[kArgItemWaitBase], s.expert_item, s);
    if (index < 0) return;
    const ExpertWorkItem item = s.expert_item;
    RunExpertItem(p, d.layer, item, down, s.op.gemv, RingRounds{WeightRing(s)});
    WorkerSync();
    if (threadIdx.x == 0 && routes && !down && item.tile == 0) {  // pick a's record, once
      const int a = static_cast<int>(item.bucket_begin);
      WritePick(p, d.layer, a, Mailbox(s).pick_experts[a], Mailbox(s).pick_weights[a]);
    }
    if (threadIdx.x == 0) {
      PostItemSignal(s, {d.arg[kArgItemSignalBase], item.signal_unit, item.arrive_weight,
                         item.bucket_begin, down ? item.row_count : 0u});
      RecordItem(p, queue, index, s);
    }
  }
}

__device__ void RunAttentionClaims(const StepParams& p, const TaskDescriptor& d, KernelSmem& s) {
  const uint32_t queue = d.arg[kArgQueue];
  const LayerParams& layer = p.layers[d.layer];
  const uint32_t count = threadIdx.x == 0 ? LoadCgU(p.queue_counts + queue) : 0;  // host-written
  for (;;) {
    const int index = ClaimNext(p, queue, count, ItemSource<AttentionWorkItem>{p.attention_items},
                                d.arg[kArgItemWaitBase], s.attention_item, s);
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
      PostItemSignal(s, {d.arg[kArgItemSignalBase], item.signal_unit, item.arrive_weight, 0, 0});
      RecordItem(p, queue, index, s);
    }
  }
}

// The LM head's items are tiles (LmHeadItemBegin): no record and no wait.
struct LmHeadTiles {
  __device__ ExpertWorkItem operator()(const StepParams&, uint32_t) const {
    ExpertWorkItem item{};
    item.wait_unit = kNoCounter;
    return item;
  }
  __device__ void AfterWait(const StepParams&, uint32_t, ExpertWorkItem&) const {}
};

// kLmHead runs its own tile; kLmHeadClaim claims tiles until its queue is empty, each item its own
// arrival. One call of the GEMM body for both: every call site is another copy of it in the
// kernel, and the kernel's speed follows its code (docs/megakernel-device.md).
__device__ void RunLmHead(const StepParams& p, const TaskDescriptor& d, KernelSmem& s) {
  const bool claims = d.opcode == kLmHeadClaim;
  const uint32_t queue = d.arg[kArgQueue];
  for (bool first = true;; first = false) {
    int index = 0;
    if (claims) {
      index = ClaimNext(p, queue, d.arg[kArgTiles], LmHeadTiles{}, kNoCounter, s.expert_item, s);
      if (index < 0) return;
    } else if (!first) {
      return;
    }
    const int v0 = claims ? static_cast<int>(LmHeadItemBegin(d, index, p.tiles.lm_head))
                          : TileBegin(d, p.tiles.lm_head);
    const bool primed = !claims && (d.flags & kFlagPrimeWeights) != 0;
    RunGemv(LmHeadTile(p, d, v0), s.op.gemv, RingRounds{WeightRing(s), primed});
    if (!claims) continue;
    WorkerSync();
    if (threadIdx.x == 0) {
      if (d.arg[kArgItemSignalBase] != kNoCounter) {
        PostItemSignal(s, {d.arg[kArgItemSignalBase], 0, 1, 0, 0});
      }
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
      return OpRouter(p, d, s.op.gemv, WeightRing(s));
    case kTopK:
    case kMoeFinalize: {  // one call site of the top-k: with kFlagWithTopK the finalize runs it
      const bool routed_here = d.opcode == kMoeFinalize && (d.flags & kFlagWithTopK) != 0;
      FinalizeSmem& f = s.op.finalize;
      if (routed_here) {
        for (int e = threadIdx.x; e < p.num_experts; e += kWorkerThreads) f.counts[e] = 0;
        WorkerSync();
      }
      if (d.opcode == kTopK || routed_here) {
        const bool by_pick = (d.flags & kFlagPickItems) != 0;
        OpTopK(
            p, d,
            routed_here ? TopKSlots{reinterpret_cast<uint32_t*>(f.counts), f.pick_ids, f.pick_slots}
            : by_pick   ? TopKSlots{nullptr, nullptr, nullptr, true}
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
    case kLmHeadClaim:
      return RunLmHead(p, d, s);
    case kSample:
      return OpSample(p, d, *reinterpret_cast<SampleSmem*>(&s.op));
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
    s.done = 0;
    s.stop = 0;
    for (int slot = 0; slot < kRingSlots; ++slot) Mailbox(s).ready[slot] = 0;
    Mailbox(s).items_posted = 0;
    Mailbox(s).items_made = 0;
  }
  __syncthreads();  // the only CTA-wide barrier: before the roles split
  if (threadIdx.x >= kWorkerThreads) {
    ControllerLoop(p, tasks, count, s);
    return;
  }
  for (uint32_t i = 0; i < count; ++i) {
    if (threadIdx.x == 0) {
      while (LoadAcquireCta(s.loaded) <= i) __nanosleep(20);
    }
    WorkerSync();
    const TaskDescriptor& d = s.ring[i % kRingSlots];
    uint64_t start = 0;
    if (threadIdx.x == 0) start = GlobalTimerNs();
    if ((d.flags & kFlagPrimeWeights) != 0) {  // weights depend on nothing: copied before the wait
      if (d.opcode == kRouter) {
        PrimeRouterWeights(p, d, WeightRing(s));
      } else {
        PrimeTileWeights(p, d, WeightRing(s));
      }
    }
    uint64_t ready_at = 0;
    if (threadIdx.x == 0) {
      const bool ready = LoadAcquireCta(Mailbox(s).ready[i % kRingSlots]) == i + 1 ||
                         (SpinUntil(p, d.wait0_counter, d.wait0_target) &&
                          SpinUntil(p, d.wait1_counter, d.wait1_target));
      if (!ready) Volatile(s.stop) = 1;
      ready_at = GlobalTimerNs();
    }
    WorkerSync();
    if (Volatile(s.stop) != 0) return;
    RunTask(p, d, s);
    WorkerSync();
    if (Volatile(s.stop) != 0) return;
    if (threadIdx.x == 0) {
      if (p.timeline != nullptr) {  // the end is the workers': the controller signals after it
        p.timeline[static_cast<int64_t>(blockIdx.x) * lists.max_tasks_per_sm + i] = {
            start, ready_at, GlobalTimerNs()};
      }
      StoreReleaseCta(s.done, i + 1);  // the controller signals the task and reuses its slot
    }
  }
}

struct PrepareArgs {
  ZeroRegion regions[kMaxZeroRegions];
  int count;
  TokenGather gather;  // rows 0: none
};

__global__ void PrepareStepKernel(PrepareArgs args) {
  for (int r = 0; r < args.count; ++r) {
    uint32_t* words = static_cast<uint32_t*>(args.regions[r].data);
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
         i < args.regions[r].words; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      words[i] = 0;
    }
  }
  const TokenGather& g = args.gather;
  if (blockIdx.x == 0 && threadIdx.x < g.rows && g.pick_row[threadIdx.x] >= 0) {
    g.tokens[threadIdx.x] = g.picks[g.pick_row[threadIdx.x]];
  }
}

}  // namespace

size_t MegakernelSmemBytes() { return kMailboxOffset + sizeof(ControllerMailbox); }

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

void PrepareStep(std::span<const ZeroRegion> regions, const TokenGather* gather,
                 cudaStream_t stream) {
  if (regions.size() > static_cast<size_t>(kMaxZeroRegions)) {
    throw Error("megakernel: " + std::to_string(regions.size()) + " regions to zero, at most " +
                std::to_string(kMaxZeroRegions));
  }
  PrepareArgs args{};
  args.count = static_cast<int>(regions.size());
  for (size_t i = 0; i < regions.size(); ++i) args.regions[i] = regions[i];
  if (gather != nullptr) args.gather = *gather;
  PrepareStepKernel<<<264, 256, 0, stream>>>(args);
  MKSERVE_CUDA_CHECK_LAUNCH();
}

}  // namespace mkserve::megakernel
