// The MoE ops: router logits tiles (fp32 activations, as the layered router reads them), per-row
// top-k with a slot in each chosen expert's bucket, the per-layer finalize that turns bucket
// counts into offsets and expert work items, and the claim loop that runs those items.
#pragma once

#include <cmath>
#include <type_traits>

#include "megakernel/device/ops_linear.cuh"
#include "megakernel/device/ops_rows.cuh"
#include "megakernel/schedule/tile_shapes.h"

namespace mkserve::megakernel {

inline constexpr int kMaxExperts = 256;
inline constexpr int kRouterTokens = 8;  // activation rows per pass of a router tile

// Row `row` of layer `layer`'s router logits: a [batch][experts] block per layer, zeroed before
// the step, so no reader has to clear it for the next layer.
__device__ inline float* RouterLogitsRow(const StepParams& p, int layer, int row) {
  return p.router_logits + (static_cast<int64_t>(layer) * p.batch + row) * p.num_experts;
}

// kFlagPrimeWeights: the router task's weight slice, [tile experts][k1 - k0], copied into
// `primed` by every worker before the task's wait and committed as one cp.async group.
__device__ inline void PrimeRouterWeights(const StepParams& p, const TaskDescriptor& d,
                                          uint4* primed) {
  const int k0 = static_cast<int>(d.k_begin), vecs = (static_cast<int>(d.k_end) - k0) / 8;
  const bf16* w =
      p.layers[d.layer].router + static_cast<int64_t>(TileBegin(d, p.tiles.router)) * p.hidden + k0;
  for (int i = threadIdx.x; i < p.tiles.router * vecs; i += kWorkerThreads) {
    cuda::CpAsync16(primed + i, w + static_cast<int64_t>(i / vecs) * p.hidden + (i % vecs) * 8,
                    true);
  }
  cuda::CpAsyncCommit();
}

// router_logits[row][e] (+)= w[e][k0:k1] . x_norm_f32[row][k0:k1], one warp per expert. The
// rows' fp32 activations are staged in shared memory once per task (as many rows as fit), not
// re-read from L2 for every expert: at batch 64 that re-reading made a router task 99 us, the
// start of every MoE layer's critical path.
// With kFlagFusedNorm the task computes the rows' norm itself (FusedNormRows), and the tasks of
// tile 0 also write their K range of x_norm in bf16, the expert gate/up items' input.
// With kFlagPrimeWeights the weights are read from `primed` (PrimeRouterWeights).
__device__ inline void OpRouter(const StepParams& p, const TaskDescriptor& d, GemvSmem& s,
                                const uint4* primed) {
  constexpr int kStageFloats = sizeof(s.xs) / sizeof(float);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const LayerParams& layer = p.layers[d.layer];
  const int k0 = static_cast<int>(d.k_begin), len = static_cast<int>(d.k_end) - k0;
  const bool accumulate = (d.flags & kFlagAccumulate) != 0;
  const int e0 = TileBegin(d, p.tiles.router);
  const int rows_per_stage = kStageFloats / len;  // len <= 4096 (the decoder's hidden limit)
  float* xs = reinterpret_cast<float*>(s.xs);
  const int vecs = len / 4;
  const bool is_primed = (d.flags & kFlagPrimeWeights) != 0;
  if (is_primed) cuda::CpAsyncWait<0>();  // the staging's barrier then publishes every copy
  for (int row0 = d.row_begin; row0 < static_cast<int>(d.row_end); row0 += rows_per_stage) {
    const int rows = min(rows_per_stage, static_cast<int>(d.row_end) - row0);
    if (row0 > static_cast<int>(d.row_begin)) WorkerSync();  // the previous rows are done
    if ((d.flags & kFlagFusedNorm) != 0) {
      const bool writes_x_norm = d.tile == 0;
      FusedNormRows(p, d.layer, row0, rows, s.norm, [&](int t, int col, float4 y) {
        if (col < k0 || col >= k0 + len) return;
        *reinterpret_cast<float4*>(xs + t * len + col - k0) = y;
        if (!writes_x_norm) return;
        *reinterpret_cast<uint2*>(p.x_norm + static_cast<int64_t>(row0 + t) * p.hidden + col) =
            PackBf16x4(y);
      });
    } else {
      for (int i = threadIdx.x; i < rows * vecs; i += kWorkerThreads) {
        const float* x = p.x_norm_f32 + static_cast<int64_t>(row0 + i / vecs) * p.hidden + k0;
        reinterpret_cast<float4*>(xs)[i] = LoadCgF4(x + (i % vecs) * 4);
      }
      WorkerSync();
    }
    // One loop per weight source, so the unprimed batches run the loop they had before
    // kFlagPrimeWeights.
    auto experts = [&](auto from_primed) {
      for (int e = e0 + warp; e < e0 + p.tiles.router; e += kWorkerWarps) {
        const bf16* w = layer.router + static_cast<int64_t>(e) * p.hidden + k0;
        for (int first = 0; first < rows; first += kRouterTokens) {
          const int count = min(kRouterTokens, rows - first);
          float acc[kRouterTokens] = {};
          for (int c = lane * cuda::kVecElements; c < len; c += 32 * cuda::kVecElements) {
            // Read again for every 8 rows, so through L1 (__ldg allocates there): with
            // LoadStreaming (no L1 allocation) each reload was an L2 round trip, and a batch-64
            // router task took 52 us (H200 timeline).
            uint4 wv;
            if constexpr (decltype(from_primed)::value) {
              wv = primed[(e - e0) * (len / 8) + c / 8];
            } else {
              wv = __ldg(reinterpret_cast<const uint4*>(w + c));
            }
            float wf[cuda::kVecElements];
            cuda::Bf16x8ToFloat(cuda::Bf16x8{wv}, wf);
#pragma unroll
            for (int t = 0; t < kRouterTokens; ++t) {
              if (t >= count) break;
              const float4 lo = *reinterpret_cast<const float4*>(xs + (first + t) * len + c);
              const float4 hi = *reinterpret_cast<const float4*>(xs + (first + t) * len + c + 4);
              const float xv[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
              for (int i = 0; i < 8; ++i) acc[t] = fmaf(wf[i], xv[i], acc[t]);
            }
          }
#pragma unroll
          for (int t = 0; t < kRouterTokens; ++t) {
            if (t >= count) break;
            const float sum = cuda::WarpSum(acc[t]);
            if (lane == 0) {
              StoreOut(RouterLogitsRow(p, d.layer, row0 + first + t) + e, sum, accumulate);
            }
          }
        }
      }
    };
    if (is_primed) {
      experts(std::true_type{});
    } else {
      experts(std::false_type{});
    }
  }
}

// Where the top-k takes each pick's bucket slot: the layer's bucket counts in global memory, read
// by a finalize task on another SM, or, when the finalize task runs the top-k itself
// (kFlagWithTopK), counts in its shared memory that also keeps the picks, so the finalize reads
// nothing back through L2 (H200, 8K: batch 2 and 4 about 1 % faster than through global memory;
// batch 1 the same, where the top-k and the finalize took 5-6 us each as separate tasks).
// By pick (kFlagPickItems) no slot is taken: pick a is bucket position a.
struct TopKSlots {
  uint32_t* counts;                 // [experts], null by pick
  int32_t* shared_ids = nullptr;    // [rows * top_k] the picks' experts, or null
  int32_t* shared_slots = nullptr;  // [rows * top_k] their bucket slots
  bool by_pick = false;
};

// Pick j of a row's top k, held by lane j of the warp that ranked the row.
struct LanePick {
  int32_t expert;
  float weight;  // as the config says: divided by the picks' sum or not
};

// A logit as an unsigned key that orders as the float does, -0 and +0 made one (they tie, and a
// tie goes to the lower id); 0 is below every key, so it marks an expert already taken or absent.
__device__ inline uint32_t LogitKey(float v) {
  if (v == 0.0f) v = 0.0f;
  const uint32_t u = __float_as_uint(v);
  return (u & 0x80000000u) != 0 ? ~u : u | 0x80000000u;
}
__device__ inline float LogitOfKey(uint32_t key) {
  return __uint_as_float((key & 0x80000000u) != 0 ? key & 0x7FFFFFFFu : ~key);
}

// Row `row` of layer `layer`'s router logits as keys, expert lane + 32 i in keys[i] (a NaN logit
// counts as -inf, else the picks would depend on the order).
struct RowKeys {
  uint32_t keys[kMaxExperts / 32];
};
__device__ inline RowKeys LoadRowKeys(const StepParams& p, int layer, int row) {
  const int lane = threadIdx.x % 32;
  const float* logits = RouterLogitsRow(p, layer, row);
  RowKeys row_keys;
#pragma unroll
  for (int i = 0; i < kMaxExperts / 32; ++i) {
    const int e = lane + i * 32;
    const float v = e < p.num_experts ? LoadCgF(logits + e) : NAN;
    row_keys.keys[i] = e < p.num_experts ? LogitKey(isnan(v) ? -INFINITY : v) : 0u;
  }
  return row_keys;
}

// One warp: the top k of a row's keys (ties to the lower id); lane j < top_k returns pick j.
// Each lane first sorts its keys (best first; of equal keys the lower id first), so a pick is
// the warp's largest head (redux), the lowest id among the lanes holding it (redux), and that
// lane drops its head. The picks come one after another, and their time is the chain of
// dependent instructions per pick (about 300 ns with a scan of the lane's eight slots and a
// clear per pick; H200, diagnostic stamps): with sorted lanes the batch-1 claim that ranks
// reached its first item 4.1 us after its wait instead of 4.4, and batch 1 8K was 0.8 % faster
// (2.694-2.698 against 2.717-2.718 ms; batch 2 1.2 % slower, 8 and 64 within 0.5 %). Also
// measured: a shuffle tree of value and id (slower), every pick at once by ranks counted by the
// block's threads (slower still: the claims' ranking 3.6 -> 5.1 us), the pick's id by ballot
// and shuffle instead of the second reduction (the same), the weights after the loop (the
// same). kSlots: the lane's slots that can hold an expert (the rest are 0).
template <int kSlots>
__device__ inline LanePick WarpTopKOver(const StepParams& p, const RowKeys& row) {
  const int lane = threadIdx.x % 32;
  uint32_t key[kSlots], id[kSlots];
#pragma unroll
  for (int i = 0; i < kSlots; ++i) {
    key[i] = row.keys[i];
    id[i] = static_cast<uint32_t>(lane + i * 32);
  }
#pragma unroll
  for (int i = 1; i < kSlots; ++i) {
#pragma unroll
    for (int j = i; j > 0; --j) {
      if (key[j] > key[j - 1]) {  // strictly: of equal keys the lower id (earlier slot) stays first
        const uint32_t k = key[j], n = id[j];
        key[j] = key[j - 1];
        id[j] = id[j - 1];
        key[j - 1] = k;
        id[j - 1] = n;
      }
    }
  }
  float weights_sum = 0.0f, top_logit = 0.0f;
  LanePick mine{0, 0.0f};
  for (int j = 0; j < p.top_k; ++j) {
    const uint32_t top = __reduce_max_sync(0xffffffffu, key[0]);
    const uint32_t winner =
        __reduce_min_sync(0xffffffffu, key[0] == top && top != 0 ? id[0] : 0xFFFFFFFFu);
    if (id[0] == winner) {
#pragma unroll
      for (int i = 0; i + 1 < kSlots; ++i) {
        key[i] = key[i + 1];
        id[i] = id[i + 1];
      }
      key[kSlots - 1] = 0;
    }
    const float logit = LogitOfKey(top);
    if (j == 0) top_logit = logit;
    const float w = p.sigmoid_router ? 1.0f / (1.0f + expf(-logit)) : expf(logit - top_logit);
    weights_sum += w;
    if (lane == j) mine = {static_cast<int32_t>(winner), w};
  }
  if (!p.sigmoid_router || p.renormalize) mine.weight /= weights_sum;
  return mine;
}

// Up to 128 experts (North's count) a lane's keys fill four slots of eight.
__device__ inline LanePick WarpTopK(const StepParams& p, const RowKeys& row) {
  return p.num_experts <= 4 * 32 ? WarpTopKOver<4>(p, row) : WarpTopKOver<kMaxExperts / 32>(p, row);
}

// Pick a (row * top_k + j) of layer `layer` where the combine, the down claims and the host read
// it: its id and weight, and the routing record when one is kept.
__device__ inline void WritePick(const StepParams& p, int layer, int a, int32_t expert,
                                 float weight) {
  p.topk_ids[a] = expert;
  p.topk_weights[a] = weight;
  if (p.routing != nullptr) p.routing[static_cast<int64_t>(layer) * p.batch * p.top_k + a] = expert;
}

// kTopK (and the finalize's, kFlagWithTopK), one warp per row: the picks (WritePick) and a slot in
// each chosen expert's bucket unless by pick.
__device__ inline void OpTopK(const StepParams& p, const TaskDescriptor& d, TopKSlots out) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int row = d.row_begin + warp; row < static_cast<int>(d.row_end); row += kWorkerWarps) {
    const LanePick pick = WarpTopK(p, LoadRowKeys(p, d.layer, row));
    if (lane >= p.top_k) continue;  // the k bucket slots are taken concurrently, a lane each
    const int a = row * p.top_k + lane;
    WritePick(p, d.layer, a, pick.expert, pick.weight);
    if (!out.by_pick) {  // by pick the bucket tables are the decoder's identity
      const int32_t slot = static_cast<int32_t>(atomicAdd(out.counts + pick.expert, 1u));
      if (out.shared_ids != nullptr) {  // the finalize in this task reads them from here
        out.shared_ids[a] = pick.expert;
        out.shared_slots[a] = slot;
      } else {
        p.topk_slot[a] = slot;
      }
    }
  }
}

