#include "backends/cpu/test_model.h"

#include <cmath>
#include <functional>
#include <random>

namespace mkserve::testing {
namespace {

constexpr int64_t kNumLayers = 6;
constexpr int64_t kWindowTokens = 8;

LayerSpec MakeLayerSpec(const ModelConfig& config, int64_t layer, int64_t num_dense) {
  LayerSpec spec;
  bool is_full = layer % 4 == 0;
  bool is_dense = layer < num_dense;
  spec.attention = is_full ? AttentionKind::kFull : AttentionKind::kSliding;
  spec.window_tokens = is_full ? 0 : config.sliding_window;
  spec.uses_rope = !is_full || is_dense;  // dense prefix layers force RoPE, as North's layer 0
  spec.ffn = is_dense ? FfnKind::kDense : FfnKind::kMoe;
  spec.ffn_intermediate_size =
      is_dense ? config.dense_intermediate_size : config.expert_intermediate_size;
  return spec;
}

void ApplyVariant(TestVariant variant, ModelConfig& config) {
  switch (variant) {
    case TestVariant::kNorth:
    case TestVariant::kDensePrefix:
      break;
    case TestVariant::kLayerNorm:
      config.norm = NormKind::kLayerNorm;
      config.norm_eps = 1e-5f;
      break;
    case TestVariant::kSoftmaxRouter:
      config.expert_selection = ExpertSelection::kSoftmax;
      break;
    case TestVariant::kRenormalisedSigmoid:
      config.norm_topk_prob = true;
      break;
    case TestVariant::kSharedAverage:
    case TestVariant::kSharedSum:
      config.num_shared_experts = 1;
      config.shared_expert_combination = variant == TestVariant::kSharedSum
                                             ? SharedExpertCombination::kSum
                                             : SharedExpertCombination::kAverage;
      break;
  }
}

}  // namespace

std::string VariantName(TestVariant variant) {
  switch (variant) {
    case TestVariant::kNorth:
      return "North";
    case TestVariant::kLayerNorm:
      return "LayerNorm";
    case TestVariant::kSoftmaxRouter:
      return "SoftmaxRouter";
    case TestVariant::kRenormalisedSigmoid:
      return "RenormalisedSigmoid";
    case TestVariant::kSharedAverage:
      return "SharedAverage";
    case TestVariant::kSharedSum:
      return "SharedSum";
    case TestVariant::kDensePrefix:
      return "DensePrefix";
  }
  return "unknown";
}

ModelConfig MakeTestConfig(TestVariant variant) {
  ModelConfig config;
  config.model_type = "cohere2_moe";
  config.vocab_size = 96;
  config.hidden_size = 32;
  config.num_layers = kNumLayers;
  config.num_heads = 4;
  config.num_kv_heads = 2;
  config.head_dim = 12;
  config.max_position_embeddings = 4096;
  config.norm = NormKind::kRmsNorm;
  config.norm_eps = 1e-6f;
  config.rope_theta = 50000.0;
  config.sliding_window = kWindowTokens;
  config.dense_intermediate_size = 24;
  config.expert_intermediate_size = 16;
  config.num_experts = 6;
  config.num_experts_per_token = 2;
  config.num_shared_experts = 0;
  config.expert_selection = ExpertSelection::kSigmoid;
  config.norm_topk_prob = false;
  config.logit_scale = 0.0625f;
  config.tie_word_embeddings = true;
  config.bos_token_id = 2;
  config.pad_token_id = 0;
  config.eos_token_ids = {3};
  ApplyVariant(variant, config);
  int64_t num_dense = variant == TestVariant::kDensePrefix ? 3 : 1;
  for (int64_t layer = 0; layer < kNumLayers; ++layer) {
    config.layers.push_back(MakeLayerSpec(config, layer, num_dense));
  }
  return config;
}

namespace {

// Makes fp32 tensors whose values depend only on (seed, name), stored in the model.
class WeightFactory {
 public:
  WeightFactory(TestModel& model, uint64_t seed) : model_(model), seed_(seed) {}

