// Built-in model geometries for `mkserve make-model` and tests.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "model/model_config.h"

namespace mkserve {

inline constexpr int64_t kNorthNumLayers = 49;
inline constexpr int64_t kTinyNumLayers = 6;

// CPU-sized and exercising every North branch: dense layer 0 (full attention, forced RoPE),
// sliding layers (window 16) and a full NoPE MoE layer, sigmoid top-2 of 8 without
// renormalisation, RMSNorm, tied head with logit_scale 0.5. Vocabulary 1024 matches the tiny
// tokenizer (bos 2, eos 1006 = <|END_OF_TURN_TOKEN|>, pad 0).
ModelConfig TinyPreset(int64_t num_layers = kTinyNumLayers);

// The released North Mini Code geometry (its config.json); fewer layers keep the pattern:
// layer 0 dense full with forced RoPE, full NoPE every 4th layer, sliding window 4096 elsewhere.
ModelConfig NmcPreset(int64_t num_layers = kNorthNumLayers);

// "tiny" or "nmc"; anything else is an mkserve::Error listing the presets.
ModelConfig PresetByName(const std::string& name, std::optional<int64_t> num_layers);

}  // namespace mkserve
