#include "megakernel/schedule/schedule_builder.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <string>

#include "common/error.h"
#include "engine/kv_layout.h"
#include "megakernel/schedule/work_queues.h"

namespace mkserve::megakernel {

namespace {

constexpr int kWaveCount = static_cast<int>(Wave::kCount);

struct PendingTask {
  TaskDescriptor task;
  double cost = 0;  // estimated bytes streamed, for kLeastLoaded placement
};

using WaveTasks = std::array<std::vector<PendingTask>, kWaveCount>;

class CounterTable {
 public:
  // A group of `units` counters of one producer wave and layer; returns the first id.
  uint32_t Add(Wave producer, int32_t layer, int64_t units, uint32_t expected_arrivals,
               bool fed_by_claims = false) {
    const uint32_t base = static_cast<uint32_t>(counters_.size());
    for (int64_t unit = 0; unit < units; ++unit) {
      counters_.push_back(CounterInfo{producer, layer, static_cast<uint32_t>(unit),
                                      expected_arrivals, fed_by_claims});
    }
    return base;
  }
  void JoinedByPreviousLayer(uint32_t id) { counters_.at(id).joined_by_previous_layer = true; }
  std::vector<CounterInfo> Take() { return std::move(counters_); }

 private:
  std::vector<CounterInfo> counters_;
};

TaskDescriptor NewTask(Opcode opcode, int64_t layer) {
  TaskDescriptor task{};
  task.opcode = opcode;
  task.layer = static_cast<uint32_t>(layer);
  task.wait0_counter = task.wait1_counter = task.signal_counter = kNoCounter;
  return task;
}

void SetRows(TaskDescriptor& task, int64_t begin, int64_t end) {
  task.row_begin = static_cast<uint32_t>(begin);
  task.row_end = static_cast<uint32_t>(end);
}

// A static GEMM tile: index `tile`, output features [begin, begin + width).
void SetTile(TaskDescriptor& task, int64_t tile, int64_t begin, int64_t width) {
  task.tile = static_cast<uint32_t>(tile);
  task.arg[kArgOutBegin] = static_cast<uint32_t>(begin);
  task.arg[kArgOutEnd] = static_cast<uint32_t>(begin + width);
}

void SetWait(TaskDescriptor& task, int which, uint32_t counter, uint32_t target) {
  (which == 0 ? task.wait0_counter : task.wait1_counter) = counter;
  (which == 0 ? task.wait0_target : task.wait1_target) = target;
}

// What a layer's first tasks (QKV, router, dense gate/up) wait for: the previous layer's join,
// or with the fused norm its O-proj and FFN, whose sums they normalise themselves.
struct LayerInput {
  uint32_t counter0 = kNoCounter, target0 = 0;
  uint32_t counter1 = kNoCounter, target1 = 0;
  bool fused_norm = false;
  // With the fused norm: this layer's O-proj counter, allocated by the previous layer, whose join
  // (residual only) arrives on it, so the next layer's wait on it covers the residual too.
  uint32_t oproj_done = kNoCounter;
};

// A layer's counters its successor's input waits for.
struct LayerEnd {
  uint32_t join_done = kNoCounter;  // kNoCounter when the next layer fuses its norm
  uint32_t oproj_done = kNoCounter, oproj_target = 0;
  uint32_t ffn_done = kNoCounter, ffn_target = 0;
  uint32_t next_oproj_done = kNoCounter;  // the next layer's O-proj counter, when it fuses
};

// Builds the waves of one step; the counters a wave waits on are allocated before its tasks.
class Builder {
 public:
  Builder(const ModelConfig& config, int64_t batch, const ContextBucket& bucket, int64_t num_sms,
          const TileShapes& tiles)
      : config_(config), batch_(batch), bucket_(bucket), num_sms_(num_sms), tiles_(tiles) {
    row_groups_ = (batch_ + tiles_.row_tile - 1) / tiles_.row_tile;
    heads_per_group_ = config_.num_heads / config_.num_kv_heads;
  }

