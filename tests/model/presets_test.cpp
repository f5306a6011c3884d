#include "model/presets.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace mkserve {
namespace {

TEST(PresetsTest, TinyExercisesEveryNorthBranch) {
  ModelConfig config = TinyPreset();
  EXPECT_EQ(config.vocab_size, 1024);
  EXPECT_EQ(config.hidden_size, 64);
  EXPECT_EQ(config.head_dim, 16);
  EXPECT_EQ(config.num_heads, 4);
  EXPECT_EQ(config.num_kv_heads, 2);
  EXPECT_EQ(config.num_layers, 6);
  EXPECT_EQ(config.bos_token_id, 2);
  EXPECT_EQ(config.pad_token_id, 0);
  EXPECT_EQ(config.eos_token_ids, std::vector<int32_t>{1006});
  EXPECT_FLOAT_EQ(config.logit_scale, 0.5f);
  EXPECT_EQ(config.rope_theta, 50000.0);
  EXPECT_EQ(config.max_position_embeddings, 4096);
  EXPECT_EQ(config.norm, NormKind::kRmsNorm);
  EXPECT_FLOAT_EQ(config.norm_eps, 1e-6f);
  EXPECT_TRUE(config.tie_word_embeddings);
  EXPECT_EQ(config.expert_selection, ExpertSelection::kSigmoid);
  EXPECT_FALSE(config.norm_topk_prob);
  EXPECT_EQ(config.num_experts, 8);
  EXPECT_EQ(config.num_experts_per_token, 2);
  EXPECT_EQ(config.num_shared_experts, 0);
  LayerSpec dense{AttentionKind::kFull, true, 0, FfnKind::kDense, 128};
  LayerSpec sliding{AttentionKind::kSliding, true, 16, FfnKind::kMoe, 32};
  LayerSpec nope{AttentionKind::kFull, false, 0, FfnKind::kMoe, 32};
  EXPECT_EQ(config.layers,
            (std::vector<LayerSpec>{dense, sliding, sliding, sliding, nope, sliding}));
}

TEST(PresetsTest, NmcIsTheReleasedGeometry) {
  ModelConfig config = NmcPreset();
  EXPECT_EQ(config.num_layers, 49);
  EXPECT_EQ(config.vocab_size, 262144);
  EXPECT_EQ(config.q_width(), 4096);
  EXPECT_EQ(config.kv_width(), 512);
  EXPECT_EQ(config.eos_token_ids, std::vector<int32_t>{255001});
  EXPECT_FLOAT_EQ(config.logit_scale, 0.0625f);
  EXPECT_EQ(config.max_position_embeddings, 500000);
  int full = 0;
  for (size_t i = 0; i < config.layers.size(); ++i) {
    full += config.layers[i].attention == AttentionKind::kFull;
    EXPECT_EQ(config.layers[i].attention == AttentionKind::kFull, i % 4 == 0) << i;
  }
  EXPECT_EQ(full, 13);
  EXPECT_EQ(config.layers[0].ffn_intermediate_size, 3072);
  EXPECT_TRUE(config.layers[0].uses_rope);
  EXPECT_FALSE(config.layers[4].uses_rope);
  EXPECT_EQ(config.layers[1].window_tokens, 4096);
}

TEST(PresetsTest, FewerLayersKeepThePattern) {
  ModelConfig config = NmcPreset(5);
  ASSERT_EQ(config.num_layers, 5);
  EXPECT_EQ(config.layers[0].ffn, FfnKind::kDense);
  EXPECT_EQ(config.layers[4].attention, AttentionKind::kFull);
  EXPECT_FALSE(config.layers[4].uses_rope);
  EXPECT_EQ(config.layers[3].attention, AttentionKind::kSliding);
  EXPECT_EQ(PresetByName("nmc", 1).num_moe_layers(), 0);
}

TEST(PresetsTest, Errors) {
  EXPECT_THROW(PresetByName("huge", std::nullopt), Error);
  EXPECT_THROW(PresetByName("tiny", 0), Error);
  EXPECT_EQ(PresetByName("tiny", std::nullopt), TinyPreset());
}

}  // namespace
}  // namespace mkserve
