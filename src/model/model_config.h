// ModelConfig: everything mkserve needs from a `cohere2_moe` config.json, parsed and validated
// once. Per-layer facts (full or sliding, RoPE or NoPE, dense or MoE) are derived here and nowhere
// else.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/host_device.h"

namespace mkserve {

enum class NormKind { kRmsNorm, kLayerNorm };  // LayerNorm = Cohere's bias-free, mean-centred one
enum class ExpertSelection { kSigmoid, kSoftmax };
enum class SharedExpertCombination { kAverage, kSum };  // average halves routed + shared together
enum class AttentionKind { kFull, kSliding };
enum class FfnKind { kDense, kMoe };

// HF convention for a sliding layer of window W: a query at position p attends to keys at
// positions (p - W, p], the token itself plus W - 1 earlier ones (vLLM uses W + 1 keys).
// Every attention path asks this one function.
MKSERVE_HOST_DEVICE inline int64_t FirstKeyInWindow(int64_t query_position, int64_t window_tokens) {
  int64_t first = query_position - window_tokens + 1;
  return first > 0 ? first : 0;
}

struct LayerSpec {
  AttentionKind attention = AttentionKind::kFull;
  bool uses_rope = false;  // sliding layers, and dense-prefix layers when the prefix pattern is 1
  int64_t window_tokens = 0;  // sliding layers only; 0 means unlimited
  FfnKind ffn = FfnKind::kMoe;
  int64_t ffn_intermediate_size = 0;  // dense: prefix width; MoE: per-expert width

  bool operator==(const LayerSpec&) const = default;
};

struct ModelConfig {
  std::string model_type;  // "cohere2_moe"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 0;

  NormKind norm = NormKind::kRmsNorm;
  float norm_eps = 1e-6f;  // rms_norm_eps, or layer_norm_eps when rms_norm_eps is absent

  double rope_theta = 10000.0;  // only unscaled ("default") RoPE is supported
  int64_t sliding_window = 0;
  // Raw pattern keys, kept so ToJson reproduces the config (layers already reflect them).
  int64_t sliding_window_pattern = 4;
  int64_t prefix_dense_sliding_window_pattern = 1;  // 1 forces RoPE on dense full layers

  int64_t dense_intermediate_size = 0;   // prefix_dense_intermediate_size
  int64_t expert_intermediate_size = 0;  // intermediate_size: the width of ONE routed expert
  int64_t num_experts = 0;
  int64_t num_experts_per_token = 0;
  int64_t num_shared_experts = 0;  // one MLP of width expert_intermediate_size * num_shared_experts
  SharedExpertCombination shared_expert_combination = SharedExpertCombination::kAverage;
  ExpertSelection expert_selection = ExpertSelection::kSoftmax;
  bool norm_topk_prob = true;  // sigmoid only: divide the top-k weights by their sum

  float logit_scale = 0.0625f;
  bool tie_word_embeddings = true;

  int32_t bos_token_id = -1;
  int32_t pad_token_id = -1;
  std::vector<int32_t> eos_token_ids;

  std::vector<LayerSpec> layers;  // num_layers entries

  // quantization_config.quant_method, empty for an unquantized checkpoint. The weight mapper
  // refuses quantized checkpoints until their scales are mapped.
  std::string quantization_method;

  int64_t q_width() const { return num_heads * head_dim; }
  int64_t kv_width() const { return num_kv_heads * head_dim; }
  int64_t num_dense_layers() const;
  int64_t num_moe_layers() const { return num_layers - num_dense_layers(); }

  // Parses and validates; an unsupported or inconsistent value throws mkserve::Error naming the
  // key and the value.
  static ModelConfig FromJson(const nlohmann::json& json);
  static ModelConfig Load(const std::filesystem::path& config_json);
  // A checkpoint directory: config.json, plus generation_config.json's eos_token_id when that file
  // exists. Generation stops at the ids of either file (HF's generate() reads the second, and a
  // checkpoint may list its chat end-of-turn token only there).
  static ModelConfig LoadDir(const std::filesystem::path& model_dir);
  // The HF config.json form (explicit layer_types and mlp_layer_types).
  nlohmann::json ToJson() const;

  bool operator==(const ModelConfig&) const = default;
};

}  // namespace mkserve