  Schedule Build(const SchedulePolicy& policy) {
    Schedule schedule;
    schedule.batch = batch_;
    schedule.bucket = bucket_;
    schedule.num_sms = num_sms_;
    schedule.tiles = tiles_;
    schedule.sm_tasks.resize(num_sms_);
    placement_ = policy.placement;
    wave_sms_ = policy.wave_sms;
    sm_cost_.assign(num_sms_, 0.0);

    // Embedding (and layer 0's input norm) opens the step.
    const uint32_t embed_done = counters_.Add(Wave::kEmbed, 0, 1, row_groups_);
    std::vector<PendingTask> embed;
    for (int64_t g = 0; g < row_groups_; ++g) {
      TaskDescriptor task = NewTask(kEmbed, 0);
      SetRows(task, g * tiles_.row_tile, std::min(batch_, (g + 1) * tiles_.row_tile));
      task.signal_counter = embed_done;
      embed.push_back({task, 2.0 * config_.hidden_size * tiles_.row_tile});
    }
    Emit(schedule, Wave::kEmbed, embed);

    LayerInput input{embed_done, static_cast<uint32_t>(row_groups_)};
    for (int64_t layer = 0; layer < config_.num_layers; ++layer) {
      WaveTasks waves;
      const LayerEnd end = BuildLayer(layer, input, waves);
      std::vector<bool> runs_qkv(num_sms_, false);
      for (Wave wave : policy.layer_waves) {
        if (wave == Wave::kAttention) {
          EmitEarlyExpertClaims(schedule, waves[static_cast<int>(Wave::kExpertGateUp)], runs_qkv);
        }
        const std::vector<bool> placed = Emit(schedule, wave, waves[static_cast<int>(wave)]);
        if (wave == Wave::kQkv) runs_qkv = placed;
      }
      if (end.join_done != kNoCounter) {
        input = {end.join_done, static_cast<uint32_t>(row_groups_)};
      } else {
        input = {end.oproj_done, end.oproj_target,   end.ffn_done, end.ffn_target,
                 true,           end.next_oproj_done};
      }
    }
    const uint32_t input_counter = input.counter0, input_target = input.target0;

    const int64_t final_layer = config_.num_layers;
    const int64_t lm_width = tiles_.lm_head_tile;
    const int64_t lm_tiles = config_.vocab_size / lm_width;
    // The last tiles go to a queue every SM claims from after its static ones.
    const int64_t lm_claimed = std::min(lm_tiles, tiles_.lm_head_claimed_per_sm * num_sms_);
    const int64_t lm_static = lm_tiles - lm_claimed;
    const double lm_tile_bytes = 2.0 * lm_width * config_.hidden_size;
    const uint32_t lm_done = policy.include_sampling
                                 ? counters_.Add(Wave::kLmHead, static_cast<int32_t>(final_layer),
                                                 1, static_cast<uint32_t>(lm_tiles))
                                 : kNoCounter;
    auto lm_head_task = [&](Opcode opcode) {
      TaskDescriptor task = NewTask(opcode, final_layer);
      task.k_end = static_cast<uint32_t>(config_.hidden_size);
      SetRows(task, 0, batch_);
      SetWait(task, 0, input_counter, input_target);
      return task;
    };
    std::vector<PendingTask> lm_head;
    for (int64_t tile = 0; tile < lm_static; ++tile) {
      TaskDescriptor task = lm_head_task(kLmHead);
      SetTile(task, tile, tile * lm_width, lm_width);
      task.signal_counter = lm_done;
      if (batch_ <= tiles_.prime_lm_head_max_batch) task.flags |= kFlagPrimeWeights;
      lm_head.push_back({task, lm_tile_bytes});
    }
    if (lm_claimed > 0) {
      const uint32_t queue = AddQueue(QueueKind::kLmHead, static_cast<int32_t>(final_layer),
                                      static_cast<uint32_t>(lm_claimed));
      for (int64_t c = 0; c < num_sms_; ++c) {
        TaskDescriptor task = lm_head_task(kLmHeadClaim);
        task.arg[kArgQueue] = queue;
        task.arg[kArgTiles] = static_cast<uint32_t>(lm_claimed);
        task.arg[kArgOutBegin] = static_cast<uint32_t>(lm_static * lm_width);
        task.arg[kArgItemWaitBase] = kNoCounter;
        task.arg[kArgItemSignalBase] = lm_done;
        lm_head.push_back({task, lm_tile_bytes * lm_claimed / num_sms_});
      }
    }
    Emit(schedule, Wave::kLmHead, lm_head);
    if (policy.include_sampling) {
      EmitSampleTeams(schedule, lm_done, static_cast<uint32_t>(lm_tiles));
    }

    schedule.counters = counters_.Take();
    schedule.queues = std::move(queues_);
    const uint64_t rows = static_cast<uint64_t>(batch_);
    // attn_out and ffn_out: a block of rows per layer.
    const uint64_t layer_blocks =
        rows * config_.hidden_size * sizeof(float) * static_cast<uint64_t>(config_.num_layers);
    schedule.zero_before_step = {
        {kScratchAttnOut, layer_blocks},
        {kScratchFfnOut, layer_blocks},
        {kScratchRouterLogits,
         rows * config_.num_experts * sizeof(float) * static_cast<uint64_t>(config_.num_layers)},
        {kScratchExpertCounts,
         static_cast<uint64_t>(config_.num_layers * config_.num_experts) * sizeof(uint32_t)},
        {kScratchQueueHeads, schedule.queues.size() * sizeof(uint32_t)},
    };
    if (TopKInClaimsAt(tiles_, batch_)) {
      schedule.zero_before_step.push_back(
          {kScratchPublishedPicks, rows * config_.num_experts_per_token * sizeof(uint64_t) *
                                       static_cast<uint64_t>(config_.num_layers)});
    }
    return schedule;
  }

