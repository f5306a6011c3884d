#include "megakernel/schedule/model_support.h"

#include <gtest/gtest.h>

#include "model/presets.h"

namespace mkserve::megakernel {
namespace {

TEST(MegakernelModelSupport, RunsNorthNotTheTinyModel) {
  EXPECT_EQ(MegakernelUnsupportedReason(NmcPreset()), std::nullopt);
  EXPECT_NE(MegakernelUnsupportedReason(TinyPreset()), std::nullopt);  // head_dim 16
}

// The attention MMA holds a KV head's query heads as its 8 columns: North's 8 run (above), 16 are
// refused.
TEST(MegakernelModelSupport, RefusesMoreThan8QueryHeadsPerKvHead) {
  ModelConfig config = NmcPreset();  // 32 query heads, 4 KV heads
  config.num_kv_heads = 2;           // 16 a KV head, the q width unchanged
  const auto why = MegakernelUnsupportedReason(config);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("at most 8 query heads per KV head"), std::string::npos) << *why;
}

TEST(MegakernelModelSupport, RefusesShapesTheOpBodiesWereNotWrittenFor) {
  const ModelConfig north = NmcPreset();
  std::vector<ModelConfig> refused(6, north);
  refused[0].head_dim = 64;
  refused[1].num_shared_experts = 1;
  refused[2].num_experts = 512;
  refused[3].num_experts_per_token = 17;
  refused[4].hidden_size = 8192;
  refused[5].num_kv_heads = 3;  // 32 query heads do not divide into 3 groups
  for (const ModelConfig& config : refused)
    EXPECT_NE(MegakernelUnsupportedReason(config), std::nullopt);
}

}  // namespace
}  // namespace mkserve::megakernel
