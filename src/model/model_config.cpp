// ModelConfig parsing: the HF Cohere2MoeConfig defaults apply where a key is absent; anything
// mkserve cannot run exactly is rejected here, with the key and value in the message.
#include "model/model_config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/regular_file.h"
#include "model/detail/config_reader.h"
#include "model/detail/json_file.h"
#include "model/detail/layer_schedule.h"

namespace mkserve {
namespace {

using detail::ConfigReader;
using detail::ReadJsonFile;
using detail::ThrowKeyError;
using nlohmann::json;

constexpr char kModelType[] = "cohere2_moe";

// Defaults of the HF class (configuration_cohere2_moe.py) for keys a config.json may omit.
constexpr int64_t kDefaultVocabSize = 256000;
constexpr int64_t kDefaultHiddenSize = 8192;
constexpr int64_t kDefaultIntermediateSize = 22528;
constexpr int64_t kDefaultNumLayers = 40;
constexpr int64_t kDefaultNumHeads = 64;
constexpr int64_t kDefaultHeadDim = 128;
constexpr int64_t kDefaultMaxPositions = 8192;
constexpr double kDefaultLayerNormEps = 1e-5;
constexpr double kDefaultRopeTheta = 10000.0;
constexpr int64_t kDefaultSlidingWindow = 4096;
constexpr int64_t kDefaultNumExperts = 8;
constexpr int64_t kDefaultExpertsPerToken = 2;
constexpr double kDefaultLogitScale = 0.0625;
constexpr int64_t kDefaultBosTokenId = 5;
constexpr int64_t kDefaultEosTokenId = 255001;
constexpr int64_t kDefaultPadTokenId = 0;

void CheckFixedSemantics(const ConfigReader& reader) {
  if (reader.String("hidden_act", "silu") != "silu") {
    ThrowKeyError("hidden_act", reader.Raw("hidden_act"), "only silu (SwiGLU) is supported");
  }
  if (reader.Bool("attention_bias", false)) {
    ThrowKeyError("attention_bias", true, "attention biases are not supported");
  }
  if (reader.OptionalBool("use_qk_norm").value_or(false)) {
    ThrowKeyError("use_qk_norm", true, "QK-norm is not supported");
  }
  if (!reader.OptionalBool("use_parallel_block").value_or(true)) {
    ThrowKeyError("use_parallel_block", false, "only the parallel block is supported");
  }
}

void ParseHeads(const ConfigReader& reader, ModelConfig& config) {
  config.num_heads = reader.PositiveInt("num_attention_heads", kDefaultNumHeads);
  config.num_kv_heads = reader.OptionalInt("num_key_value_heads").value_or(config.num_heads);
  if (config.num_kv_heads <= 0) {
    ThrowKeyError("num_key_value_heads", config.num_kv_heads, "must be a positive integer");
  }
  if (config.num_heads % config.num_kv_heads != 0) {
    ThrowKeyError(
        "num_key_value_heads", config.num_kv_heads,
        "num_attention_heads (" + std::to_string(config.num_heads) + ") is not a multiple of it");
  }
}

// Absent: the class default 128. Explicit null: HF falls back to hidden_size / heads.
void ParseHeadDim(const ConfigReader& reader, const json& json, ModelConfig& config) {
  if (!json.contains("head_dim") || reader.Has("head_dim")) {
    config.head_dim = reader.PositiveInt("head_dim", kDefaultHeadDim);
    return;
  }
  if (config.hidden_size % config.num_heads != 0) {
    ThrowKeyError("head_dim", nullptr,
                  "is null and hidden_size is not a multiple of num_attention_heads");
  }
  config.head_dim = config.hidden_size / config.num_heads;
}

// The norms compute in float32: an epsilon that is 0 or infinite there (1e-46, 1e39) would be a
// silently different model.
float NormEpsilon(const std::string& key, double value) {
  const float narrowed = static_cast<float>(value);
  if (!(narrowed > 0.0f) || !std::isfinite(narrowed))
    ThrowKeyError(key, value, "must be > 0 and finite as a float32");
  return narrowed;
}

void ParseNorm(const ConfigReader& reader, ModelConfig& config) {
  // rms_norm_eps present (non-null) selects RMSNorm; otherwise Cohere's LayerNorm.
  std::optional<double> rms_eps = reader.OptionalNumber("rms_norm_eps");
  double eps = rms_eps ? *rms_eps : reader.Number("layer_norm_eps", kDefaultLayerNormEps);
  config.norm = rms_eps ? NormKind::kRmsNorm : NormKind::kLayerNorm;
  config.norm_eps = NormEpsilon(rms_eps ? "rms_norm_eps" : "layer_norm_eps", eps);
}

// One flat rope dict ({"rope_type": "default", "rope_theta": x}); returns its theta if given.
std::optional<double> ParseRopeDict(const std::string& key, const json& dict) {
  if (!dict.is_object()) ThrowKeyError(key, dict, "must be an object");
  std::string type = "default";
  for (const char* type_key : {"rope_type", "type"}) {
    if (dict.contains(type_key) && !dict[type_key].is_null()) {
      if (!dict[type_key].is_string()) ThrowKeyError(key, dict, "rope_type must be a string");
      type = dict[type_key].get<std::string>();
    }
  }
  if (type != "default") {
    ThrowKeyError(key, dict, "RoPE scaling type \"" + type + "\" is not supported (only default)");
  }
  if (!dict.contains("rope_theta") || dict["rope_theta"].is_null()) return std::nullopt;
  if (!dict["rope_theta"].is_number()) ThrowKeyError(key, dict, "rope_theta must be a number");
  return dict["rope_theta"].get<double>();
}

// transformers 5 may write rope_parameters flat or keyed by layer type; older files write
// rope_theta and rope_scaling at the top level. Every form must agree on one unscaled theta.
void ParseRope(const ConfigReader& reader, ModelConfig& config) {
  std::optional<double> theta = reader.OptionalNumber("rope_theta");
  if (reader.Has("rope_scaling")) ParseRopeDict("rope_scaling", reader.Raw("rope_scaling"));
  if (reader.Has("rope_parameters")) {
    const json& params = reader.Raw("rope_parameters");
    bool per_layer_type = params.is_object() && !params.empty() &&
                          std::all_of(params.begin(), params.end(),
                                      [](const json& value) { return value.is_object(); });
    std::vector<json> dicts = per_layer_type ? std::vector<json>(params.begin(), params.end())
                                             : std::vector<json>{params};
    for (const json& dict : dicts) {
      std::optional<double> dict_theta = ParseRopeDict("rope_parameters", dict);
      if (dict_theta && theta && *dict_theta != *theta) {
        ThrowKeyError("rope_parameters", params,
                      "rope_theta disagrees with " + std::to_string(*theta) +
                          " (different thetas per layer type or vs rope_theta are not supported)");
      }
      if (dict_theta) theta = dict_theta;
    }
  }
  config.rope_theta = theta.value_or(kDefaultRopeTheta);
  if (!(config.rope_theta > 0.0)) ThrowKeyError("rope_theta", config.rope_theta, "must be > 0");
}

void ParseExperts(const ConfigReader& reader, ModelConfig& config) {
  config.num_experts = reader.Int("num_experts", kDefaultNumExperts);
  config.num_experts_per_token = reader.Int("num_experts_per_tok", kDefaultExpertsPerToken);
  config.num_shared_experts = reader.Int("num_shared_experts", 0);
  if (config.num_shared_experts < 0) {
    ThrowKeyError("num_shared_experts", config.num_shared_experts, "must be >= 0");
  }
  std::string combination = reader.String("shared_expert_combination_strategy", "average");
  if (combination != "average" && combination != "sum") {
    ThrowKeyError("shared_expert_combination_strategy", combination, "must be average or sum");
  }
  config.shared_expert_combination =
      combination == "sum" ? SharedExpertCombination::kSum : SharedExpertCombination::kAverage;
  std::string selection = reader.String("expert_selection_fn", "softmax");
  if (selection != "softmax" && selection != "sigmoid") {
    ThrowKeyError("expert_selection_fn", selection, "must be softmax or sigmoid");
  }
  config.expert_selection =
      selection == "sigmoid" ? ExpertSelection::kSigmoid : ExpertSelection::kSoftmax;
  config.norm_topk_prob = reader.Bool("norm_topk_prob", true);
}

// Sizes far past any model this server runs: such a config is a typo or an attack, and building
// its per-layer tables and weight names would exhaust memory (or overflow a product such as
// heads x head_dim into a plausible width) before any tensor could disagree.
void CheckSizes(const ModelConfig& config) {
  const struct {
    const char* key;
    int64_t value, max;
  } sizes[] = {
      {"vocab_size", config.vocab_size, int64_t{1} << 24},
      {"hidden_size", config.hidden_size, int64_t{1} << 16},
      {"num_hidden_layers", config.num_layers, 1024},
      {"max_position_embeddings", config.max_position_embeddings, int64_t{1} << 24},
      {"num_attention_heads", config.num_heads, 1024},
      {"num_key_value_heads", config.num_kv_heads, 1024},
      {"head_dim", config.head_dim, 1024},
      {"num_experts", config.num_experts, 4096},
      {"num_shared_experts", config.num_shared_experts, 64},
      {"intermediate_size", config.expert_intermediate_size, int64_t{1} << 20},
      {"prefix_dense_intermediate_size", config.dense_intermediate_size, int64_t{1} << 20},
  };
  for (const auto& size : sizes) {
    if (size.value > size.max) {
      ThrowKeyError(
          size.key, size.value,
          "is past any model this server runs (at most " + std::to_string(size.max) + ")");
    }
  }
  if (config.head_dim % 2 != 0) {
    ThrowKeyError("head_dim", config.head_dim,
                  "must be even: rotary embeddings turn pairs of dimensions");
  }
  if (!(config.logit_scale > 0.0f) || !std::isfinite(config.logit_scale)) {
    ThrowKeyError("logit_scale", config.logit_scale, "must be a positive number");
  }
}

// Only MoE layers need a sane expert setup; an all-dense model may keep the defaults.
void CheckExperts(const ModelConfig& config) {
  if (config.num_moe_layers() == 0) return;
  if (config.num_experts <= 0) {
    ThrowKeyError("num_experts", config.num_experts, "must be a positive integer");
  }
  if (config.num_experts_per_token <= 0 || config.num_experts_per_token > config.num_experts) {
    ThrowKeyError("num_experts_per_tok", config.num_experts_per_token,
                  "must be between 1 and num_experts (" + std::to_string(config.num_experts) + ")");
  }
  if (config.expert_intermediate_size <= 0) {
    ThrowKeyError("intermediate_size", config.expert_intermediate_size,
                  "must be a positive integer");
  }
}

int32_t TokenId(const std::string& key, int64_t id, int64_t vocab_size) {
  if (id < 0 || id >= vocab_size) {
    ThrowKeyError(key, id,
                  "must be a token id below vocab_size (" + std::to_string(vocab_size) + ")");
  }
  return static_cast<int32_t>(id);
}

void ParseTokens(const ConfigReader& reader, const json& json, ModelConfig& config) {
  // Absent keys take the class defaults; explicit null means "no such token".
  auto optional_id = [&](const std::string& key, int64_t fallback) -> int32_t {
    if (!json.contains(key)) return TokenId(key, fallback, config.vocab_size);
    std::optional<int64_t> id = reader.OptionalInt(key);
    return id ? TokenId(key, *id, config.vocab_size) : -1;
  };
  config.bos_token_id = optional_id("bos_token_id", kDefaultBosTokenId);
  config.pad_token_id = optional_id("pad_token_id", kDefaultPadTokenId);
  std::vector<int64_t> eos = json.contains("eos_token_id")
                                 ? reader.IntOrIntList("eos_token_id")
                                 : std::vector<int64_t>{kDefaultEosTokenId};
  config.eos_token_ids.clear();
  for (int64_t id : eos)
    config.eos_token_ids.push_back(TokenId("eos_token_id", id, config.vocab_size));
}

void ParseQuantization(const ConfigReader& reader, ModelConfig& config) {
  if (!reader.Has("quantization_config")) return;
  const json& quantization = reader.Raw("quantization_config");
  if (!quantization.is_object())
    ThrowKeyError("quantization_config", quantization, "must be an object");
  config.quantization_method = quantization.value("quant_method", std::string("unknown"));
}

json LayerTypesJson(const std::vector<LayerSpec>& layers) {
  json types = json::array();
  for (const LayerSpec& layer : layers) {
    types.push_back(layer.attention == AttentionKind::kFull ? "full_attention"
                                                            : "sliding_attention");
  }
  return types;
}

json MlpLayerTypesJson(const std::vector<LayerSpec>& layers) {
  json types = json::array();
  for (const LayerSpec& layer : layers) {
    types.push_back(layer.ffn == FfnKind::kDense ? "dense" : "sparse");
  }
  return types;
}

// first_k_dense_replace when the dense layers are exactly a prefix (what other tools read).
std::optional<int64_t> DensePrefixLength(const std::vector<LayerSpec>& layers) {
  auto first_moe = std::find_if(layers.begin(), layers.end(),
                                [](const LayerSpec& layer) { return layer.ffn == FfnKind::kMoe; });
  bool dense_after = std::any_of(
      first_moe, layers.end(), [](const LayerSpec& layer) { return layer.ffn == FfnKind::kDense; });
  if (dense_after) return std::nullopt;
  return first_moe - layers.begin();
}

// The shortest decimal that reads back as `value`: 1e-06 rather than 9.999999974752427e-07.
double ShortestDecimal(float value) {
  char buffer[32];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::strtod(std::string(buffer, result.ptr).c_str(), nullptr);
}

json TokenIdJson(int32_t id) { return id < 0 ? json(nullptr) : json(id); }

json EosJson(const std::vector<int32_t>& ids) {
  if (ids.empty()) return nullptr;
  if (ids.size() == 1) return ids[0];
  return ids;
}

}  // namespace

int64_t ModelConfig::num_dense_layers() const {
  return std::count_if(layers.begin(), layers.end(),
                       [](const LayerSpec& layer) { return layer.ffn == FfnKind::kDense; });
}

ModelConfig ModelConfig::FromJson(const json& json) {
  if (!json.is_object()) throw Error("config.json must be a JSON object");
  ConfigReader reader(json);
  ModelConfig config;
  if (!json.contains("model_type"))
    throw Error("config key \"model_type\" is missing (expected cohere2_moe)");
  config.model_type = reader.String("model_type", "");
  if (config.model_type != kModelType) {
    ThrowKeyError("model_type", config.model_type, "only cohere2_moe is supported");
  }
  CheckFixedSemantics(reader);
  config.vocab_size = reader.PositiveInt("vocab_size", kDefaultVocabSize);
  config.hidden_size = reader.PositiveInt("hidden_size", kDefaultHiddenSize);
  config.num_layers = reader.PositiveInt("num_hidden_layers", kDefaultNumLayers);
  config.max_position_embeddings =
      reader.PositiveInt("max_position_embeddings", kDefaultMaxPositions);
  ParseHeads(reader, config);
  ParseHeadDim(reader, json, config);
  ParseNorm(reader, config);
  ParseRope(reader, config);
  config.sliding_window = json.contains("sliding_window")
                              ? reader.OptionalInt("sliding_window").value_or(0)
                              : kDefaultSlidingWindow;
  config.sliding_window_pattern = reader.PositiveInt("sliding_window_pattern", 4);
  config.prefix_dense_sliding_window_pattern =
      reader.PositiveInt("prefix_dense_sliding_window_pattern", 1);
  config.dense_intermediate_size = reader.OptionalInt("prefix_dense_intermediate_size").value_or(0);
  if (config.dense_intermediate_size < 0) {  // refused even where no layer is dense
    ThrowKeyError("prefix_dense_intermediate_size", config.dense_intermediate_size,
                  "must be a positive integer");
  }
  config.expert_intermediate_size = reader.Int("intermediate_size", kDefaultIntermediateSize);
  ParseExperts(reader, config);
  config.logit_scale = static_cast<float>(reader.Number("logit_scale", kDefaultLogitScale));
  config.tie_word_embeddings = reader.OptionalBool("tie_word_embeddings").value_or(true);
  CheckSizes(config);
  ParseTokens(reader, json, config);
  config.layers = detail::DeriveLayerSpecs(reader, config);
  CheckExperts(config);
  ParseQuantization(reader, config);
  return config;
}

json ModelConfig::ToJson() const {
  json out = {
      {"architectures", {"Cohere2MoeForCausalLM"}},
      {"model_type", model_type},
      {"vocab_size", vocab_size},
      {"hidden_size", hidden_size},
      {"num_hidden_layers", num_layers},
      {"num_attention_heads", num_heads},
      {"num_key_value_heads", num_kv_heads},
      {"head_dim", head_dim},
      {"max_position_embeddings", max_position_embeddings},
      {"hidden_act", "silu"},
      {"attention_bias", false},
      {"use_qk_norm", false},
      {"use_parallel_block", true},
      {"rope_theta", rope_theta},
      {"rope_scaling", nullptr},
      {"sliding_window", sliding_window > 0 ? json(sliding_window) : json(nullptr)},
      {"sliding_window_pattern", sliding_window_pattern},
      {"prefix_dense_sliding_window_pattern", prefix_dense_sliding_window_pattern},
      {"layer_types", LayerTypesJson(layers)},
      {"mlp_layer_types", MlpLayerTypesJson(layers)},
      {"prefix_dense_intermediate_size",
       dense_intermediate_size > 0 ? json(dense_intermediate_size) : json(nullptr)},
      {"intermediate_size", expert_intermediate_size},
      {"num_experts", num_experts},
      {"num_experts_per_tok", num_experts_per_token},
      {"num_shared_experts", num_shared_experts},
      {"shared_expert_combination_strategy",
       shared_expert_combination == SharedExpertCombination::kSum ? "sum" : "average"},
      {"expert_selection_fn",
       expert_selection == ExpertSelection::kSigmoid ? "sigmoid" : "softmax"},
      {"norm_topk_prob", norm_topk_prob},
      {"logit_scale", ShortestDecimal(logit_scale)},
      {"tie_word_embeddings", tie_word_embeddings},
      {"bos_token_id", TokenIdJson(bos_token_id)},
      {"pad_token_id", TokenIdJson(pad_token_id)},
      {"eos_token_id", EosJson(eos_token_ids)},
      {"dtype", "bfloat16"},
  };
  // rms_norm_eps present selects RMSNorm; null leaves LayerNorm with layer_norm_eps.
  out["rms_norm_eps"] =
      norm == NormKind::kRmsNorm ? json(ShortestDecimal(norm_eps)) : json(nullptr);
  out["layer_norm_eps"] =
      norm == NormKind::kLayerNorm ? ShortestDecimal(norm_eps) : kDefaultLayerNormEps;
  if (std::optional<int64_t> first_k = DensePrefixLength(layers)) {
    out["first_k_dense_replace"] = *first_k;
  }
  return out;
}

ModelConfig ModelConfig::Load(const std::filesystem::path& config_json) {
  json parsed = ReadJsonFile(config_json);
  try {
    return FromJson(parsed);
  } catch (const Error& error) {
    throw Error(config_json.string() + ": " + error.what());
  }
}

ModelConfig ModelConfig::LoadDir(const std::filesystem::path& model_dir) {
  ModelConfig config = Load(model_dir / "config.json");
  const std::filesystem::path generation = model_dir / "generation_config.json";
  if (!EntryExists(generation)) return config;
  json parsed = ReadJsonFile(generation);
  try {
    if (!parsed.is_object()) throw Error("must be a JSON object");
    for (int64_t id : ConfigReader(parsed).IntOrIntList("eos_token_id")) {
      int32_t eos = TokenId("eos_token_id", id, config.vocab_size);
      if (std::find(config.eos_token_ids.begin(), config.eos_token_ids.end(), eos) ==
          config.eos_token_ids.end()) {
        config.eos_token_ids.push_back(eos);
      }
    }
  } catch (const Error& error) {
    throw Error(generation.string() + ": " + error.what());
  }
  return config;
}

}  // namespace mkserve