 private:
  // Whether layer `layer`'s QKV and router tasks compute its input norm themselves: a MoE layer
  // after the first, when the tile shapes ask for it (small batches: every such task reads the
  // previous layer's three fp32 rows of each batch row).
  bool FusesNorm(int64_t layer) const {
    return FusesNormAt(tiles_, batch_) && layer >= 1 && layer < config_.num_layers &&
           config_.layers[layer].ffn == FfnKind::kMoe;
  }

  // The waits and flags of a task that reads the layer's input.
  static void SetInputWaits(TaskDescriptor& task, const LayerInput& input) {
    SetWait(task, 0, input.counter0, input.target0);
    SetWait(task, 1, input.counter1, input.target1);
    if (input.fused_norm) task.flags |= kFlagFusedNorm;
  }

  // Fills `waves` with layer `layer`'s tasks, whose input is ready when `input` says.
  LayerEnd BuildLayer(int64_t layer, const LayerInput& input, WaveTasks& waves) {
    const LayerSpec& spec = config_.layers[layer];
    const int32_t l = static_cast<int32_t>(layer);
    const int64_t kv_heads = config_.num_kv_heads;
    const int64_t head_dim = config_.head_dim;
    const int64_t hidden = config_.hidden_size;
    auto wave = [&](Wave w) -> std::vector<PendingTask>& { return waves[static_cast<int>(w)]; };

    // QKV: tiles of KV head h signal qkv_done[h].
    const uint32_t qkv_per_head = QkvTilesPerKvHead(config_, tiles_);
    const uint32_t qkv_done = counters_.Add(Wave::kQkv, l, kv_heads, qkv_per_head);
    const int64_t part_width[3] = {config_.q_width(), config_.kv_width(), config_.kv_width()};
    const int64_t part_offset[3] = {0, config_.q_width(), config_.q_width() + config_.kv_width()};
    for (uint32_t part = 0; part < 3; ++part) {
      for (int64_t tile = 0; tile < part_width[part] / tiles_.qkv_tile; ++tile) {
        const int64_t head = tile * tiles_.qkv_tile / head_dim;
        const int64_t kv_head = part == 0 ? head / heads_per_group_ : head;
        TaskDescriptor task = NewTask(kQkv, layer);
        SetTile(task, tile, part_offset[part] + tile * tiles_.qkv_tile, tiles_.qkv_tile);
        task.k_end = static_cast<uint32_t>(hidden);
        SetRows(task, 0, batch_);
        task.signal_counter = qkv_done + static_cast<uint32_t>(kv_head);
        task.flags = spec.uses_rope ? uint32_t{kFlagRope} : 0u;
        if (batch_ <= tiles_.prime_qkv_max_batch) task.flags |= kFlagPrimeWeights;
        SetInputWaits(task, input);
        task.arg[kArgQkvPart] = part;
        task.arg[kArgKvHead] = static_cast<uint32_t>(kv_head);
        wave(Wave::kQkv).push_back({task, 2.0 * tiles_.qkv_tile * hidden});
      }
    }

    // Attention: heads_done[h] is reached when every row's output of KV head h is in attn_in.
    // Attention writes split slots and the combine of (row, KV head) merges them into attn_in;
    // a sliding layer with one split writes attn_in directly and has no combine. heads_done[h] is
    // reached when every row's output of KV head h is in attn_in.
    const bool sliding = spec.attention == AttentionKind::kSliding;
    const int64_t slots = sliding ? tiles_.sliding_splits : tiles_.full_split_slots;
    const bool combine = !sliding || slots > 1;
    const uint32_t heads_done = counters_.Add(combine ? Wave::kAttentionCombine : Wave::kAttention,
                                              l, kv_heads, static_cast<uint32_t>(batch_));
    const uint32_t split_done = combine ? counters_.Add(Wave::kAttention, l, batch_ * kv_heads,
                                                        static_cast<uint32_t>(slots), !sliding)
                                        : kNoCounter;
    const double page_bytes = 2.0 * 2.0 * kBlockTokens * head_dim;  // K and V, bf16
    if (sliding) {
      // Split s of S takes its share of the row's live window pages (the device cuts it).
      for (int64_t row = 0; row < batch_; ++row) {
        for (int64_t head = 0; head < kv_heads; ++head) {
          for (int64_t split = 0; split < slots; ++split) {
            TaskDescriptor task = NewTask(kAttention, layer);
            SetRows(task, row, row + 1);
            task.split = static_cast<uint32_t>(split);
            SetWait(task, 0, qkv_done + static_cast<uint32_t>(head), qkv_per_head);
            task.signal_counter = combine
                                      ? split_done + static_cast<uint32_t>(row * kv_heads + head)
                                      : heads_done + static_cast<uint32_t>(head);
            task.flags = kFlagSliding;
            task.arg[kArgKvHead] = static_cast<uint32_t>(head);
            task.arg[kArgWindow] = static_cast<uint32_t>(spec.window_tokens);
            task.arg[kArgSplits] = static_cast<uint32_t>(slots);
            wave(Wave::kAttention)
                .push_back({task, page_bytes * bucket_.max_sliding_pages / slots});
          }
        }
      }
    } else {
      const uint32_t queue =
          AddQueue(QueueKind::kAttention, l, AttentionQueueCapacity(config_, batch_, tiles_));
      const double share = page_bytes * bucket_.max_full_pages * batch_ * kv_heads /
                           static_cast<double>(tiles_.attention_claimers);
      for (int64_t c = 0; c < tiles_.attention_claimers; ++c) {
        TaskDescriptor task = NewTask(kAttentionClaim, layer);
        SetRows(task, 0, batch_);
        task.arg[kArgQueue] = queue;
        task.arg[kArgItemWaitBase] = qkv_done;
        task.arg[kArgItemSignalBase] = split_done;
        task.arg[kArgSplits] = static_cast<uint32_t>(slots);
        wave(Wave::kAttention).push_back({task, share});
      }
    }
    for (int64_t row = 0; combine && row < batch_; ++row) {
      for (int64_t head = 0; head < kv_heads; ++head) {
        TaskDescriptor task = NewTask(kAttentionCombine, layer);
        SetRows(task, row, row + 1);
        SetWait(task, 0, split_done + static_cast<uint32_t>(row * kv_heads + head),
                static_cast<uint32_t>(slots));
        task.signal_counter = heads_done + static_cast<uint32_t>(head);
        task.flags = sliding ? uint32_t{kFlagSliding} : 0u;
        task.arg[kArgKvHead] = static_cast<uint32_t>(head);
        task.arg[kArgWindow] = sliding ? static_cast<uint32_t>(spec.window_tokens) : 0;
        task.arg[kArgSplits] = static_cast<uint32_t>(slots);
        wave(Wave::kAttentionCombine).push_back({task, 4.0 * slots * heads_per_group_ * head_dim});
      }
    }

    // O-proj: split s = KV head s (the query heads it reads), waits only for that head.
    const int64_t oproj_tiles = hidden / tiles_.oproj_tile;
    const uint32_t oproj_target =
        static_cast<uint32_t>(oproj_tiles * kv_heads + (input.fused_norm ? row_groups_ : 0));
    const uint32_t oproj_done =
        input.fused_norm ? input.oproj_done : counters_.Add(Wave::kOProj, l, 1, oproj_target);
    const int64_t group_width = heads_per_group_ * head_dim;
    for (int64_t tile = 0; tile < oproj_tiles; ++tile) {
      for (int64_t head = 0; head < kv_heads; ++head) {
        TaskDescriptor task = NewTask(kOProj, layer);
        SetTile(task, tile, tile * tiles_.oproj_tile, tiles_.oproj_tile);
        task.split = static_cast<uint32_t>(head);
        task.k_begin = static_cast<uint32_t>(head * group_width);
        task.k_end = static_cast<uint32_t>((head + 1) * group_width);
        SetRows(task, 0, batch_);
        SetWait(task, 0, heads_done + static_cast<uint32_t>(head), static_cast<uint32_t>(batch_));
        task.signal_counter = oproj_done;
        task.flags = kFlagAccumulate;
        wave(Wave::kOProj).push_back({task, 2.0 * tiles_.oproj_tile * group_width});
      }
    }

    const uint32_t ffn_done = spec.ffn == FfnKind::kDense ? BuildDense(layer, input, waves)
                                                          : BuildMoe(layer, input, waves);
    const uint32_t ffn_target =
        spec.ffn == FfnKind::kDense
            ? static_cast<uint32_t>(hidden / tiles_.dense_down_tile * tiles_.dense_down_splits)
            : static_cast<uint32_t>(batch_);

    // Join: residual += attn_out + ffn_out, then the next layer's (or the final) norm. When the
    // next layer fuses its norm, the join writes the residual only, off the critical path, and
    // arrives on the next layer's O-proj counter (the next join and the layer after read it).
    LayerEnd end{kNoCounter, oproj_done, oproj_target, ffn_done, ffn_target};
    const bool next_fused = FusesNorm(layer + 1);
    if (next_fused) {
      end.next_oproj_done = counters_.Add(
          Wave::kOProj, l + 1, 1, static_cast<uint32_t>(oproj_tiles * kv_heads + row_groups_));
      counters_.JoinedByPreviousLayer(end.next_oproj_done);
    } else {
      end.join_done = counters_.Add(Wave::kJoin, l, 1, static_cast<uint32_t>(row_groups_));
    }
    for (int64_t g = 0; g < row_groups_; ++g) {
      TaskDescriptor task = NewTask(kJoin, layer);
      SetRows(task, g * tiles_.row_tile, std::min(batch_, (g + 1) * tiles_.row_tile));
      SetWait(task, 0, oproj_done, oproj_target);
      SetWait(task, 1, ffn_done, ffn_target);
      task.signal_counter = next_fused ? end.next_oproj_done : end.join_done;
      task.flags = layer + 1 == config_.num_layers ? uint32_t{kFlagFinalNorm}
                   : next_fused                    ? uint32_t{kFlagResidualOnly}
                                                   : 0u;
      wave(Wave::kJoin).push_back({task, 4.0 * 4.0 * hidden * tiles_.row_tile});
    }
    return end;
  }

