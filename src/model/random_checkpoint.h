// Seeded random checkpoints in the HF layout: config.json, generation_config.json and
// safetensors shards (+ model.safetensors.index.json when there is more than one).
//
// Values are counter-based, so each element depends only on (seed, tensor name, index):
//   key   = SplitMix64(seed ^ Fnv1a64(name))
//   bits  = SplitMix64(key + index)
//   z     = Box-Muller(u1 = top 24 bits, u2 = low 24 bits)     (standard normal)
//   value = 0.02 * z   (norm weights: 1 + 0.02 * z), stored as bf16.
// The fused transformers-5 expert tensors are filled from the per-expert names, so both
// expert layouts hold the same numbers.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "model/safetensors_writer.h"

namespace mkserve {

enum class ExpertLayout {
  kPerExpert,  // released checkpoints: mlp.experts.{e}.{gate,up,down}_proj.weight
  kFused,  // transformers 5: mlp.experts.gate_up_proj [E, 2I, H], mlp.experts.down_proj [E, H, I]
};

struct RandomCheckpointOptions {
  uint64_t seed = 0;
  uint64_t max_shard_bytes = 4ull << 30;  // a shard closes before it would pass this
  ExpertLayout expert_layout = ExpertLayout::kPerExpert;
};

inline constexpr float kRandomWeightStd = 0.02f;

// The value make-model stores (before bf16 rounding) for element `index` of the tensor `name`
// (a per-expert name for expert weights).
float RandomWeightValue(uint64_t seed, const std::string& name, uint64_t index);

// Every tensor of the model, in file order.
std::vector<TensorSpec> CheckpointTensorSpecs(const ModelConfig& config, ExpertLayout layout);

// Writes the model files into `dir` (created if needed). Existing model*.safetensors* files
// there are removed first so no stale shard survives.
void WriteRandomCheckpoint(const ModelConfig& config, const RandomCheckpointOptions& options,
                           const std::filesystem::path& dir);

}  // namespace mkserve
