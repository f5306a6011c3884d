#include "backends/cpu/cpu_weights.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"

namespace mkserve::cpu {
namespace {

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

void CheckShape(const TensorView& view, const std::vector<int64_t>& expected) {
  if (view.shape != expected) {
    throw Error("tensor '" + view.name + "' has shape " + ShapeText(view.shape) +
                ", the config implies " + ShapeText(expected));
  }
}

// A NaN or an infinity in a weight turns every answer into garbage without an error: refused.
std::vector<float> FiniteFloats(const TensorView& view) {
  std::vector<float> values = view.ToFloat();
  if (!std::all_of(values.begin(), values.end(), [](float v) { return std::isfinite(v); })) {
    throw Error("tensor '" + view.name +
                "' holds NaN or infinite values: the checkpoint is damaged");
  }
  return values;
}

Matrix ToMatrix(const TensorView& view, int64_t rows, int64_t cols) {
  CheckShape(view, {rows, cols});
  return Matrix{FiniteFloats(view), rows, cols};
}

std::vector<float> ToVector(const TensorView& view, int64_t size) {
  CheckShape(view, {size});
  return FiniteFloats(view);
}

MlpMatrices ToMlp(const MlpWeights& mlp, int64_t hidden, int64_t intermediate) {
  return MlpMatrices{ToMatrix(mlp.gate, intermediate, hidden),
                     ToMatrix(mlp.up, intermediate, hidden),
                     ToMatrix(mlp.down, hidden, intermediate)};
}

MoeMatrices ToMoe(const ModelConfig& config, const LayerWeights& layer, int64_t layer_id) {
  const std::string where = "layer " + std::to_string(layer_id) + ": ";
  if (!layer.router) throw Error(where + "MoE layer without router weights");
  if (static_cast<int64_t>(layer.experts.size()) != config.num_experts) {
    throw Error(where + std::to_string(layer.experts.size()) + " experts, the config has " +
                std::to_string(config.num_experts));
  }
  if ((config.num_shared_experts > 0) != layer.shared_expert.has_value()) {
    throw Error(where + "shared expert weights do not match num_shared_experts");
  }
  const int64_t hidden = config.hidden_size;
  MoeMatrices moe;
  moe.router = ToMatrix(*layer.router, config.num_experts, hidden);
  for (const MlpWeights& expert : layer.experts) {
    moe.experts.push_back(ToMlp(expert, hidden, config.expert_intermediate_size));
  }
  if (layer.shared_expert) {
    int64_t width = config.expert_intermediate_size * config.num_shared_experts;
    moe.shared_expert = ToMlp(*layer.shared_expert, hidden, width);
  }
  return moe;
}

CpuLayerWeights ToLayer(const ModelConfig& config, const LayerWeights& layer, int64_t layer_id) {
  const int64_t hidden = config.hidden_size;
  CpuLayerWeights out;
  out.input_norm = ToVector(layer.input_norm, hidden);
  out.q_proj = ToMatrix(layer.q_proj, config.q_width(), hidden);
  out.k_proj = ToMatrix(layer.k_proj, config.kv_width(), hidden);
  out.v_proj = ToMatrix(layer.v_proj, config.kv_width(), hidden);
  out.o_proj = ToMatrix(layer.o_proj, hidden, config.q_width());
  const LayerSpec& spec = config.layers[layer_id];
  if (spec.ffn == FfnKind::kDense) {
    if (!layer.dense) throw Error("layer " + std::to_string(layer_id) + ": dense MLP missing");
    out.dense = ToMlp(*layer.dense, hidden, spec.ffn_intermediate_size);
  } else {
    out.moe = ToMoe(config, layer, layer_id);
  }
  return out;
}

}  // namespace

CpuWeights ConvertWeights(const ModelConfig& config, const ModelWeights& weights) {
  if (static_cast<int64_t>(weights.layers.size()) != config.num_layers ||
      static_cast<int64_t>(config.layers.size()) != config.num_layers) {
    throw Error("weights have " + std::to_string(weights.layers.size()) +
                " layers, the config has " + std::to_string(config.num_layers));
  }
  CpuWeights out;
  out.embed_tokens = ToMatrix(weights.embed_tokens, config.vocab_size, config.hidden_size);
  out.final_norm = ToVector(weights.final_norm, config.hidden_size);
  // A tied head is the embedding's own bytes: share the fp32 copy instead of making a second.
  if (weights.lm_head.bytes.data() != weights.embed_tokens.bytes.data()) {
    out.untied_lm_head = ToMatrix(weights.lm_head, config.vocab_size, config.hidden_size);
  }
  for (int64_t i = 0; i < config.num_layers; ++i) {
    out.layers.push_back(ToLayer(config, weights.layers[i], i));
  }
  return out;
}

}  // namespace mkserve::cpu