  // Layer-0 style dense SwiGLU; returns the counter ffn_out is complete on.
  uint32_t BuildDense(int64_t layer, const LayerInput& input, WaveTasks& waves) {
    const int32_t l = static_cast<int32_t>(layer);
    const int64_t width = config_.layers[layer].ffn_intermediate_size;
    const int64_t hidden = config_.hidden_size;
    const int64_t up_tiles = width / tiles_.dense_up_tile;
    const int64_t splits = tiles_.dense_down_splits;
    const int64_t tiles_per_split = up_tiles / splits;
    const uint32_t hidden_done =
        counters_.Add(Wave::kDenseGateUp, l, splits, static_cast<uint32_t>(tiles_per_split));
    for (int64_t tile = 0; tile < up_tiles; ++tile) {
      TaskDescriptor task = NewTask(kDenseGateUp, layer);
      SetTile(task, tile, tile * tiles_.dense_up_tile, tiles_.dense_up_tile);
      task.k_end = static_cast<uint32_t>(hidden);
      SetRows(task, 0, batch_);
      SetInputWaits(task, input);  // dense layers never fuse their norm (FusesNorm)
      task.signal_counter = hidden_done + static_cast<uint32_t>(tile / tiles_per_split);
      waves[static_cast<int>(Wave::kDenseGateUp)].push_back(
          {task, 2.0 * 2.0 * tiles_.dense_up_tile * hidden});
    }
    const int64_t down_tiles = hidden / tiles_.dense_down_tile;
    const uint32_t ffn_done =
        counters_.Add(Wave::kDenseDown, l, 1, static_cast<uint32_t>(down_tiles * splits));
    const int64_t split_width = tiles_per_split * tiles_.dense_up_tile;
    for (int64_t tile = 0; tile < down_tiles; ++tile) {
      for (int64_t split = 0; split < splits; ++split) {
        TaskDescriptor task = NewTask(kDenseDown, layer);
        SetTile(task, tile, tile * tiles_.dense_down_tile, tiles_.dense_down_tile);
        task.split = static_cast<uint32_t>(split);
        task.k_begin = static_cast<uint32_t>(split * split_width);
        task.k_end = static_cast<uint32_t>((split + 1) * split_width);
        SetRows(task, 0, batch_);
        SetWait(task, 0, hidden_done + static_cast<uint32_t>(split),
                static_cast<uint32_t>(tiles_per_split));
        task.signal_counter = ffn_done;
        task.flags = kFlagAccumulate;
        waves[static_cast<int>(Wave::kDenseDown)].push_back(
            {task, 2.0 * tiles_.dense_down_tile * split_width});
      }
    }
    return ffn_done;
  }

