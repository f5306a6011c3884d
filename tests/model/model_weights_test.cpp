#include "model/model_weights.h"

#include <filesystem>
#include <functional>
#include <initializer_list>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/float_convert.h"
#include "model/checkpoint.h"
#include "model/presets.h"
#include "model/random_checkpoint.h"
#include "model/safetensors_writer.h"
#include "model/test_tensors.h"

namespace mkserve {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kSeed = 1234;

fs::path FreshDir(const std::string& name) {
  fs::path dir = fs::path(testing::TempDir()) / ("weights_" + name);
  fs::remove_all(dir);
  return dir;
}

fs::path WriteTiny(const std::string& name, ExpertLayout layout,
                   uint64_t max_shard_bytes = 1ull << 40,
                   const ModelConfig& config = TinyPreset()) {
  fs::path dir = FreshDir(name);
  WriteRandomCheckpoint(
      config, {.seed = kSeed, .max_shard_bytes = max_shard_bytes, .expert_layout = layout}, dir);
  return dir;
}

// The stored value of element i of `name`: the generator's value rounded to bf16.
float Expected(const std::string& name, uint64_t i) {
  return Bf16ToFloat(FloatToBf16(RandomWeightValue(kSeed, name, i)));
}

void ExpectValues(const TensorView& view, const std::string& source_name) {
  std::vector<float> values = view.ToFloat();
  ASSERT_EQ(static_cast<int64_t>(values.size()), view.num_elements()) << view.name;
  for (size_t i = 0; i < values.size(); ++i) {
    ASSERT_EQ(values[i], Expected(source_name, i)) << view.name << " element " << i;
  }
}

void ExpectMlpValues(const MlpWeights& mlp, const std::string& prefix) {
  ExpectValues(mlp.gate, prefix + "gate_proj.weight");
  ExpectValues(mlp.up, prefix + "up_proj.weight");
  ExpectValues(mlp.down, prefix + "down_proj.weight");
}

// Every view holds the values the writer generated for the tensor it claims to be.
void ExpectTinyWeights(const ModelConfig& config, const ModelWeights& weights) {
  ExpectValues(weights.embed_tokens, "model.embed_tokens.weight");
  ExpectValues(weights.final_norm, "model.norm.weight");
  EXPECT_EQ(weights.lm_head.bytes.data(), weights.embed_tokens.bytes.data()) << "tied head";
  ASSERT_EQ(weights.layers.size(), static_cast<size_t>(config.num_layers));
  for (size_t i = 0; i < weights.layers.size(); ++i) {
    const LayerWeights& layer = weights.layers[i];
    std::string prefix = "model.layers." + std::to_string(i) + ".";
    ExpectValues(layer.input_norm, prefix + "input_layernorm.weight");
    ExpectValues(layer.q_proj, prefix + "self_attn.q_proj.weight");
    ExpectValues(layer.o_proj, prefix + "self_attn.o_proj.weight");
    EXPECT_EQ(layer.k_proj.shape, (std::vector<int64_t>{config.kv_width(), config.hidden_size}));
    if (config.layers[i].ffn == FfnKind::kDense) {
      ASSERT_TRUE(layer.dense.has_value());
      EXPECT_TRUE(layer.experts.empty());
      ExpectMlpValues(*layer.dense, prefix + "mlp.");
      continue;
    }
    ASSERT_TRUE(layer.router.has_value());
    ExpectValues(*layer.router, prefix + "mlp.gate.weight");
    ASSERT_EQ(layer.experts.size(), static_cast<size_t>(config.num_experts));
    for (size_t e = 0; e < layer.experts.size(); ++e) {
      EXPECT_EQ(layer.experts[e].gate.shape, (std::vector<int64_t>{32, 64}));
      EXPECT_EQ(layer.experts[e].down.shape, (std::vector<int64_t>{64, 32}));
      ExpectMlpValues(layer.experts[e], prefix + "mlp.experts." + std::to_string(e) + ".");
    }
    EXPECT_EQ(layer.shared_expert.has_value(), config.num_shared_experts > 0);
  }
}

void ExpectMapError(const fs::path& dir, const ModelConfig& config,
                    std::initializer_list<std::string> fragments) {
  Checkpoint checkpoint = Checkpoint::Open(dir);
  try {
    MapModelWeights(config, checkpoint);
    ADD_FAILURE() << "mapped";
  } catch (const Error& error) {
    for (const std::string& fragment : fragments) {
      EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos)
          << "'" << fragment << "' not in: " << error.what();
    }
  }
}

// Writes the tiny model's tensor list after `edit`, with generated values.
fs::path WriteEdited(const std::string& name,
                     const std::function<void(std::vector<TensorSpec>&)>& edit) {
  fs::path dir = FreshDir(name);
  fs::create_directories(dir);
  std::vector<TensorSpec> specs = CheckpointTensorSpecs(TinyPreset(), ExpertLayout::kPerExpert);
  edit(specs);
  WriteSafetensors(dir / "model.safetensors", specs,
                   [](const TensorSpec&, std::span<std::byte>) {});
  return dir;
}

TEST(ModelWeightsTest, PerExpertRoundTrip) {
  ModelConfig config = TinyPreset();
  Checkpoint checkpoint = Checkpoint::Open(WriteTiny("per_expert", ExpertLayout::kPerExpert));
  ExpectTinyWeights(config, MapModelWeights(config, checkpoint));
}

