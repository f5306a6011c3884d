#include "model/detail/layer_schedule.h"

#include <string>

namespace mkserve::detail {
namespace {

constexpr char kFull[] = "full_attention";
constexpr char kSliding[] = "sliding_attention";
constexpr char kDense[] = "dense";
constexpr char kSparse[] = "sparse";

std::string IndexedKey(const std::string& key, size_t index) {
  return key + "[" + std::to_string(index) + "]";
}

// HF: prefix layers follow prefix_dense_sliding_window_pattern, the rest sliding_window_pattern
// counted from 0 after the prefix; position i is full where (i + 1) % pattern == 0.
std::vector<AttentionKind> DerivedAttention(const ModelConfig& config, int64_t first_k) {
  std::vector<AttentionKind> kinds;
  for (int64_t i = 0; i < config.num_layers; ++i) {
    bool in_prefix = i < first_k;
    int64_t position = in_prefix ? i : i - first_k;
    int64_t pattern =
        in_prefix ? config.prefix_dense_sliding_window_pattern : config.sliding_window_pattern;
    kinds.push_back((position + 1) % pattern == 0 ? AttentionKind::kFull : AttentionKind::kSliding);
  }
  return kinds;
}

std::vector<AttentionKind> AttentionKinds(const ConfigReader& reader, const ModelConfig& config,
                                          int64_t first_k) {
  auto names = reader.OptionalStringList("layer_types");
  if (!names) return DerivedAttention(config, first_k);
  if (static_cast<int64_t>(names->size()) != config.num_layers) {
    ThrowKeyError("layer_types", reader.Raw("layer_types"),
                  "has " + std::to_string(names->size()) + " entries but num_hidden_layers is " +
                      std::to_string(config.num_layers));
  }
  std::vector<AttentionKind> kinds;
  for (size_t i = 0; i < names->size(); ++i) {
    const std::string& name = (*names)[i];
    if (name != kFull && name != kSliding) {
      ThrowKeyError(IndexedKey("layer_types", i), name,
                    "unsupported layer type (full_attention or sliding_attention)");
    }
    kinds.push_back(name == kFull ? AttentionKind::kFull : AttentionKind::kSliding);
  }
  return kinds;
}

std::vector<FfnKind> FfnKinds(const ConfigReader& reader, const ModelConfig& config,
                              int64_t first_k) {
  auto names = reader.OptionalStringList("mlp_layer_types");
  std::vector<FfnKind> kinds;
  if (!names) {
    for (int64_t i = 0; i < config.num_layers; ++i) {
      kinds.push_back(i < first_k ? FfnKind::kDense : FfnKind::kMoe);
    }
    return kinds;
  }
  if (static_cast<int64_t>(names->size()) != config.num_layers) {
    ThrowKeyError("mlp_layer_types", reader.Raw("mlp_layer_types"),
                  "has " + std::to_string(names->size()) + " entries but num_hidden_layers is " +
                      std::to_string(config.num_layers));
  }
  for (size_t i = 0; i < names->size(); ++i) {
    const std::string& name = (*names)[i];
    if (name != kDense && name != kSparse) {
      ThrowKeyError(IndexedKey("mlp_layer_types", i), name,
                    "unsupported MLP type (dense or sparse)");
    }
    FfnKind kind = name == kDense ? FfnKind::kDense : FfnKind::kMoe;
    // Both keys given: they must tell the same story, or one of them is stale.
    if (reader.Has("first_k_dense_replace") &&
        (kind == FfnKind::kDense) != (int64_t(i) < first_k)) {
      ThrowKeyError("first_k_dense_replace", first_k,
                    "disagrees with mlp_layer_types[" + std::to_string(i) + "] = \"" + name + "\"");
    }
    kinds.push_back(kind);
  }
  return kinds;
}

LayerSpec MakeSpec(const ModelConfig& config, AttentionKind attention, FfnKind ffn) {
  LayerSpec spec;
  spec.attention = attention;
  spec.ffn = ffn;
  bool force_rope = ffn == FfnKind::kDense && config.prefix_dense_sliding_window_pattern == 1;
  spec.uses_rope = attention == AttentionKind::kSliding || force_rope;
  spec.window_tokens = attention == AttentionKind::kSliding ? config.sliding_window : 0;
  spec.ffn_intermediate_size =
      ffn == FfnKind::kDense ? config.dense_intermediate_size : config.expert_intermediate_size;
  return spec;
}

void CheckLayerNeeds(const ConfigReader& reader, const ModelConfig& config, size_t index,
                     const LayerSpec& spec) {
  std::string why = "layer " + std::to_string(index) + " is ";
  if (spec.attention == AttentionKind::kSliding && config.sliding_window <= 0) {
    ThrowKeyError("sliding_window",
                  reader.Has("sliding_window") ? reader.Raw("sliding_window") : nullptr,
                  "must be a positive integer because " + why + "sliding_attention");
  }
  if (spec.ffn == FfnKind::kDense && config.dense_intermediate_size <= 0) {
    nlohmann::json value = reader.Has("prefix_dense_intermediate_size")
                               ? reader.Raw("prefix_dense_intermediate_size")
                               : nlohmann::json(nullptr);
    ThrowKeyError("prefix_dense_intermediate_size", value,
                  "must be a positive integer because " + why + "dense");
  }
}

}  // namespace

std::vector<LayerSpec> DeriveLayerSpecs(const ConfigReader& reader, const ModelConfig& config) {
  int64_t first_k = reader.Int("first_k_dense_replace", 0);
  if (first_k < 0 || first_k > config.num_layers) {
    ThrowKeyError(
        "first_k_dense_replace", first_k,
        "must be between 0 and num_hidden_layers (" + std::to_string(config.num_layers) + ")");
  }
  std::vector<AttentionKind> attention = AttentionKinds(reader, config, first_k);
  std::vector<FfnKind> ffn = FfnKinds(reader, config, first_k);
  std::vector<LayerSpec> layers;
  for (size_t i = 0; i < attention.size(); ++i) {
    layers.push_back(MakeSpec(config, attention[i], ffn[i]));
    CheckLayerNeeds(reader, config, i, layers.back());
  }
  return layers;
}

}  // namespace mkserve::detail