  // Router -> top-k -> finalize -> claimed expert gate/up and down -> per-row combine; returns the
  // counter ffn_out is complete on (one arrival per row).
  uint32_t BuildMoe(int64_t layer, const LayerInput& input, WaveTasks& waves) {
    const int32_t l = static_cast<int32_t>(layer);
    const int64_t hidden = config_.hidden_size;
    auto wave = [&](Wave w) -> std::vector<PendingTask>& { return waves[static_cast<int>(w)]; };

    const int64_t router_tiles = config_.num_experts / tiles_.router_tile;
    const int64_t router_splits = tiles_.router_splits;
    const uint32_t router_done =
        counters_.Add(Wave::kRouter, l, 1, static_cast<uint32_t>(router_tiles * router_splits));
    const int64_t split_width = hidden / router_splits;
    for (int64_t tile = 0; tile < router_tiles; ++tile) {
      for (int64_t split = 0; split < router_splits; ++split) {
        TaskDescriptor task = NewTask(kRouter, layer);
        SetTile(task, tile, tile * tiles_.router_tile, tiles_.router_tile);
        task.split = static_cast<uint32_t>(split);
        task.k_begin = static_cast<uint32_t>(split * split_width);
        task.k_end = static_cast<uint32_t>((split + 1) * split_width);
        SetRows(task, 0, batch_);
        task.signal_counter = router_done;
        task.flags = kFlagAccumulate | (tiles_.prime_router != 0 ? kFlagPrimeWeights : 0u);
        SetInputWaits(task, input);
        wave(Wave::kRouter).push_back({task, 2.0 * tiles_.router_tile * split_width});
      }
    }

    // The finalize waits for the top-k tasks, or with topk_in_finalize runs the top-k itself; by
    // pick, the claims wait for the top-k tasks and there is no finalize, or, where
    // TopKInClaimsAt, the claims run the top-k and wait for the routers.
    const bool by_pick = tiles_.pick_items != 0;
    const bool topk_in_finalize = !by_pick && tiles_.topk_in_finalize != 0;
    const bool topk_in_claims = TopKInClaimsAt(tiles_, batch_);
    const uint32_t claim_flags =
        by_pick ? kFlagPickItems | (topk_in_claims ? kFlagTopKInClaims : 0u) : 0u;
    uint32_t routed = router_done;
    uint32_t routed_target = static_cast<uint32_t>(router_tiles * router_splits);
    if (!topk_in_finalize && !topk_in_claims) {
      routed = counters_.Add(Wave::kTopK, l, 1, static_cast<uint32_t>(row_groups_));
      routed_target = static_cast<uint32_t>(row_groups_);
      for (int64_t g = 0; g < row_groups_; ++g) {
        TaskDescriptor task = NewTask(kTopK, layer);
        SetRows(task, g * tiles_.row_tile, std::min(batch_, (g + 1) * tiles_.row_tile));
        SetWait(task, 0, router_done, static_cast<uint32_t>(router_tiles * router_splits));
        task.signal_counter = routed;
        if (by_pick) task.flags = kFlagPickItems;
        wave(Wave::kTopK).push_back({task, 4.0 * config_.num_experts * tiles_.row_tile});
      }
    }

    const uint32_t up_tiles = ExpertGateUpTiles(config_, tiles_);
    const uint32_t down_tiles = ExpertDownTiles(config_, tiles_);
    const int64_t picks = batch_ * config_.num_experts_per_token;
    const uint32_t max_blocks =
        by_pick ? static_cast<uint32_t>(picks) : MaxExpertBlocks(config_, batch_, tiles_);
    const uint32_t gate_up_queue = AddQueue(QueueKind::kExpertGateUp, l, max_blocks * up_tiles);
    const uint32_t down_queue = AddQueue(QueueKind::kExpertDown, l, max_blocks * down_tiles);

    // What the claims wait for: the finalize's items, or by pick the top-k's ids.
    uint32_t items_ready = routed, items_target = routed_target;
    if (!by_pick) {
      items_ready = counters_.Add(Wave::kMoeFinalize, l, 1, 1);
      items_target = 1;
      TaskDescriptor finalize = NewTask(kMoeFinalize, layer);
      SetRows(finalize, 0, batch_);
      SetWait(finalize, 0, routed, routed_target);
      finalize.signal_counter = items_ready;
      if (topk_in_finalize) finalize.flags = kFlagWithTopK;
      finalize.arg[kArgQueue] = gate_up_queue;
      finalize.arg[kArgQueue2] = down_queue;
      finalize.arg[kArgTileRows] = static_cast<uint32_t>(tiles_.expert_rows);
      finalize.arg[kArgTiles] = up_tiles;
      finalize.arg[kArgTiles2] = down_tiles;
      wave(Wave::kMoeFinalize)
          .push_back({finalize, 4.0 * config_.num_experts * (topk_in_finalize ? batch_ + 1 : 1)});
    }

    // Gate/up arrivals per (expert, row block), or by pick per pick.
    const int64_t up_units =
        by_pick ? picks
                : static_cast<int64_t>(config_.num_experts) * ExpertRowBlocks(batch_, tiles_);
    const uint32_t up_done = counters_.Add(Wave::kExpertGateUp, l, up_units, up_tiles, true);
    const uint32_t rows_done =
        counters_.Add(Wave::kExpertDown, l, batch_,
                      static_cast<uint32_t>(config_.num_experts_per_token) * down_tiles, true);
    const double expert_bytes = 2.0 * 3.0 * config_.expert_intermediate_size * hidden;
    const double claim_share =
        expert_bytes *
        std::min<int64_t>(config_.num_experts, batch_ * config_.num_experts_per_token) /
        static_cast<double>(tiles_.expert_claimers);
    for (int64_t c = 0; c < tiles_.expert_claimers; ++c) {
      TaskDescriptor task = NewTask(kExpertGateUpClaim, layer);
      SetRows(task, 0, batch_);
      SetWait(task, 0, items_ready, items_target);
      task.arg[kArgQueue] = gate_up_queue;
      task.arg[kArgItemWaitBase] = kNoCounter;
      task.arg[kArgItemSignalBase] = up_done;
      task.arg[kArgTileRows] = static_cast<uint32_t>(tiles_.expert_rows);
      if (by_pick) {
        task.flags = claim_flags;
        task.arg[kArgTiles] = up_tiles;
      }
      wave(Wave::kExpertGateUp).push_back({task, claim_share * 2.0 / 3.0});
    }
    for (int64_t c = 0; c < tiles_.expert_claimers; ++c) {
      TaskDescriptor task = NewTask(kExpertDownClaim, layer);
      SetRows(task, 0, batch_);
      SetWait(task, 0, items_ready, items_target);
      task.arg[kArgQueue] = down_queue;
      task.arg[kArgItemWaitBase] = up_done;
      task.arg[kArgItemSignalBase] = rows_done;
      task.arg[kArgTileRows] = static_cast<uint32_t>(tiles_.expert_rows);
      if (by_pick) {
        task.flags = claim_flags;
        task.arg[kArgTiles] = down_tiles;
        task.arg[kArgTiles2] = up_tiles;
      }
      wave(Wave::kExpertDown).push_back({task, claim_share / 3.0});
    }

    const uint32_t ffn_done = counters_.Add(Wave::kMoeCombine, l, 1, static_cast<uint32_t>(batch_));
    for (int64_t row = 0; row < batch_; ++row) {
      TaskDescriptor task = NewTask(kMoeCombine, layer);
      SetRows(task, row, row + 1);
      SetWait(task, 0, rows_done + static_cast<uint32_t>(row),
              static_cast<uint32_t>(config_.num_experts_per_token) * down_tiles);
      task.signal_counter = ffn_done;
      wave(Wave::kMoeCombine).push_back({task, 4.0 * config_.num_experts_per_token * hidden});
    }
    return ffn_done;
  }

