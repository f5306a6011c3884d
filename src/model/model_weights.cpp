// Maps checkpoint tensors onto the model structure. Problems are collected, not thrown one at a
// time, so a wrong checkpoint is diagnosed in one run: missing, mis-shaped and unexpected
// tensors are listed together.
#include "model/model_weights.h"

#include <set>
#include <string>

#include "common/error.h"

namespace mkserve {
namespace {

constexpr size_t kMaxListedProblems = 20;

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// Rows [e] of a 3-D tensor as a 2-D view: one expert of a fused [E, rows, cols] tensor.
TensorView ExpertMatrix(const TensorView& fused, int64_t expert, const std::string& suffix) {
  TensorView view = fused.SliceRows(expert, 1);
  view.shape.erase(view.shape.begin());
  view.name = fused.name + "[" + std::to_string(expert) + "]" + suffix;
  return view;
}

class WeightMapper {
 public:
  WeightMapper(const ModelConfig& config, const Checkpoint& checkpoint)
      : config_(config), checkpoint_(checkpoint) {}

  ModelWeights Map();

 private:
  bool Has(const std::string& name) const { return checkpoint_.Find(name) != nullptr; }
  TensorView Take(const std::string& name, const std::vector<int64_t>& shape);
  MlpWeights TakeMlp(const std::string& prefix, int64_t width);
  LayerWeights MapLayer(int64_t index);
  void MapExperts(const std::string& prefix, LayerWeights& layer);
  void MapFusedExperts(const std::string& prefix, LayerWeights& layer);
  void ListUnexpected();
  void ThrowIfProblems() const;

