#include "megakernel/schedule/work_queues.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <random>

#include "common/error.h"
#include "megakernel/schedule/context_bucket.h"
#include "model/presets.h"

namespace mkserve::megakernel {
namespace {

TEST(AttentionItemsTest, SplitsCoverEachRowsPagesAndWeightsFillTheSlots) {
  const ModelConfig config = NmcPreset(4);
  const ContextBucket bucket = BucketForContext(config, 65536);
  std::mt19937 random(7);
  for (int64_t batch : {1, 2, 5, 17, 64}) {
    const TileShapes tiles = ChooseTileShapes(config, batch, bucket, 132);
    std::vector<int64_t> lengths;
    for (int64_t r = 0; r < batch; ++r) {
      lengths.push_back(std::uniform_int_distribution<int64_t>(1, 65536)(random));
    }
    const auto items = AttentionItemsForLengths(config, lengths, 65536, tiles, 132);
    EXPECT_LE(items.size(), AttentionQueueCapacity(config, batch, tiles));
    std::map<std::pair<uint32_t, uint32_t>, std::vector<AttentionWorkItem>> by_unit;
    for (const AttentionWorkItem& item : items) by_unit[{item.row, item.kv_head}].push_back(item);
    ASSERT_EQ(static_cast<int64_t>(by_unit.size()), batch * 4);
    for (const auto& [unit, splits] : by_unit) {
      uint32_t page = 0, weight = 0;
      for (size_t s = 0; s < splits.size(); ++s) {
        EXPECT_EQ(splits[s].split, s);
        EXPECT_EQ(splits[s].page_begin, page);
        EXPECT_GT(splits[s].page_end, splits[s].page_begin);  // no empty split
        page = splits[s].page_end;
        weight += splits[s].arrive_weight;
        EXPECT_EQ(splits[s].wait_unit, unit.second);
        EXPECT_EQ(splits[s].wait_target, 20u);
        EXPECT_EQ(splits[s].signal_unit, unit.first * 4 + unit.second);
      }
      EXPECT_EQ(page, (lengths[unit.first] + 63) / 64);
      EXPECT_EQ(weight, tiles.full_split_slots);
    }
  }
}

TEST(AttentionItemsTest, ALengthOutsideTheBucketIsRejectedNamingTheRow) {
  const ModelConfig config = NmcPreset(4);
  const ContextBucket bucket = BucketForContext(config, 1024);
  const TileShapes tiles = ChooseTileShapes(config, 2, bucket, 132);
  const std::vector<int64_t> lengths = {10, 1025};
  try {
    AttentionItemsForLengths(config, lengths, 1024, tiles, 132);
    FAIL() << "a length over the bucket was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("row 1"), std::string::npos) << e.what();
  }
  const std::vector<int64_t> empty_row = {0, 3};
  EXPECT_THROW(AttentionItemsForLengths(config, empty_row, 1024, tiles, 132), Error);
}

TEST(ExpertItemsTest, ItemsFollowRoutingAndFitTheCapacityBound) {
  const ModelConfig config = NmcPreset(4);
  std::mt19937 random(11);
  for (int64_t batch : {1, 3, 8, 9, 33, 64}) {
    const TileShapes tiles = ChooseTileShapes(config, batch, BucketForContext(config, 4096), 132);
    const uint32_t capacity_blocks = MaxExpertBlocks(config, batch, tiles);
    for (int trial = 0; trial < 20; ++trial) {
      // Trial 0: every row on the same experts; others: random, sometimes from a narrow pool.
      const int64_t pool_size = trial == 0 ? 8 : (trial % 2 ? 128 : 9 + trial);
      std::vector<int32_t> routing;
      for (int64_t r = 0; r < batch; ++r) {
        std::vector<int32_t> pool(pool_size);
        std::iota(pool.begin(), pool.end(), 0);
        if (trial > 0) std::shuffle(pool.begin(), pool.end(), random);
        routing.insert(routing.end(), pool.begin(), pool.begin() + 8);
      }
      const ExpertQueues queues = ExpertItemsForRouting(config, batch, routing, tiles);
      const uint32_t up_tiles = ExpertGateUpTiles(config, tiles);
      ASSERT_EQ(queues.gate_up.size() % up_tiles, 0u);
      EXPECT_LE(queues.gate_up.size() / up_tiles, capacity_blocks);
      int64_t routed_rows = 0;
      for (const ExpertWorkItem& item : queues.down) {
        EXPECT_EQ(item.wait_target, up_tiles);
        EXPECT_EQ(item.signal_count, item.row_count);
        if (item.tile == 0) routed_rows += item.row_count;
        for (uint32_t i = 0; i < item.row_count; ++i) {
          const int32_t row = queues.routed_row[item.bucket_begin + i];
          const int32_t k = queues.routed_slot[item.bucket_begin + i];
          EXPECT_EQ(routing[row * 8 + k], static_cast<int32_t>(item.expert));
        }
      }
      EXPECT_EQ(routed_rows, batch * 8);
    }
  }
}

// By pick, item i of a queue is pick i / tiles, tile i % tiles, one row at bucket position = the
// pick, in the order the device's PickRecord builds them; bad routing is still refused.
TEST(ExpertItemsTest, ItemsByPickAreOnePickEachInPickOrder) {
  const ModelConfig config = NmcPreset(4);
  for (int64_t batch : {1, 2, 5}) {
    TileShapes tiles = ChooseTileShapes(config, batch, BucketForContext(config, 4096), 132);
    tiles.pick_items = 1;
    std::vector<int32_t> routing;
    for (int64_t r = 0; r < batch; ++r) {
      for (int32_t k = 0; k < 8; ++k)
        routing.push_back((k * 7 + 3 * static_cast<int32_t>(r)) % 128);
    }
    const ExpertQueues queues = ExpertItemsForRouting(config, batch, routing, tiles);
    const uint32_t up_tiles = ExpertGateUpTiles(config, tiles);
    const uint32_t down_tiles = ExpertDownTiles(config, tiles);
    ASSERT_EQ(queues.gate_up.size(), batch * 8 * up_tiles);
    ASSERT_EQ(queues.down.size(), batch * 8 * down_tiles);
    for (size_t i = 0; i < queues.gate_up.size(); ++i) {
      const ExpertWorkItem& item = queues.gate_up[i];
      const uint32_t a = static_cast<uint32_t>(i / up_tiles);
      EXPECT_EQ(item.expert, static_cast<uint32_t>(routing[a]));
      EXPECT_EQ(item.tile, i % up_tiles);
      EXPECT_EQ(item.bucket_begin, a);
      EXPECT_EQ(item.row_count, 1u);
      EXPECT_EQ(item.signal_unit, a);
      EXPECT_EQ(item.wait_unit, kNoCounter);
    }
    for (size_t i = 0; i < queues.down.size(); ++i) {
      const ExpertWorkItem& item = queues.down[i];
      const uint32_t a = static_cast<uint32_t>(i / down_tiles);
      EXPECT_EQ(item.tile, i % down_tiles);
      EXPECT_EQ(item.wait_unit, a);
      EXPECT_EQ(item.wait_target, up_tiles);
      EXPECT_EQ(item.signal_count, 1u);
    }
    for (int64_t a = 0; a < batch * 8; ++a) {
      EXPECT_EQ(queues.routed_row[a], a / 8);
      EXPECT_EQ(queues.routed_slot[a], a % 8);
      EXPECT_EQ(queues.bucket_of[a], a);
    }
    std::vector<int32_t> repeated = routing;
    repeated[1] = repeated[0];
    EXPECT_THROW(ExpertItemsForRouting(config, batch, repeated, tiles), Error);
  }
}

TEST(ExpertItemsTest, BadRoutingIsRejected) {
  const ModelConfig config = NmcPreset(4);
  const TileShapes tiles = ChooseTileShapes(config, 1, BucketForContext(config, 4096), 132);
  const std::vector<int32_t> repeated = {1, 2, 3, 4, 5, 6, 7, 1};
  EXPECT_THROW(ExpertItemsForRouting(config, 1, repeated, tiles), Error);
  const std::vector<int32_t> outside = {1, 2, 3, 4, 5, 6, 7, 128};
  EXPECT_THROW(ExpertItemsForRouting(config, 1, outside, tiles), Error);
  const std::vector<int32_t> short_row = {1, 2, 3};
  EXPECT_THROW(ExpertItemsForRouting(config, 1, short_row, tiles), Error);
}

}  // namespace
}  // namespace mkserve::megakernel