  uint32_t AddQueue(QueueKind kind, int32_t layer, uint32_t capacity) {
    queues_.push_back(QueueInfo{kind, layer, capacity});
    return static_cast<uint32_t>(queues_.size() - 1);
  }

  // Appends a wave to the global order and places each task on an SM (of the wave's share);
  // returns which SMs got one.
  std::vector<bool> Emit(Schedule& schedule, Wave wave, std::vector<PendingTask>& tasks) {
    std::vector<bool> placed(num_sms_, false);
    int64_t first = 0, last = num_sms_;
    if (auto share = wave_sms_.find(wave); share != wave_sms_.end()) {
      // Both ends rounded the same way, so shares that meet at a fraction divide the SMs.
      first = std::min<int64_t>(std::llround(share->second.begin * num_sms_), num_sms_ - 1);
      last = std::clamp<int64_t>(std::llround(share->second.end * num_sms_), first + 1, num_sms_);
    }
    for (PendingTask& pending : tasks) {
      pending.task.arg[kArgSequence] = sequence_++;
      int64_t sm = 0;
      if (placement_ == Placement::kRoundRobin) {
        sm = first + cursor_++ % (last - first);
      } else {
        sm = std::min_element(sm_cost_.begin() + first, sm_cost_.begin() + last) - sm_cost_.begin();
      }
      sm_cost_[sm] += pending.cost + kTaskOverheadBytes;
      schedule.sm_tasks[sm].push_back(pending.task);
      placed[sm] = true;
    }
    return placed;
  }

