#include "megakernel/schedule/work_queues.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"
#include "engine/kv_layout.h"

namespace mkserve::megakernel {

namespace {
int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

uint32_t QkvTilesPerKvHead(const ModelConfig& config, const TileShapes& tiles) {
  const int64_t heads_per_group = config.num_heads / config.num_kv_heads;
  return static_cast<uint32_t>((heads_per_group + 2) * config.head_dim / tiles.qkv_tile);
}

uint32_t AttentionQueueCapacity(const ModelConfig& config, int64_t batch, const TileShapes& tiles) {
  return static_cast<uint32_t>(batch * config.num_kv_heads * tiles.full_split_slots);
}

std::vector<AttentionWorkItem> AttentionItemsForLengths(const ModelConfig& config,
                                                        std::span<const int64_t> live_lengths,
                                                        int64_t max_context_tokens,
                                                        const TileShapes& tiles, int64_t num_sms) {
  std::vector<int64_t> pages;
  int64_t total_pages = 0;
  for (size_t row = 0; row < live_lengths.size(); ++row) {
    const int64_t length = live_lengths[row];
    if (length < 1 || length > max_context_tokens) {
      throw Error("row " + std::to_string(row) + " has live length " + std::to_string(length) +
                  ", outside this schedule's bucket [1, " + std::to_string(max_context_tokens) +
                  "]: select a larger bucket");
    }
    pages.push_back(CeilDiv(length, kBlockTokens));
    total_pages += pages.back();
  }
  const int64_t kv_heads = config.num_kv_heads;
  const int64_t grain = std::max(tiles.min_pages_per_split,
                                 CeilDiv(kv_heads * total_pages, std::max<int64_t>(1, num_sms)));
  const uint32_t wait_target = QkvTilesPerKvHead(config, tiles);
  const int64_t slots = tiles.full_split_slots;

  std::vector<AttentionWorkItem> items;
  for (size_t row = 0; row < pages.size(); ++row) {
    const int64_t w = pages[row];
    const int64_t rounded = (w + grain / 2) / grain;
    const int64_t splits = std::clamp<int64_t>(rounded, 1, std::min(slots, w));
    for (int64_t head = 0; head < kv_heads; ++head) {
      for (int64_t split = 0; split < splits; ++split) {
        AttentionWorkItem item{};
        item.row = static_cast<uint32_t>(row);
        item.kv_head = static_cast<uint32_t>(head);
        item.split = static_cast<uint32_t>(split);
        item.page_begin = static_cast<uint32_t>(split * w / splits);
        item.page_end = static_cast<uint32_t>((split + 1) * w / splits);
        item.wait_unit = static_cast<uint32_t>(head);
        item.wait_target = wait_target;
        item.signal_unit = static_cast<uint32_t>(row * kv_heads + head);
        item.arrive_weight = static_cast<uint32_t>(split + 1 < splits ? 1 : slots - split);
        item.signal_count = 1;
        items.push_back(item);
      }
    }
  }
  return items;
}

uint32_t ExpertRowBlocks(int64_t batch, const TileShapes& tiles) {
  return static_cast<uint32_t>(CeilDiv(batch, tiles.expert_rows));
}

uint32_t MaxExpertBlocks(const ModelConfig& config, int64_t batch, const TileShapes& tiles) {
  // With n experts used and r routed rows, sum ceil(c_e / R) <= n + (r - n) / R.
  const int64_t routed = batch * config.num_experts_per_token;
  const int64_t used = std::min(config.num_experts, routed);
  return static_cast<uint32_t>(used + (routed - used) / tiles.expert_rows);
}

uint32_t ExpertGateUpTiles(const ModelConfig& config, const TileShapes& tiles) {
  return static_cast<uint32_t>(config.expert_intermediate_size / tiles.expert_up_tile);
}

uint32_t ExpertDownTiles(const ModelConfig& config, const TileShapes& tiles) {
  return static_cast<uint32_t>(config.hidden_size / tiles.expert_down_tile);
}

namespace {

// Items by pick (TileShapes::pick_items): pick a = row * top_k + k is bucket position a; the
// items are ExpertItemByPick's, in index order, as the device's claims build them.
ExpertQueues ExpertItemsByPick(const ModelConfig& config, int64_t batch,
                               std::span<const int32_t> routing, const TileShapes& tiles) {
  const int64_t picks = batch * config.num_experts_per_token;
  const uint32_t up_tiles = ExpertGateUpTiles(config, tiles);
  const uint32_t down_tiles = ExpertDownTiles(config, tiles);
  ExpertQueues queues;
  for (int64_t a = 0; a < picks; ++a) {
    queues.routed_row.push_back(static_cast<int32_t>(a / config.num_experts_per_token));
    queues.routed_slot.push_back(static_cast<int32_t>(a % config.num_experts_per_token));
    queues.bucket_of.push_back(static_cast<int32_t>(a));
  }
  for (uint32_t i = 0; i < picks * up_tiles; ++i) {
    const auto expert = static_cast<uint32_t>(routing[i / up_tiles]);
    queues.gate_up.push_back(ExpertItemByPick(i, up_tiles, up_tiles, false, expert));
  }
  for (uint32_t i = 0; i < picks * down_tiles; ++i) {
    const auto expert = static_cast<uint32_t>(routing[i / down_tiles]);
    queues.down.push_back(ExpertItemByPick(i, down_tiles, up_tiles, true, expert));
  }
  return queues;
}

}  // namespace

ExpertQueues ExpertItemsForRouting(const ModelConfig& config, int64_t batch,
                                   std::span<const int32_t> routing, const TileShapes& tiles) {
  const int64_t top_k = config.num_experts_per_token;
  const int64_t experts = config.num_experts;
  if (static_cast<int64_t>(routing.size()) != batch * top_k) {
    throw Error("routing has " + std::to_string(routing.size()) +
                " entries, expected batch * top_k = " + std::to_string(batch * top_k));
  }
  std::vector<int64_t> count(experts, 0);
  for (int64_t row = 0; row < batch; ++row) {
    for (int64_t k = 0; k < top_k; ++k) {
      const int32_t expert = routing[row * top_k + k];
      if (expert < 0 || expert >= experts) {
        throw Error("routing of row " + std::to_string(row) + " names expert " +
                    std::to_string(expert) + ", outside [0, " + std::to_string(experts) + ")");
      }
      for (int64_t j = 0; j < k; ++j) {
        if (routing[row * top_k + j] == expert) {
          throw Error("routing of row " + std::to_string(row) + " names expert " +
                      std::to_string(expert) + " twice");
        }
      }
      ++count[expert];
    }
  }
  if (tiles.pick_items != 0) return ExpertItemsByPick(config, batch, routing, tiles);
  std::vector<int64_t> begin(experts + 1, 0);
  for (int64_t e = 0; e < experts; ++e) begin[e + 1] = begin[e] + count[e];

  ExpertQueues queues;
  queues.routed_row.assign(batch * top_k, -1);
  queues.routed_slot.assign(batch * top_k, -1);
  queues.bucket_of.assign(batch * top_k, -1);
  std::vector<int64_t> fill(begin.begin(), begin.end() - 1);
  for (int64_t row = 0; row < batch; ++row) {
    for (int64_t k = 0; k < top_k; ++k) {
      const int64_t position = fill[routing[row * top_k + k]]++;
      queues.routed_row[position] = static_cast<int32_t>(row);
      queues.routed_slot[position] = static_cast<int32_t>(k);
      queues.bucket_of[row * top_k + k] = static_cast<int32_t>(position);
    }
  }

  const uint32_t blocks_per_expert = ExpertRowBlocks(batch, tiles);
  const uint32_t up_tiles = ExpertGateUpTiles(config, tiles);
  const uint32_t down_tiles = ExpertDownTiles(config, tiles);
  for (int64_t e = 0; e < experts; ++e) {
    for (int64_t block = 0; block * tiles.expert_rows < count[e]; ++block) {
      ExpertWorkItem item{};
      item.expert = static_cast<uint32_t>(e);
      item.row_block = static_cast<uint32_t>(block);
      item.bucket_begin = static_cast<uint32_t>(begin[e] + block * tiles.expert_rows);
      item.row_count =
          static_cast<uint32_t>(std::min(tiles.expert_rows, count[e] - block * tiles.expert_rows));
      const uint32_t unit = static_cast<uint32_t>(e * blocks_per_expert + block);
      item.arrive_weight = 1;
      for (uint32_t tile = 0; tile < up_tiles; ++tile) {
        item.tile = tile;
        item.wait_unit = kNoCounter;
        item.wait_target = 0;
        item.signal_unit = unit;
        item.signal_count = 1;
        queues.gate_up.push_back(item);
      }
      for (uint32_t tile = 0; tile < down_tiles; ++tile) {
        item.tile = tile;
        item.wait_unit = unit;
        item.wait_target = up_tiles;
        item.signal_unit = kNoCounter;
        item.signal_count = item.row_count;
        queues.down.push_back(item);
      }
    }
  }
  return queues;
}

}  // namespace mkserve::megakernel
