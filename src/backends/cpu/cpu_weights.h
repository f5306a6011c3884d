// CpuWeights: the model's tensors converted once to fp32 matrices, whatever their stored dtype.
// Every matrix is checked against the shape the config implies.
#pragma once

#include <optional>
#include <vector>

#include "backends/cpu/linear.h"
#include "backends/cpu/mlp.h"
#include "backends/cpu/moe.h"
#include "model/model_config.h"
#include "model/model_weights.h"

namespace mkserve::cpu {

struct CpuLayerWeights {
  std::vector<float> input_norm;  // [hidden]
  Matrix q_proj;                  // [num_heads * head_dim, hidden]
  Matrix k_proj;                  // [num_kv_heads * head_dim, hidden]
  Matrix v_proj;                  // [num_kv_heads * head_dim, hidden]
  Matrix o_proj;                  // [hidden, num_heads * head_dim]
  std::optional<MlpMatrices> dense;
  std::optional<MoeMatrices> moe;
};

struct CpuWeights {
  Matrix embed_tokens;                   // [vocab, hidden]
  std::vector<float> final_norm;         // [hidden]
  std::optional<Matrix> untied_lm_head;  // absent when the head is the embedding
  std::vector<CpuLayerWeights> layers;

  const Matrix& lm_head() const { return untied_lm_head ? *untied_lm_head : embed_tokens; }
};

// Throws mkserve::Error naming the tensor when a view's shape is not what the config implies.
CpuWeights ConvertWeights(const ModelConfig& config, const ModelWeights& weights);

}  // namespace mkserve::cpu