  // With tiles.early_expert_items, each SM that holds no QKV task of the layer gets, where the
  // attention wave begins, a copy of the layer's gate/up claim that stops after that many items:
  // such an SM would otherwise wait from its router task until the QKV tiles end for its
  // attention task. The attention it then starts later has slack: its O-proj runs after the down
  // claims. Only gate/up claims, whose items never wait (the verifier requires that of a bounded
  // claim).
  void EmitEarlyExpertClaims(Schedule& schedule, const std::vector<PendingTask>& gate_up_claims,
                             const std::vector<bool>& runs_qkv) {
    if (tiles_.early_expert_items == 0 || gate_up_claims.empty()) return;
    PendingTask early = gate_up_claims.front();
    early.task.arg[kArgMaxItems] = static_cast<uint32_t>(tiles_.early_expert_items);
    const double item_bytes =
        2.0 * 2.0 * tiles_.expert_up_tile * config_.hidden_size * tiles_.early_expert_items;
    for (int64_t sm = 0; sm < num_sms_; ++sm) {
      if (runs_qkv[sm]) continue;
      early.task.arg[kArgSequence] = sequence_++;
      sm_cost_[sm] += item_bytes + kTaskOverheadBytes;
      schedule.sm_tasks[sm].push_back(early.task);
    }
  }

