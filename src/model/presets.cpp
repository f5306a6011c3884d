#include "model/presets.h"

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace mkserve {
namespace {

using nlohmann::json;

// Keys shared by both presets: North's semantics. The layer pattern comes from
// first_k_dense_replace = 1 and sliding_window_pattern = 4 through the one derivation in
// ModelConfig, so a preset cannot disagree with how a real config.json is read.
json NorthSemantics(int64_t num_layers) {
  if (num_layers < 1) throw Error("--layers must be at least 1, got " + std::to_string(num_layers));
  return {{"model_type", "cohere2_moe"},
          {"num_hidden_layers", num_layers},
          {"first_k_dense_replace", 1},
          {"prefix_dense_sliding_window_pattern", 1},
          {"sliding_window_pattern", 4},
          {"num_shared_experts", 0},
          {"expert_selection_fn", "sigmoid"},
          {"norm_topk_prob", false},
          {"rope_theta", 50000},
          {"rms_norm_eps", 1e-6},
          {"tie_word_embeddings", true},
          {"hidden_act", "silu"},
          {"use_qk_norm", false},
          {"use_parallel_block", true},
          {"attention_bias", false},
          {"bos_token_id", 2},
          {"pad_token_id", 0}};
}

}  // namespace

ModelConfig TinyPreset(int64_t num_layers) {
  json config = NorthSemantics(num_layers);
  config.update({{"vocab_size", 1024},
                 {"hidden_size", 64},
                 {"head_dim", 16},
                 {"num_attention_heads", 4},
                 {"num_key_value_heads", 2},
                 {"prefix_dense_intermediate_size", 128},
                 {"intermediate_size", 32},
                 {"num_experts", 8},
                 {"num_experts_per_tok", 2},
                 {"sliding_window", 16},
                 {"max_position_embeddings", 4096},
                 {"logit_scale", 0.5},  // not 1.0, so a forgotten scale shows
                 {"eos_token_id", 1006}});
  return ModelConfig::FromJson(config);
}

ModelConfig NmcPreset(int64_t num_layers) {
  json config = NorthSemantics(num_layers);
  config.update({{"vocab_size", 262144},
                 {"hidden_size", 2048},
                 {"head_dim", 128},
                 {"num_attention_heads", 32},
                 {"num_key_value_heads", 4},
                 {"prefix_dense_intermediate_size", 3072},
                 {"intermediate_size", 768},
                 {"num_experts", 128},
                 {"num_experts_per_tok", 8},
                 {"sliding_window", 4096},
                 {"max_position_embeddings", 500000},
                 {"logit_scale", 0.0625},
                 {"eos_token_id", 255001}});
  return ModelConfig::FromJson(config);
}

ModelConfig PresetByName(const std::string& name, std::optional<int64_t> num_layers) {
  if (name == "tiny") return TinyPreset(num_layers.value_or(kTinyNumLayers));
  if (name == "nmc") return NmcPreset(num_layers.value_or(kNorthNumLayers));
  throw Error("unknown preset \"" + name + "\" (tiny or nmc)");
}

}  // namespace mkserve
