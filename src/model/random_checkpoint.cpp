#include "model/random_checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numbers>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/float_convert.h"
#include "common/mix64.h"

namespace mkserve {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr size_t kParallelFillElements = 1 << 20;  // below this a thread costs more than it saves

// splitmix64: the golden-ratio increment, then the shared finaliser.
uint64_t SplitMix64(uint64_t x) { return Mix64(x + 0x9e3779b97f4a7c15ull); }

uint64_t Fnv1a64(const std::string& text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : text) hash = (hash ^ c) * 0x100000001b3ull;
  return hash;
}

bool IsNormWeight(const std::string& name) { return name.ends_with("norm.weight"); }

void StoreBf16(std::span<std::byte> out, size_t element, float value) {
  uint16_t bits = FloatToBf16(value);
  std::memcpy(out.data() + 2 * element, &bits, sizeof(bits));
}

// Fills elements [first, first + count) of `out` with the values of `source_name` starting at
// `source_offset`; split over threads when large.
// Element i of the stream `key`; see the header for the recipe.
float ValueFromKey(uint64_t key, uint64_t index, bool is_norm) {
  uint64_t bits = SplitMix64(key + index);
  constexpr double kScale = 1.0 / (1 << 24);
  double u1 = (static_cast<double>(bits >> 40) + 0.5) * kScale;  // (0, 1): log is finite
  double u2 = static_cast<double>(bits & 0xffffff) * kScale;
  double normal = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  float value = kRandomWeightStd * static_cast<float>(normal);
  return is_norm ? 1.0f + value : value;
}

uint64_t StreamKey(uint64_t seed, const std::string& name) {
  return SplitMix64(seed ^ Fnv1a64(name));
}

// Fills elements [first, first + count) of `out` with the first `count` values of
// `source_name`; split over threads when large.
void FillRange(std::span<std::byte> out, size_t first, size_t count, uint64_t seed,
               const std::string& source_name) {
  uint64_t key = StreamKey(seed, source_name);
  bool is_norm = IsNormWeight(source_name);
  auto fill = [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) StoreBf16(out, first + i, ValueFromKey(key, i, is_norm));
  };
  size_t num_threads = std::max(1u, std::thread::hardware_concurrency());
  if (count < kParallelFillElements || num_threads == 1) return fill(0, count);
  std::vector<std::thread> threads;
  size_t chunk = (count + num_threads - 1) / num_threads;
  for (size_t begin = 0; begin < count; begin += chunk) {
    threads.emplace_back(fill, begin, std::min(count, begin + chunk));
  }
  for (std::thread& thread : threads) thread.join();
}

// "model.layers.3.mlp.experts.gate_up_proj" -> "model.layers.3.mlp.experts."
std::string ExpertsPrefix(const std::string& fused_name) {
  return fused_name.substr(0, fused_name.rfind('.') + 1);
}

void FillTensor(const TensorSpec& spec, std::span<std::byte> out, uint64_t seed) {
  if (spec.name.ends_with("experts.gate_up_proj")) {  // [E, 2I, H]: gate rows, then up rows
    size_t per_matrix = static_cast<size_t>(spec.shape[1] / 2 * spec.shape[2]);
    for (int64_t e = 0; e < spec.shape[0]; ++e) {
      std::string expert = ExpertsPrefix(spec.name) + std::to_string(e) + ".";
      size_t base = static_cast<size_t>(e) * 2 * per_matrix;
      FillRange(out, base, per_matrix, seed, expert + "gate_proj.weight");
      FillRange(out, base + per_matrix, per_matrix, seed, expert + "up_proj.weight");
    }
  } else if (spec.name.ends_with("experts.down_proj")) {  // [E, H, I]
    size_t per_matrix = static_cast<size_t>(spec.shape[1] * spec.shape[2]);
    for (int64_t e = 0; e < spec.shape[0]; ++e) {
      std::string expert = ExpertsPrefix(spec.name) + std::to_string(e) + ".";
      FillRange(out, static_cast<size_t>(e) * per_matrix, per_matrix, seed,
                expert + "down_proj.weight");
    }
  } else {
    FillRange(out, 0, out.size() / 2, seed, spec.name);
  }
}

void AddMlp(std::vector<TensorSpec>& specs, const std::string& prefix, int64_t width,
            int64_t hidden) {
  specs.push_back({prefix + "gate_proj.weight", DType::kBF16, {width, hidden}});
  specs.push_back({prefix + "up_proj.weight", DType::kBF16, {width, hidden}});
  specs.push_back({prefix + "down_proj.weight", DType::kBF16, {hidden, width}});
}