  // One kSample task per member (row r, rank k) of each row's team, after every other task. A
  // team meets at barriers of its own, outside the counters, so with more than one member its
  // members must be co-resident and hold up nothing: member (r, k) is the last task of SM
  // r * T + k. A team of one has no barrier and goes on SM r % num_sms.
  void EmitSampleTeams(Schedule& schedule, uint32_t lm_done, uint32_t lm_tiles) {
    const int64_t team = SampleTeamSize(tiles_, batch_, num_sms_);
    for (int64_t row = 0; row < batch_; ++row) {
      for (int64_t rank = 0; rank < team; ++rank) {
        TaskDescriptor task = NewTask(kSample, config_.num_layers);
        SetRows(task, row, row + 1);
        SetWait(task, 0, lm_done, lm_tiles);
        task.arg[kArgTeamRank] = static_cast<uint32_t>(rank);
        task.arg[kArgTeamSize] = static_cast<uint32_t>(team);
        task.arg[kArgSequence] = sequence_++;
        const int64_t sm = team > 1 ? row * team + rank : row % num_sms_;
        schedule.sm_tasks[sm].push_back(task);
      }
    }
  }

  // A task's fixed cost in byte-equivalents (waits, descriptor fetch, pipeline fill).
  static constexpr double kTaskOverheadBytes = 16384;

  const ModelConfig& config_;
  int64_t batch_;
  ContextBucket bucket_;
  int64_t num_sms_;
  TileShapes tiles_;
  int64_t row_groups_ = 0;
  int64_t heads_per_group_ = 0;
  CounterTable counters_;
  std::vector<QueueInfo> queues_;
  Placement placement_ = Placement::kRoundRobin;
  std::map<Wave, SmShare> wave_sms_;
  std::vector<double> sm_cost_;
  int64_t cursor_ = 0;
  uint32_t sequence_ = 0;
};

}  // namespace

Schedule BuildSchedule(const ModelConfig& config, int64_t batch, const ContextBucket& bucket,
                       int64_t num_sms, const TileShapes& tiles, const SchedulePolicy& policy) {
  if (num_sms < 1) throw Error("num_sms must be at least 1, got " + std::to_string(num_sms));
  if (config.num_kv_heads < 1 || config.num_heads % config.num_kv_heads != 0) {
    throw Error("the megakernel needs num_heads to be a multiple of num_kv_heads");
  }
  ValidateTileShapes(tiles, config, batch);
  policy.Validate();
  return Builder(config, batch, bucket, num_sms, tiles).Build(policy);
}

}  // namespace mkserve::megakernel