TEST(ModelWeightsTest, FusedLayoutMapsToTheSameNumbers) {
  ModelConfig config = TinyPreset();
  fs::path dir = WriteTiny("fused", ExpertLayout::kFused);
  Checkpoint checkpoint = Checkpoint::Open(dir);
  ASSERT_NE(checkpoint.Find("model.layers.1.mlp.experts.gate_up_proj"), nullptr);
  EXPECT_EQ(checkpoint.Find("model.layers.1.mlp.experts.0.gate_proj.weight"), nullptr);
  ExpectTinyWeights(config, MapModelWeights(config, checkpoint));
}

TEST(ModelWeightsTest, ShardedRoundTrip) {
  ModelConfig config = TinyPreset();
  fs::path dir = WriteTiny("sharded", ExpertLayout::kPerExpert, 64 << 10);
  Checkpoint checkpoint = Checkpoint::Open(dir);
  EXPECT_GT(checkpoint.files().size(), 2u);
  EXPECT_TRUE(fs::exists(dir / "model.safetensors.index.json"));
  ExpectTinyWeights(config, MapModelWeights(config, checkpoint));
}

TEST(ModelWeightsTest, SharedExpertsAndUntiedHead) {
  nlohmann::json json = TinyPreset().ToJson();
  json["num_shared_experts"] = 2;
  json["tie_word_embeddings"] = false;
  ModelConfig config = ModelConfig::FromJson(json);
  Checkpoint checkpoint =
      Checkpoint::Open(WriteTiny("shared", ExpertLayout::kPerExpert, 1ull << 40, config));
  ModelWeights weights = MapModelWeights(config, checkpoint);
  ASSERT_TRUE(weights.layers[1].shared_expert.has_value());
  EXPECT_EQ(weights.layers[1].shared_expert->gate.shape, (std::vector<int64_t>{64, 64}));
  ExpectMlpValues(*weights.layers[1].shared_expert, "model.layers.1.mlp.shared_experts.");
  ExpectValues(weights.lm_head, "lm_head.weight");
  EXPECT_NE(weights.lm_head.bytes.data(), weights.embed_tokens.bytes.data());
}

TEST(ModelWeightsTest, UntiedHeadRequiresLmHead) {
  nlohmann::json json = TinyPreset().ToJson();
  json["tie_word_embeddings"] = false;
  ExpectMapError(WriteTiny("untied", ExpertLayout::kPerExpert), ModelConfig::FromJson(json),
                 {"missing lm_head.weight [1024, 64]"});
}

TEST(ModelWeightsTest, TiedHeadIgnoresAStoredCopy) {
  fs::path dir = WriteEdited("tied_copy", [](std::vector<TensorSpec>& specs) {
    specs.push_back({"lm_head.weight", DType::kBF16, {1024, 64}});
  });
  Checkpoint checkpoint = Checkpoint::Open(dir);
  ModelWeights weights = MapModelWeights(TinyPreset(), checkpoint);
  EXPECT_EQ(weights.lm_head.bytes.data(), weights.embed_tokens.bytes.data());
}

TEST(ModelWeightsTest, MissingExtraAndMisShapedInOneError) {
  fs::path dir = WriteEdited("three_problems", [](std::vector<TensorSpec>& specs) {
    std::erase_if(specs, [](const TensorSpec& spec) {
      return spec.name == "model.layers.2.self_attn.k_proj.weight";
    });
    for (TensorSpec& spec : specs) {
      if (spec.name == "model.layers.0.mlp.up_proj.weight") spec.shape = {64, 128};
    }
    specs.push_back({"model.layers.0.self_attn.q_proj.bias", DType::kBF16, {64}});
  });
  ExpectMapError(dir, TinyPreset(),
                 {"3 problems", "missing model.layers.2.self_attn.k_proj.weight [32, 64]",
                  "mis-shaped model.layers.0.mlp.up_proj.weight: [64, 128], expected [128, 64]",
                  "unexpected model.layers.0.self_attn.q_proj.bias [64]"});
}

TEST(ModelWeightsTest, LongProblemListsAreCapped) {
  // A fused checkpoint read with a config that expects 16 experts: the fused tensors are
  // mis-shaped, and a per-expert checkpoint would be missing 3 x 8 tensors per layer.
  nlohmann::json json = TinyPreset().ToJson();
  json["num_experts"] = 16;
  fs::path dir = WriteTiny("capped", ExpertLayout::kPerExpert);
  ExpectMapError(dir, ModelConfig::FromJson(json),
                 {"problems", "missing model.layers.1.mlp.experts.8.gate_proj.weight", "more"});
  ExpectMapError(
      WriteTiny("capped_fused", ExpertLayout::kFused), ModelConfig::FromJson(json),
      {"mis-shaped model.layers.1.mlp.experts.gate_up_proj: [8, 64, 64], expected [16, 64, 64]"});
}

TEST(ModelWeightsTest, Fp8CheckpointsAreRefusedClearly) {
  fs::path dir = WriteEdited("fp8", [](std::vector<TensorSpec>& specs) {
    for (TensorSpec& spec : specs) {
      if (spec.name == "model.layers.1.self_attn.q_proj.weight") spec.dtype = DType::kF8E4M3;
    }
    specs.push_back({"model.layers.1.self_attn.q_proj.weight_scale", DType::kF32, {64, 1}});
  });
  ExpectMapError(dir, TinyPreset(),
                 {"FP8", "not supported yet", "model.layers.1.self_attn.q_proj"});
  nlohmann::json json = TinyPreset().ToJson();
  json["quantization_config"] = {{"quant_method", "compressed-tensors"}};
  ExpectMapError(WriteTiny("fp8_config", ExpertLayout::kPerExpert), ModelConfig::FromJson(json),
                 {"not supported yet", "compressed-tensors"});
}

}  // namespace
}  // namespace mkserve
