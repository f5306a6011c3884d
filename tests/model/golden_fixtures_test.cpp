// The checkpoints HF transformers wrote for the golden tests (tests/fixtures/golden) load and
// map: real writer output in every layout (per-expert, fused, sharded, float32, untied head).
// Expected values come from the fixtures' README, not from the parser.
#include <filesystem>

#include <gtest/gtest.h>

#include "model/checkpoint.h"
#include "model/model_config.h"
#include "model/model_weights.h"

namespace mkserve {
namespace {

namespace fs = std::filesystem;

fs::path Fixture(const std::string& name) {
  return fs::path(MKSERVE_SOURCE_DIR) / "tests/fixtures/golden" / name;
}

struct Loaded {
  ModelConfig config;
  Checkpoint checkpoint;
  ModelWeights weights;
};

Loaded Load(const std::string& name) {
  ModelConfig config = ModelConfig::Load(Fixture(name) / "config.json");
  Checkpoint checkpoint = Checkpoint::Open(Fixture(name));
  ModelWeights weights = MapModelWeights(config, checkpoint);
  return {std::move(config), std::move(checkpoint), std::move(weights)};
}

TEST(GoldenFixturesTest, North) {
  Loaded model = Load("north");
  const ModelConfig& config = model.config;
  EXPECT_EQ(config.norm, NormKind::kRmsNorm);
  EXPECT_EQ(config.expert_selection, ExpertSelection::kSigmoid);
  EXPECT_FALSE(config.norm_topk_prob);
  EXPECT_FLOAT_EQ(config.logit_scale, 0.5f);
  LayerSpec dense{AttentionKind::kFull, true, 0, FfnKind::kDense, 96};
  LayerSpec sliding{AttentionKind::kSliding, true, 16, FfnKind::kMoe, 32};
  LayerSpec nope{AttentionKind::kFull, false, 0, FfnKind::kMoe, 32};
  EXPECT_EQ(config.layers,
            (std::vector<LayerSpec>{dense, sliding, sliding, sliding, nope, sliding}));
  EXPECT_EQ(model.weights.lm_head.bytes.data(), model.weights.embed_tokens.bytes.data());
  EXPECT_EQ(model.weights.layers[1].experts.size(), 8u);
  EXPECT_EQ(model.weights.layers[1].experts[7].down.ToFloat(),
            model.checkpoint.Find("model.layers.1.mlp.experts.7.down_proj.weight")->ToFloat());
}

TEST(GoldenFixturesTest, LayerNormSoftmaxShared) {
  Loaded model = Load("layernorm_softmax_shared");
  const ModelConfig& config = model.config;
  EXPECT_EQ(config.norm, NormKind::kLayerNorm);
  EXPECT_EQ(config.expert_selection, ExpertSelection::kSoftmax);
  EXPECT_EQ(config.num_experts_per_token, 3);
  EXPECT_EQ(config.shared_expert_combination, SharedExpertCombination::kAverage);
  EXPECT_FLOAT_EQ(config.logit_scale, 0.25f);
  // Two dense prefix layers with prefix pattern 2: sliding (RoPE), then full without forced RoPE.
  EXPECT_EQ(config.layers[0], (LayerSpec{AttentionKind::kSliding, true, 16, FfnKind::kDense, 80}));
  EXPECT_EQ(config.layers[1], (LayerSpec{AttentionKind::kFull, false, 0, FfnKind::kDense, 80}));
  EXPECT_EQ(config.layers[5], (LayerSpec{AttentionKind::kFull, false, 0, FfnKind::kMoe, 24}));
  EXPECT_EQ(model.checkpoint.files().size(), 2u);
  // Fused experts: expert 2's gate is rows [48, 72) of gate_up, its up rows [72, 96).
  const TensorView* gate_up = model.checkpoint.Find("model.layers.2.mlp.experts.gate_up_proj");
  ASSERT_NE(gate_up, nullptr);
  std::vector<float> fused = gate_up->ToFloat();
  const int64_t hidden = 64, width = 24, expert = 2;
  std::vector<float> gate = model.weights.layers[2].experts[expert].gate.ToFloat();
  std::vector<float> up = model.weights.layers[2].experts[expert].up.ToFloat();
  ASSERT_EQ(gate.size(), static_cast<size_t>(width * hidden));
  for (int64_t i = 0; i < width * hidden; ++i) {
    ASSERT_EQ(gate[i], fused[expert * 2 * width * hidden + i]) << i;
    ASSERT_EQ(up[i], fused[(expert * 2 + 1) * width * hidden + i]) << i;
  }
  ASSERT_TRUE(model.weights.layers[2].shared_expert.has_value());
  EXPECT_EQ(model.weights.layers[2].shared_expert->gate.shape, (std::vector<int64_t>{24, 64}));
}

TEST(GoldenFixturesTest, SigmoidRenormSumUntied) {
  Loaded model = Load("sigmoid_renorm_sum");
  const ModelConfig& config = model.config;
  EXPECT_EQ(config.expert_selection, ExpertSelection::kSigmoid);
  EXPECT_TRUE(config.norm_topk_prob);
  EXPECT_EQ(config.num_shared_experts, 2);
  EXPECT_EQ(config.shared_expert_combination, SharedExpertCombination::kSum);
  EXPECT_FALSE(config.tie_word_embeddings);
  EXPECT_EQ(model.weights.embed_tokens.dtype, DType::kF32);
  EXPECT_NE(model.weights.lm_head.bytes.data(), model.weights.embed_tokens.bytes.data());
  EXPECT_EQ(model.weights.layers[1].shared_expert->gate.shape, (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(model.weights.layers[3].experts[5].down.shape, (std::vector<int64_t>{64, 16}));
}

}  // namespace
}  // namespace mkserve