void AddMoe(std::vector<TensorSpec>& specs, const ModelConfig& config, const std::string& prefix,
            ExpertLayout layout) {
  int64_t hidden = config.hidden_size, width = config.expert_intermediate_size;
  int64_t experts = config.num_experts;
  specs.push_back({prefix + "gate.weight", DType::kBF16, {experts, hidden}});
  if (layout == ExpertLayout::kFused) {
    specs.push_back({prefix + "experts.gate_up_proj", DType::kBF16, {experts, 2 * width, hidden}});
    specs.push_back({prefix + "experts.down_proj", DType::kBF16, {experts, hidden, width}});
  } else {
    for (int64_t e = 0; e < experts; ++e) {
      AddMlp(specs, prefix + "experts." + std::to_string(e) + ".", width, hidden);
    }
  }
  if (config.num_shared_experts > 0) {
    AddMlp(specs, prefix + "shared_experts.", width * config.num_shared_experts, hidden);
  }
}

// Consecutive runs of tensors, each run under max_shard_bytes unless one tensor alone is larger.
std::vector<std::vector<TensorSpec>> SplitIntoShards(const std::vector<TensorSpec>& specs,
                                                     uint64_t max_shard_bytes) {
  std::vector<std::vector<TensorSpec>> shards(1);
  uint64_t shard_bytes = 0;
  for (const TensorSpec& spec : specs) {
    if (!shards.back().empty() && shard_bytes + spec.size_bytes() > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(spec);
    shard_bytes += spec.size_bytes();
  }
  return shards;
}

std::string ShardName(size_t index, size_t count) {
  char name[64];
  std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", index + 1, count);
  return name;
}

void WriteJson(const fs::path& path, const json& value) {
  std::ofstream out(path);
  out << value.dump(2) << "\n";
  if (!out) throw Error("cannot write " + path.string());
}

void RemoveStaleModelFiles(const fs::path& dir) {
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    if (name.starts_with("model") && name.find(".safetensors") != std::string::npos) {
      fs::remove(entry.path());
    }
  }
}

json GenerationConfig(const ModelConfig& config) {
  json out = config.ToJson();
  return {{"bos_token_id", out["bos_token_id"]},
          {"eos_token_id", out["eos_token_id"]},
          {"pad_token_id", out["pad_token_id"]}};
}

}  // namespace

float RandomWeightValue(uint64_t seed, const std::string& name, uint64_t index) {
  return ValueFromKey(StreamKey(seed, name), index, IsNormWeight(name));
}

std::vector<TensorSpec> CheckpointTensorSpecs(const ModelConfig& config, ExpertLayout layout) {
  int64_t hidden = config.hidden_size;
  std::vector<TensorSpec> specs = {
      {"model.embed_tokens.weight", DType::kBF16, {config.vocab_size, hidden}}};
  for (int64_t i = 0; i < config.num_layers; ++i) {
    std::string prefix = "model.layers." + std::to_string(i) + ".";
    specs.push_back({prefix + "input_layernorm.weight", DType::kBF16, {hidden}});
    specs.push_back({prefix + "self_attn.q_proj.weight", DType::kBF16, {config.q_width(), hidden}});
    specs.push_back(
        {prefix + "self_attn.k_proj.weight", DType::kBF16, {config.kv_width(), hidden}});
    specs.push_back(
        {prefix + "self_attn.v_proj.weight", DType::kBF16, {config.kv_width(), hidden}});
    specs.push_back({prefix + "self_attn.o_proj.weight", DType::kBF16, {hidden, config.q_width()}});
    const LayerSpec& layer = config.layers[static_cast<size_t>(i)];
    if (layer.ffn == FfnKind::kDense) {
      AddMlp(specs, prefix + "mlp.", layer.ffn_intermediate_size, hidden);
    } else {
      AddMoe(specs, config, prefix + "mlp.", layout);
    }
  }
  specs.push_back({"model.norm.weight", DType::kBF16, {hidden}});
  if (!config.tie_word_embeddings) {
    specs.push_back({"lm_head.weight", DType::kBF16, {config.vocab_size, hidden}});
  }
  return specs;
}

void WriteRandomCheckpoint(const ModelConfig& config, const RandomCheckpointOptions& options,
                           const fs::path& dir) {
  fs::create_directories(dir);
  RemoveStaleModelFiles(dir);
  std::vector<std::vector<TensorSpec>> shards = SplitIntoShards(
      CheckpointTensorSpecs(config, options.expert_layout), options.max_shard_bytes);
  json weight_map = json::object();
  uint64_t total_bytes = 0;
  for (size_t s = 0; s < shards.size(); ++s) {
    std::string file = shards.size() == 1 ? "model.safetensors" : ShardName(s, shards.size());
    WriteSafetensors(dir / file, shards[s],
                     [&](const TensorSpec& spec, std::span<std::byte> out) {
                       FillTensor(spec, out, options.seed);
                     },
                     {{"format", "pt"}});
    for (const TensorSpec& spec : shards[s]) {
      weight_map[spec.name] = file;
      total_bytes += spec.size_bytes();
    }
  }
  if (shards.size() > 1) {
    WriteJson(dir / "model.safetensors.index.json",
              {{"metadata", {{"total_size", total_bytes}}}, {"weight_map", weight_map}});
  }
  WriteJson(dir / "config.json", config.ToJson());
  WriteJson(dir / "generation_config.json", GenerationConfig(config));
}

}  // namespace mkserve