struct FinalizeSmem {
  int32_t counts[kMaxExperts];
  int32_t offsets[kMaxExperts + 1];
  int32_t first_block[kMaxExperts + 1];
  int32_t block_expert[kMaxBatch * kMaxTopK];  // the expert owning each row block
  int32_t pick_ids[kMaxBatch * kMaxTopK];      // with the top-k in this task (TopKSlots)
  int32_t pick_slots[kMaxBatch * kMaxTopK];
};

// Bucket offsets, the bucket's assignment table, and the gate/up and down item queues, in the
// order and with the counter units of the schedule's ExpertItemsForRouting (the queues are sized
// for the most blocks any routing can occupy, so they never overflow). Every MoE layer's expert
// work waits for this one task, so each part is parallel: at batch 1 a serial prefix sum and a
// linear search per item cost about 10 us a layer (H200 timeline).
// `routed_here`: the top-k ran in this task and left counts and picks in `s` (TopKSlots).
__device__ inline void OpMoeFinalize(const StepParams& p, const TaskDescriptor& d, FinalizeSmem& s,
                                     bool routed_here) {
  constexpr int kPerLane = kMaxExperts / 32;
  const uint32_t* counts = p.expert_counts + static_cast<int64_t>(d.layer) * p.num_experts;
  const int rows_per_block = static_cast<int>(d.arg[kArgTileRows]);
  const int up_tiles = static_cast<int>(d.arg[kArgTiles]);
  const int down_tiles = static_cast<int>(d.arg[kArgTiles2]);
  const uint32_t blocks_per_expert = (p.batch + rows_per_block - 1) / rows_per_block;
  const int experts = p.num_experts;
  if (!routed_here) {
    for (int e = threadIdx.x; e < experts; e += kWorkerThreads) {
      s.counts[e] = static_cast<int32_t>(LoadCgU(counts + e));  // all loads in flight at once
    }
    WorkerSync();
  }
  // One warp: exclusive scans of rows and of row blocks over the experts, kPerLane a lane.
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    int rows[kPerLane], blocks[kPerLane], lane_rows = 0, lane_blocks = 0;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int e = lane * kPerLane + i;
      rows[i] = e < experts ? s.counts[e] : 0;
      blocks[i] = (rows[i] + rows_per_block - 1) / rows_per_block;
      lane_rows += rows[i];
      lane_blocks += blocks[i];
    }
    int rows_before = lane_rows, blocks_before = lane_blocks;  // inclusive, then exclusive
    for (int offset = 1; offset < 32; offset *= 2) {
      const int r = __shfl_up_sync(0xffffffffu, rows_before, offset);
      const int b = __shfl_up_sync(0xffffffffu, blocks_before, offset);
      if (lane >= offset) {
        rows_before += r;
        blocks_before += b;
      }
    }
    if (lane == 31) {
      s.offsets[experts] = rows_before;
      s.first_block[experts] = blocks_before;
    }
    rows_before -= lane_rows;
    blocks_before -= lane_blocks;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int e = lane * kPerLane + i;
      if (e < experts) {
        s.offsets[e] = rows_before;
        s.first_block[e] = blocks_before;
      }
      rows_before += rows[i];
      blocks_before += blocks[i];
    }
  }
  WorkerSync();
  for (int e = threadIdx.x; e < experts; e += kWorkerThreads) {
    for (int block = s.first_block[e]; block < s.first_block[e + 1]; ++block) {
      s.block_expert[block] = e;
    }
  }
  for (int e = threadIdx.x; e <= experts; e += kWorkerThreads) {
    p.bucket_offsets[e] = s.offsets[e];
  }
  for (int a = threadIdx.x; a < p.batch * p.top_k; a += kWorkerThreads) {
    const int e = routed_here ? s.pick_ids[a] : LoadCgI(p.topk_ids + a);
    const int position = s.offsets[e] + (routed_here ? s.pick_slots[a] : LoadCgI(p.topk_slot + a));
    p.bucket_assignment[position] = a;
    p.routed_position[a] = position;  // the MoE combine's lookup, one load instead of two
  }
  WorkerSync();  // block_expert is complete
  const uint32_t up_queue = d.arg[kArgQueue], down_queue = d.arg[kArgQueue2];
  ExpertWorkItem* up = p.expert_items + p.queue_offsets[up_queue];
  ExpertWorkItem* down = p.expert_items + p.queue_offsets[down_queue];
  const int total_blocks = s.first_block[p.num_experts];
  for (int i = threadIdx.x; i < total_blocks * max(up_tiles, down_tiles); i += kWorkerThreads) {
    const int block = i / max(up_tiles, down_tiles), tile = i % max(up_tiles, down_tiles);
    const int e = s.block_expert[block];
    const int rb = block - s.first_block[e];
    const int count = s.counts[e];
    ExpertWorkItem item{};
    item.expert = e;
    item.row_block = rb;
    item.tile = tile;
    item.bucket_begin = s.offsets[e] + rb * rows_per_block;
    item.row_count = min(rows_per_block, count - rb * rows_per_block);
    item.arrive_weight = 1;
    const uint32_t unit = e * blocks_per_expert + rb;
    if (tile < up_tiles) {
      ExpertWorkItem u = item;
      u.wait_unit = kNoCounter;
      u.signal_unit = unit;
      u.signal_count = 1;
      up[block * up_tiles + tile] = u;
    }
    if (tile < down_tiles) {
      ExpertWorkItem dn = item;
      dn.wait_unit = unit;
      dn.wait_target = up_tiles;
      dn.signal_unit = 0;  // down items signal per routed row
      dn.signal_count = item.row_count;
      down[block * down_tiles + tile] = dn;
    }
  }
  if (threadIdx.x == 0) {
    p.queue_counts[up_queue] = total_blocks * up_tiles;
    p.queue_counts[down_queue] = total_blocks * down_tiles;
  }
}

}  // namespace mkserve::megakernel