  const ModelConfig& config_;
  const Checkpoint& checkpoint_;
  std::set<std::string> used_;
  std::vector<std::string> problems_;
};

TensorView WeightMapper::Take(const std::string& name, const std::vector<int64_t>& shape) {
  const TensorView* tensor = checkpoint_.Find(name);
  if (tensor == nullptr) {
    problems_.push_back("missing " + name + " " + ShapeString(shape));
    TensorView absent;
    absent.name = name;
    return absent;
  }
  used_.insert(name);
  if (tensor->shape != shape) {
    problems_.push_back("mis-shaped " + name + ": " + ShapeString(tensor->shape) + ", expected " +
                        ShapeString(shape));
  }
  return *tensor;
}

MlpWeights WeightMapper::TakeMlp(const std::string& prefix, int64_t width) {
  int64_t hidden = config_.hidden_size;
  return MlpWeights{.gate = Take(prefix + "gate_proj.weight", {width, hidden}),
                    .up = Take(prefix + "up_proj.weight", {width, hidden}),
                    .down = Take(prefix + "down_proj.weight", {hidden, width})};
}

// transformers 5: experts.gate_up_proj [E, 2I, H] (gate rows first) and experts.down_proj [E, H,
// I].
void WeightMapper::MapFusedExperts(const std::string& prefix, LayerWeights& layer) {
  int64_t experts = config_.num_experts, width = config_.expert_intermediate_size;
  int64_t hidden = config_.hidden_size;
  size_t problems_before = problems_.size();
  TensorView gate_up = Take(prefix + "experts.gate_up_proj", {experts, 2 * width, hidden});
  TensorView down = Take(prefix + "experts.down_proj", {experts, hidden, width});
  if (problems_.size() != problems_before) return;  // no views over a wrong shape
  for (int64_t e = 0; e < experts; ++e) {
    TensorView pair = ExpertMatrix(gate_up, e, "");
    TensorView gate = pair.SliceRows(0, width);
    TensorView up = pair.SliceRows(width, width);
    gate.name = pair.name + ".gate";
    up.name = pair.name + ".up";
    layer.experts.push_back({.gate = gate, .up = up, .down = ExpertMatrix(down, e, "")});
  }
}

void WeightMapper::MapExperts(const std::string& prefix, LayerWeights& layer) {
  layer.router = Take(prefix + "gate.weight", {config_.num_experts, config_.hidden_size});
  if (Has(prefix + "experts.gate_up_proj") || Has(prefix + "experts.down_proj")) {
    MapFusedExperts(prefix, layer);
  } else {
    for (int64_t e = 0; e < config_.num_experts; ++e) {
      layer.experts.push_back(
          TakeMlp(prefix + "experts." + std::to_string(e) + ".", config_.expert_intermediate_size));
    }
  }
  if (config_.num_shared_experts > 0) {
    layer.shared_expert = TakeMlp(prefix + "shared_experts.",
                                  config_.expert_intermediate_size * config_.num_shared_experts);
  }
}

LayerWeights WeightMapper::MapLayer(int64_t index) {
  std::string prefix = "model.layers." + std::to_string(index) + ".";
  int64_t hidden = config_.hidden_size;
  LayerWeights layer;
  layer.input_norm = Take(prefix + "input_layernorm.weight", {hidden});
  layer.q_proj = Take(prefix + "self_attn.q_proj.weight", {config_.q_width(), hidden});
  layer.k_proj = Take(prefix + "self_attn.k_proj.weight", {config_.kv_width(), hidden});
  layer.v_proj = Take(prefix + "self_attn.v_proj.weight", {config_.kv_width(), hidden});
  layer.o_proj = Take(prefix + "self_attn.o_proj.weight", {hidden, config_.q_width()});
  const LayerSpec& spec = config_.layers[static_cast<size_t>(index)];
  if (spec.ffn == FfnKind::kDense) {
    layer.dense = TakeMlp(prefix + "mlp.", spec.ffn_intermediate_size);
  } else {
    MapExperts(prefix + "mlp.", layer);
  }
  return layer;
}

void WeightMapper::ListUnexpected() {
  for (const auto& [name, tensor] : checkpoint_.tensors()) {
    if (!used_.contains(name)) {
      problems_.push_back("unexpected " + name + " " + ShapeString(tensor.shape));
    }
  }
}

void WeightMapper::ThrowIfProblems() const {
  if (problems_.empty()) return;
  std::string message =
      "checkpoint does not match config.json (" + std::to_string(problems_.size()) + " problems):";
  for (size_t i = 0; i < problems_.size() && i < kMaxListedProblems; ++i) {
    message += "\n  " + problems_[i];
  }
  if (problems_.size() > kMaxListedProblems) {
    message += "\n  ... and " + std::to_string(problems_.size() - kMaxListedProblems) + " more";
  }
  throw Error(message);
}

ModelWeights WeightMapper::Map() {
  int64_t vocab = config_.vocab_size, hidden = config_.hidden_size;
  ModelWeights weights;
  weights.embed_tokens = Take("model.embed_tokens.weight", {vocab, hidden});
  weights.final_norm = Take("model.norm.weight", {hidden});
  if (config_.tie_word_embeddings) {
    weights.lm_head = weights.embed_tokens;
    used_.insert("lm_head.weight");  // HF ties it to the embedding even when a copy is stored
  } else {
    weights.lm_head = Take("lm_head.weight", {vocab, hidden});
  }
  for (int64_t i = 0; i < config_.num_layers; ++i) weights.layers.push_back(MapLayer(i));
  ListUnexpected();
  ThrowIfProblems();
  return weights;
}

// FP8 compressed-tensors: F8_E4M3 weights with a `*.weight_scale` beside them. Detected up
// front so the user sees one clear message instead of hundreds of mismatches.
void RejectQuantized(const ModelConfig& config, const Checkpoint& checkpoint) {
  std::string evidence;
  if (!config.quantization_method.empty()) {
    evidence = "config.json quantization_config.quant_method = " + config.quantization_method;
  }
  for (const auto& [name, tensor] : checkpoint.tensors()) {
    if (!evidence.empty()) break;
    if (tensor.dtype == DType::kF8E4M3) evidence = "tensor \"" + name + "\" is F8_E4M3";
    if (name.ends_with(".weight_scale")) evidence = "tensor \"" + name + "\" is a weight scale";
  }
  if (!evidence.empty()) {
    throw Error("FP8/quantized checkpoints are not supported yet (" + evidence +
                "); use the BF16 checkpoint");
  }
}

}  // namespace

ModelWeights MapModelWeights(const ModelConfig& config, const Checkpoint& checkpoint) {
  RejectQuantized(config, checkpoint);
  return WeightMapper(config, checkpoint).Map();
}

}  // namespace mkserve