  // Uniform in [center - spread, center + spread].
  TensorView Make(const std::string& name, std::vector<int64_t> shape, float spread,
                  float center = 0.0f) {
    int64_t count = 1;
    for (int64_t dim : shape) count *= dim;
    std::mt19937_64 rng(seed_ ^ std::hash<std::string>{}(name));
    std::uniform_real_distribution<float> uniform(center - spread, center + spread);
    std::vector<float>& values = model_.storage.emplace_back(count);
    for (float& value : values) value = uniform(rng);
    TensorView view;
    view.name = name;
    view.dtype = DType::kF32;
    view.shape = std::move(shape);
    view.bytes = std::as_bytes(std::span<const float>(values));
    return view;
  }

  // A projection [rows, cols] whose outputs keep roughly the variance of its inputs.
  TensorView Projection(const std::string& name, int64_t rows, int64_t cols) {
    return Make(name, {rows, cols}, std::sqrt(3.0f / static_cast<float>(cols)));
  }

  MlpWeights Mlp(const std::string& prefix, int64_t hidden, int64_t width) {
    return MlpWeights{Projection(prefix + ".gate_proj.weight", width, hidden),
                      Projection(prefix + ".up_proj.weight", width, hidden),
                      Projection(prefix + ".down_proj.weight", hidden, width)};
  }

 private:
  TestModel& model_;
  uint64_t seed_;
};

LayerWeights MakeLayer(const ModelConfig& config, int64_t layer, WeightFactory& factory) {
  const std::string prefix = "model.layers." + std::to_string(layer);
  const int64_t hidden = config.hidden_size;
  LayerWeights weights;
  weights.input_norm = factory.Make(prefix + ".input_layernorm.weight", {hidden}, 0.2f, 1.0f);
  weights.q_proj =
      factory.Projection(prefix + ".self_attn.q_proj.weight", config.q_width(), hidden);
  weights.k_proj =
      factory.Projection(prefix + ".self_attn.k_proj.weight", config.kv_width(), hidden);
  weights.v_proj =
      factory.Projection(prefix + ".self_attn.v_proj.weight", config.kv_width(), hidden);
  weights.o_proj =
      factory.Projection(prefix + ".self_attn.o_proj.weight", hidden, config.q_width());
  const LayerSpec& spec = config.layers[layer];
  if (spec.ffn == FfnKind::kDense) {
    weights.dense = factory.Mlp(prefix + ".mlp", hidden, spec.ffn_intermediate_size);
    return weights;
  }
  // A wider router spread keeps the top-k choice far from ties.
  weights.router = factory.Make(prefix + ".mlp.gate.weight", {config.num_experts, hidden}, 1.0f);
  for (int64_t e = 0; e < config.num_experts; ++e) {
    weights.experts.push_back(factory.Mlp(prefix + ".mlp.experts." + std::to_string(e), hidden,
                                          config.expert_intermediate_size));
  }
  if (config.num_shared_experts > 0) {
    weights.shared_expert =
        factory.Mlp(prefix + ".mlp.shared_experts", hidden,
                    config.expert_intermediate_size * config.num_shared_experts);
  }
  return weights;
}

}  // namespace

std::unique_ptr<TestModel> MakeTestModel(TestVariant variant, uint64_t seed) {
  auto model = std::make_unique<TestModel>();
  model->config = MakeTestConfig(variant);
  const ModelConfig& config = model->config;
  WeightFactory factory(*model, seed);
  ModelWeights& weights = model->weights;
  weights.embed_tokens =
      factory.Make("model.embed_tokens.weight", {config.vocab_size, config.hidden_size}, 1.0f);
  weights.final_norm = factory.Make("model.norm.weight", {config.hidden_size}, 0.2f, 1.0f);
  weights.lm_head = weights.embed_tokens;  // tied
  for (int64_t layer = 0; layer < config.num_layers; ++layer) {
    weights.layers.push_back(MakeLayer(config, layer, factory));
  }
  return model;
}

std::vector<std::vector<int32_t>> ContiguousBlockTables(const KvLayout& layout,
                                                        int64_t num_tokens) {
  int64_t num_blocks = (num_tokens + kBlockTokens - 1) / kBlockTokens;
  std::vector<std::vector<int32_t>> tables(layout.num_groups());
  for (std::vector<int32_t>& table : tables) {
    for (int64_t i = 0; i < num_blocks; ++i) table.push_back(static_cast<int32_t>(i));
  }
  return tables;
}

std::vector<std::span<const int32_t>> TableSpans(const std::vector<std::vector<int32_t>>& tables) {
  return std::vector<std::span<const int32_t>>(tables.begin(), tables.end());
}

}  // namespace mkserve::testing
