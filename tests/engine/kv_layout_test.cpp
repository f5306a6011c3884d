#include "engine/kv_layout.h"

#include <gtest/gtest.h>

#include <limits>

#include "common/error.h"

namespace mkserve {
namespace {

ModelConfig ThreeSlidingOneFull(int64_t num_layers, int64_t window) {
  ModelConfig config;
  for (int64_t i = 0; i < num_layers; ++i) {
    LayerSpec layer;
    layer.attention = (i % 4 == 3) ? AttentionKind::kFull : AttentionKind::kSliding;
    layer.window_tokens = layer.attention == AttentionKind::kSliding ? window : 0;
    config.layers.push_back(layer);
  }
  return config;
}

TEST(KvLayoutTest, GroupsLayersAndGivesTheRestToFullAttention) {
  ModelConfig config = ThreeSlidingOneFull(8, 256);
  const int64_t per_token = 10, max_batch = 4;
  const int64_t budget = 1'000'000;
  KvLayout layout = PlanKvLayout(config, budget, per_token, max_batch);
  ASSERT_EQ(layout.num_groups(), 2);
  const KvGroup& sliding = layout.groups[0];
  const KvGroup& full = layout.groups[1];
  EXPECT_EQ(sliding.attention, AttentionKind::kSliding);
  EXPECT_EQ(sliding.window_tokens, 256);
  EXPECT_EQ(sliding.layer_ids, (std::vector<int32_t>{0, 1, 2, 4, 5, 6}));
  EXPECT_EQ(full.layer_ids, (std::vector<int32_t>{3, 7}));
  // 256-token window = 4 blocks, +1 for alignment, +1 slack, per sequence.
  EXPECT_EQ(sliding.num_blocks, max_batch * 6);
  int64_t sliding_bytes = sliding.num_blocks * 64 * per_token * 6;
  EXPECT_EQ(full.num_blocks, (budget - sliding_bytes) / (64 * per_token * 2));
}

// An 80 GB card serving North Mini Code (36 sliding layers of a 4096-token window, 13 full, 2 KB
// a token and layer) has about 10 GB for KV: 64 whole windows (19.9 GB) do not fit, so the
// sliding groups get their share of a budget split evenly at the window, and both groups hold
// about as many sequences of 4096 tokens (24 here) instead of the server refusing to start.
TEST(KvLayoutTest, WindowsThatDoNotFitShareTheBudgetEvenlyAtTheWindow) {
  ModelConfig config;
  for (int64_t i = 0; i < 49; ++i) {
    LayerSpec layer;
    layer.attention = i % 4 == 3 || i == 48 ? AttentionKind::kFull : AttentionKind::kSliding;
    layer.window_tokens = layer.attention == AttentionKind::kSliding ? 4096 : 0;
    config.layers.push_back(layer);
  }
  const int64_t per_token = 2048, budget = int64_t{10'400'000'000};
  const KvLayout layout = PlanKvLayout(config, budget, per_token, /*max_batch=*/64);
  ASSERT_EQ(layout.num_groups(), 2);
  const KvGroup& sliding = layout.groups[0];
  const KvGroup& full = layout.groups[1];
  ASSERT_EQ(sliding.layer_ids.size(), 36u);
  ASSERT_EQ(full.layer_ids.size(), 13u);
  const int64_t sliding_block = 64 * per_token * 36, full_block = 64 * per_token * 13;
  EXPECT_LT(sliding.num_blocks, 64 * (4096 / 64 + 2));
  EXPECT_LE(sliding.num_blocks * sliding_block + full.num_blocks * full_block, budget);
  EXPECT_GT(sliding.num_blocks * sliding_block + full.num_blocks * full_block,
            budget - full_block);  // the budget is used
  const double sliding_rows = sliding.num_blocks / (4096.0 / 64 + 2);
  const double full_rows = full.num_blocks / (4096.0 / 64);
  EXPECT_NEAR(sliding_rows, 24.0, 1.0);
  EXPECT_NEAR(full_rows, 24.0, 1.5);
  // With room for every window the reservation stands (a 141 GB card's budget).
  const KvLayout roomy = PlanKvLayout(config, int64_t{60'000'000'000}, per_token, 64);
  EXPECT_EQ(roomy.groups[0].num_blocks, 64 * (4096 / 64 + 2));
}

// A full group bounds one sequence by its capacity; a sliding group only when it cannot hold a
// window plus the block being filled.
TEST(KvLayoutTest, LongestSequenceIsTheTightestGroup) {
  KvLayout layout;
  layout.groups.push_back({AttentionKind::kFull, 0, {0}, 4});
  layout.groups.push_back({AttentionKind::kSliding, 128, {1}, 3});
  EXPECT_EQ(LongestSequenceTokens(layout), 4 * kBlockTokens);
  layout.groups[1].num_blocks = 2;  // a 128-token window needs 3 blocks
  EXPECT_EQ(LongestSequenceTokens(layout), 2 * kBlockTokens);
  layout.groups.erase(layout.groups.begin());
  layout.groups[0].num_blocks = 3;
  EXPECT_EQ(LongestSequenceTokens(layout), std::numeric_limits<int64_t>::max());
}

TEST(KvLayoutTest, TooSmallBudgetIsAClearError) {
  ModelConfig config = ThreeSlidingOneFull(4, 256);
  try {
    PlanKvLayout(config, 1000, 10, 64);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("too small"), std::string::npos) << e.what();
  }
}

TEST(KvLayoutTest, AllFullModelHasOneGroup) {
  ModelConfig config = ThreeSlidingOneFull(2, 0);  // window 0: sliding layers act as full
  KvLayout layout = PlanKvLayout(config, 64 * 10 * 2 * 5, 10, 1);
  ASSERT_EQ(layout.num_groups(), 1);
  EXPECT_EQ(layout.groups[0].num_blocks, 5);
}

}  // namespace
}  // namespace mkserve
