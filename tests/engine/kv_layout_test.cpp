#include "engine/kv_layout.h"

#include <gtest/gtest.h>

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
