// ModelWeights: the checkpoint's tensors mapped onto the model's structure. Both expert layouts
// map to the same per-expert views: the released per-expert tensors and the fused
// `mlp.experts.gate_up_proj` [E, 2I, H] (gate rows first) / `down_proj` [E, H, I] of
// transformers 5.
#pragma once

#include <optional>
#include <vector>

#include "model/checkpoint.h"
#include "model/model_config.h"
#include "model/tensor.h"

namespace mkserve {

struct MlpWeights {  // SwiGLU: down(silu(gate(x)) * up(x))
  TensorView gate;   // [intermediate, hidden]
  TensorView up;     // [intermediate, hidden]
  TensorView down;   // [hidden, intermediate]
};

struct LayerWeights {
  TensorView input_norm;                    // [hidden]
  TensorView q_proj;                        // [num_heads * head_dim, hidden]
  TensorView k_proj;                        // [num_kv_heads * head_dim, hidden]
  TensorView v_proj;                        // [num_kv_heads * head_dim, hidden]
  TensorView o_proj;                        // [hidden, num_heads * head_dim]
  std::optional<MlpWeights> dense;          // dense layers
  std::optional<TensorView> router;         // MoE layers: [num_experts, hidden]
  std::vector<MlpWeights> experts;          // MoE layers: num_experts entries
  std::optional<MlpWeights> shared_expert;  // MoE layers with num_shared_experts > 0
};

struct ModelWeights {
  TensorView embed_tokens;  // [vocab, hidden]
  TensorView final_norm;    // [hidden]
  TensorView lm_head;       // [vocab, hidden]; the embedding itself when tied
  std::vector<LayerWeights> layers;
};

// Maps every tensor the config requires. Missing, unexpected and mis-shaped tensors are all
// listed in one mkserve::Error. The views borrow from `checkpoint`, which must outlive them.
ModelWeights MapModelWeights(const ModelConfig& config, const Checkpoint& checkpoint);

}  // namespace mkserve
