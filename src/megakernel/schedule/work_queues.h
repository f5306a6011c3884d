// The work only known at run time, as queue items: full-attention splits (from the rows' live
// lengths, built on the host every step) and expert tiles (from routing; kMoeFinalize builds them
// on the device, or the claims by pick, and ExpertItemsForRouting is their host statement, used by
// the verifier and tests).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "megakernel/schedule/tile_shapes.h"
#include "megakernel/task_abi.h"
#include "model/model_config.h"

namespace mkserve::megakernel {

// QKV tiles of one KV head: its query heads' Q tiles plus its K and V tiles.
uint32_t QkvTilesPerKvHead(const ModelConfig& config, const TileShapes& tiles);

uint32_t AttentionQueueCapacity(const ModelConfig& config, int64_t batch, const TileShapes& tiles);

// Items of one step's full-attention queue. live_lengths[r] = tokens row r attends to in a full
// layer (its position + 1), each in [1, max_context_tokens]; otherwise throws naming the row.
// A row gets between 1 and full_split_slots splits, about in proportion to its pages, so the
// (row, KV head, split) units spread evenly over num_sms.
std::vector<AttentionWorkItem> AttentionItemsForLengths(const ModelConfig& config,
                                                        std::span<const int64_t> live_lengths,
                                                        int64_t max_context_tokens,
                                                        const TileShapes& tiles, int64_t num_sms);

// Row blocks per expert the counters are laid out for: ceil(batch / expert_rows).
uint32_t ExpertRowBlocks(int64_t batch, const TileShapes& tiles);
// Most (expert, row block) pairs any routing of `batch` rows can occupy.
uint32_t MaxExpertBlocks(const ModelConfig& config, int64_t batch, const TileShapes& tiles);
uint32_t ExpertGateUpTiles(const ModelConfig& config, const TileShapes& tiles);
uint32_t ExpertDownTiles(const ModelConfig& config, const TileShapes& tiles);

struct ExpertQueues {
  std::vector<ExpertWorkItem> gate_up;
  std::vector<ExpertWorkItem> down;
  std::vector<int32_t> routed_row;   // bucket position -> batch row
  std::vector<int32_t> routed_slot;  // bucket position -> which of the row's top-k
  std::vector<int32_t> bucket_of;    // [row * top_k + k] -> bucket position
};

// routing[row * top_k + k] = the k-th expert of the row (distinct within a row, < num_experts).
// Buckets are expert-major; within an expert, rows in batch order (the device fills a bucket in
// atomic order, which changes row positions but not the items). With tiles.pick_items, the items
// the claims build by pick instead (kFlagPickItems): position row * top_k + k, one row each.
ExpertQueues ExpertItemsForRouting(const ModelConfig& config, int64_t batch,
                                   std::span<const int32_t> routing, const TileShapes& tiles);

}  // namespace mkserve::megakernel
