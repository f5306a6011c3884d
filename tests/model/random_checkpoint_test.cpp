#include "model/random_checkpoint.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "model/checkpoint.h"
#include "model/presets.h"

namespace mkserve {
namespace {

namespace fs = std::filesystem;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

fs::path Write(const std::string& name, uint64_t seed, const ModelConfig& config = TinyPreset()) {
  fs::path dir = fs::path(testing::TempDir()) / ("random_" + name);
  fs::remove_all(dir);
  WriteRandomCheckpoint(config, {.seed = seed}, dir);
  return dir;
}

TEST(RandomCheckpointTest, GeneratorHasTheDocumentedScale) {
  double sum = 0, sum_squares = 0, norm_sum = 0;
  constexpr int kSamples = 200000;
  for (int i = 0; i < kSamples; ++i) {
    double value = RandomWeightValue(7, "model.layers.3.self_attn.q_proj.weight", i);
    ASSERT_TRUE(std::isfinite(value));
    sum += value;
    sum_squares += value * value;
    norm_sum += RandomWeightValue(7, "model.layers.3.input_layernorm.weight", i);
  }
  double mean = sum / kSamples;
  EXPECT_NEAR(mean, 0.0, 0.0005);
  EXPECT_NEAR(std::sqrt(sum_squares / kSamples - mean * mean), 0.02, 0.0005);
  EXPECT_NEAR(norm_sum / kSamples, 1.0, 0.0005);
}

TEST(RandomCheckpointTest, ValuesDependOnSeedNameAndIndexOnly) {
  float value = RandomWeightValue(1, "a", 5);
  EXPECT_EQ(value, RandomWeightValue(1, "a", 5));
  EXPECT_NE(value, RandomWeightValue(2, "a", 5));
  EXPECT_NE(value, RandomWeightValue(1, "b", 5));
  EXPECT_NE(value, RandomWeightValue(1, "a", 6));
}

TEST(RandomCheckpointTest, SameSeedSameBytes) {
  fs::path first = Write("seed_a", 42), second = Write("seed_b", 42), other = Write("seed_c", 43);
  EXPECT_EQ(ReadFile(first / "model.safetensors"), ReadFile(second / "model.safetensors"));
  EXPECT_NE(ReadFile(first / "model.safetensors"), ReadFile(other / "model.safetensors"));
}

TEST(RandomCheckpointTest, WritesConfigAndGenerationConfig) {
  fs::path dir = Write("configs", 0);
  EXPECT_EQ(ModelConfig::Load(dir / "config.json"), TinyPreset());
  nlohmann::json generation = nlohmann::json::parse(ReadFile(dir / "generation_config.json"));
  EXPECT_EQ(generation,
            (nlohmann::json{{"bos_token_id", 2}, {"eos_token_id", 1006}, {"pad_token_id", 0}}));
  EXPECT_FALSE(fs::exists(dir / "model.safetensors.index.json"));
}

TEST(RandomCheckpointTest, ShardsStayUnderTheLimitAndStaleFilesGo) {
  fs::path dir = Write("shards", 0);
  uint64_t limit = 100 << 10;
  WriteRandomCheckpoint(TinyPreset(), {.seed = 0, .max_shard_bytes = limit}, dir);
  EXPECT_FALSE(fs::exists(dir / "model.safetensors")) << "stale single file left behind";
  Checkpoint checkpoint = Checkpoint::Open(dir);
  nlohmann::json index = nlohmann::json::parse(ReadFile(dir / "model.safetensors.index.json"));
  std::map<std::string, int> tensors_per_shard;
  for (const auto& [name, shard] : index["weight_map"].items()) ++tensors_per_shard[shard];
  EXPECT_GT(checkpoint.files().size(), 2u);
  for (const fs::path& shard : checkpoint.files()) {
    // Over the limit only when one tensor alone is larger (the 128 KiB embedding here).
    if (tensors_per_shard[shard.filename().string()] == 1) continue;
    EXPECT_LE(fs::file_size(shard), limit + 8192) << shard;  // + header
  }
  uint64_t total = 0;
  for (const auto& [name, tensor] : checkpoint.tensors()) total += tensor.bytes.size();
  EXPECT_EQ(index["metadata"]["total_size"].get<uint64_t>(), total);
  EXPECT_EQ(index["weight_map"].size(), checkpoint.tensors().size());
}

TEST(RandomCheckpointTest, TensorListMatchesTheNorthCount) {
  // Research notes §3.1: the released index holds 18,730 tensors.
  EXPECT_EQ(CheckpointTensorSpecs(NmcPreset(), ExpertLayout::kPerExpert).size(), 18730u);
  uint64_t parameters = 0;
  for (const TensorSpec& spec : CheckpointTensorSpecs(NmcPreset(), ExpertLayout::kFused)) {
    parameters += spec.size_bytes() / 2;
  }
  EXPECT_EQ(parameters, 30484303872ull);  // the published parameter count
}

}  // namespace
}  // namespace mkserve
