#include "model/model_config.h"

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/error.h"

namespace mkserve {
namespace {

using nlohmann::json;

// The released North config as pinned in the research notes (§1.1), layer_types explicit.
json NorthJson() {
  json layer_types = json::array();
  for (int i = 0; i < 49; ++i)
    layer_types.push_back(i % 4 == 0 ? "full_attention" : "sliding_attention");
  return {{"architectures", {"Cohere2MoeForCausalLM"}},
          {"model_type", "cohere2_moe"},
          {"hidden_size", 2048},
          {"num_hidden_layers", 49},
          {"num_attention_heads", 32},
          {"num_key_value_heads", 4},
          {"head_dim", 128},
          {"intermediate_size", 768},
          {"prefix_dense_intermediate_size", 3072},
          {"first_k_dense_replace", 1},
          {"prefix_dense_sliding_window_pattern", 1},
          {"num_experts", 128},
          {"num_experts_per_tok", 8},
          {"num_shared_experts", 0},
          {"expert_selection_fn", "sigmoid"},
          {"norm_topk_prob", false},
          {"sliding_window", 4096},
          {"layer_types", layer_types},
          {"max_position_embeddings", 500000},
          {"rope_theta", 50000},
          {"rms_norm_eps", 1e-6},
          {"layer_norm_eps", 1e-5},
          {"use_qk_norm", false},
          {"use_parallel_block", true},
          {"vocab_size", 262144},
          {"bos_token_id", 2},
          {"eos_token_id", 255001},
          {"pad_token_id", 0}};
}

// Expects FromJson to throw an mkserve::Error whose message contains every fragment.
void ExpectError(const json& config, std::initializer_list<std::string> fragments) {
  try {
    ModelConfig::FromJson(config);
    ADD_FAILURE() << "no error for " << config.dump().substr(0, 200);
  } catch (const Error& error) {
    std::string message = error.what();
    for (const std::string& fragment : fragments) {
      EXPECT_NE(message.find(fragment), std::string::npos)
          << "'" << fragment << "' not in: " << message;
    }
  }
}

TEST(ModelConfigTest, NorthGeometryAndSchedule) {
  ModelConfig config = ModelConfig::FromJson(NorthJson());
  EXPECT_EQ(config.hidden_size, 2048);
  EXPECT_EQ(config.q_width(), 4096);
  EXPECT_EQ(config.kv_width(), 512);
  EXPECT_EQ(config.norm, NormKind::kRmsNorm);
  EXPECT_FLOAT_EQ(config.norm_eps, 1e-6f);
  EXPECT_EQ(config.rope_theta, 50000.0);
  EXPECT_EQ(config.expert_selection, ExpertSelection::kSigmoid);
  EXPECT_FALSE(config.norm_topk_prob);
  EXPECT_TRUE(config.tie_word_embeddings);       // key absent: class default
  EXPECT_FLOAT_EQ(config.logit_scale, 0.0625f);  // key absent: class default
  EXPECT_EQ(config.eos_token_ids, std::vector<int32_t>{255001});
  ASSERT_EQ(config.layers.size(), 49u);
  EXPECT_EQ(config.num_dense_layers(), 1);
  EXPECT_EQ(config.num_moe_layers(), 48);
  const LayerSpec& layer0 = config.layers[0];
  EXPECT_EQ(layer0.attention, AttentionKind::kFull);
  EXPECT_TRUE(layer0.uses_rope);  // forced: dense prefix with prefix pattern 1
  EXPECT_EQ(layer0.ffn, FfnKind::kDense);
  EXPECT_EQ(layer0.ffn_intermediate_size, 3072);
  EXPECT_EQ(layer0.window_tokens, 0);
  for (int i = 1; i < 49; ++i) {
    const LayerSpec& layer = config.layers[i];
    bool full = i % 4 == 0;
    EXPECT_EQ(layer.attention, full ? AttentionKind::kFull : AttentionKind::kSliding) << i;
    EXPECT_EQ(layer.uses_rope, !full) << i;  // full MoE layers are NoPE
    EXPECT_EQ(layer.window_tokens, full ? 0 : 4096) << i;
    EXPECT_EQ(layer.ffn, FfnKind::kMoe) << i;
    EXPECT_EQ(layer.ffn_intermediate_size, 768) << i;
  }
}

TEST(ModelConfigTest, DerivedLayerTypesMatchTheReleasedList) {
  json derived = NorthJson();
  derived.erase("layer_types");
  EXPECT_EQ(ModelConfig::FromJson(derived).layers, ModelConfig::FromJson(NorthJson()).layers);
}

TEST(ModelConfigTest, PrefixPatternOtherThanOneDisablesForcedRope) {
  json config = NorthJson();
  config.erase("layer_types");
  config["num_hidden_layers"] = 8;
  config["first_k_dense_replace"] = 2;
  config["prefix_dense_sliding_window_pattern"] = 2;
  config["sliding_window_pattern"] = 3;
  ModelConfig parsed = ModelConfig::FromJson(config);
  // Prefix: (i+1) % 2 -> sliding, full. Rest counted from 0: (j+1) % 3 -> s, s, full, s, s, full.
  std::vector<AttentionKind> expected = {AttentionKind::kSliding, AttentionKind::kFull,
                                         AttentionKind::kSliding, AttentionKind::kSliding,
                                         AttentionKind::kFull,    AttentionKind::kSliding,
                                         AttentionKind::kSliding, AttentionKind::kFull};
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(parsed.layers[i].attention, expected[i]) << i;
  EXPECT_FALSE(parsed.layers[1].uses_rope);  // dense and full, but the prefix pattern is 2
  EXPECT_TRUE(parsed.layers[0].uses_rope);   // sliding
  EXPECT_EQ(parsed.layers[1].ffn, FfnKind::kDense);
  EXPECT_EQ(parsed.layers[2].ffn, FfnKind::kMoe);
}

TEST(ModelConfigTest, SeveralDensePrefixLayersAllForceRope) {
  json config = NorthJson();
  config.erase("layer_types");
  config["num_hidden_layers"] = 6;
  config["first_k_dense_replace"] = 3;
  ModelConfig parsed = ModelConfig::FromJson(config);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(parsed.layers[i].attention, AttentionKind::kFull) << i;
    EXPECT_TRUE(parsed.layers[i].uses_rope) << i;
    EXPECT_EQ(parsed.layers[i].ffn, FfnKind::kDense) << i;
  }
  EXPECT_EQ(parsed.layers[3].attention, AttentionKind::kSliding);
  EXPECT_EQ(parsed.layers[5].attention, AttentionKind::kSliding);
}

TEST(ModelConfigTest, ExplicitMlpLayerTypes) {
  json config = NorthJson();
  config.erase("first_k_dense_replace");
  config["mlp_layer_types"] = json::array();
  for (int i = 0; i < 49; ++i) config["mlp_layer_types"].push_back(i == 0 ? "dense" : "sparse");
  EXPECT_EQ(ModelConfig::FromJson(config).layers, ModelConfig::FromJson(NorthJson()).layers);
}

TEST(ModelConfigTest, MissingKeysTakeTheClassDefaults) {
  ModelConfig config = ModelConfig::FromJson({{"model_type", "cohere2_moe"}});
  EXPECT_EQ(config.vocab_size, 256000);
  EXPECT_EQ(config.hidden_size, 8192);
  EXPECT_EQ(config.num_layers, 40);
  EXPECT_EQ(config.num_heads, 64);
  EXPECT_EQ(config.num_kv_heads, 64);  // defaults to num_attention_heads
  EXPECT_EQ(config.head_dim, 128);
  EXPECT_EQ(config.norm, NormKind::kLayerNorm);
  EXPECT_FLOAT_EQ(config.norm_eps, 1e-5f);
  EXPECT_EQ(config.rope_theta, 10000.0);
  EXPECT_EQ(config.expert_selection, ExpertSelection::kSoftmax);
  EXPECT_TRUE(config.norm_topk_prob);
  EXPECT_EQ(config.num_experts, 8);
  EXPECT_EQ(config.num_experts_per_token, 2);
  EXPECT_EQ(config.shared_expert_combination, SharedExpertCombination::kAverage);
  EXPECT_EQ(config.bos_token_id, 5);
  EXPECT_EQ(config.pad_token_id, 0);
  EXPECT_EQ(config.eos_token_ids, std::vector<int32_t>{255001});
  EXPECT_EQ(config.num_dense_layers(), 0);
  EXPECT_EQ(config.layers[3].attention, AttentionKind::kFull);
  EXPECT_EQ(config.layers[3].uses_rope, false);
  EXPECT_EQ(config.layers[2].window_tokens, 4096);
}

TEST(ModelConfigTest, NullHeadDimFallsBackToHiddenOverHeads) {
  json config = NorthJson();
  config["head_dim"] = nullptr;
  EXPECT_EQ(ModelConfig::FromJson(config).head_dim, 2048 / 32);
}

TEST(ModelConfigTest, NormSelection) {
  json config = NorthJson();
  config["rms_norm_eps"] = nullptr;
  config["layer_norm_eps"] = 2e-5;
  ModelConfig parsed = ModelConfig::FromJson(config);
  EXPECT_EQ(parsed.norm, NormKind::kLayerNorm);
  EXPECT_FLOAT_EQ(parsed.norm_eps, 2e-5f);
  config.erase("rms_norm_eps");
  EXPECT_EQ(ModelConfig::FromJson(config).norm, NormKind::kLayerNorm);
}

TEST(ModelConfigTest, RopeForms) {
  json flat = NorthJson();
  flat.erase("rope_theta");
  flat["rope_parameters"] = {{"rope_theta", 75000.0}, {"rope_type", "default"}};
  EXPECT_EQ(ModelConfig::FromJson(flat).rope_theta, 75000.0);
  json per_type = NorthJson();
  per_type["rope_parameters"] = {
      {"full_attention", {{"rope_theta", 50000}, {"rope_type", "default"}}},
      {"sliding_attention", {{"rope_theta", 50000}, {"rope_type", "default"}}}};
  EXPECT_EQ(ModelConfig::FromJson(per_type).rope_theta, 50000.0);
  json scaling = NorthJson();
  scaling["rope_scaling"] = {{"type", "default"}};
  EXPECT_EQ(ModelConfig::FromJson(scaling).rope_theta, 50000.0);
}

TEST(ModelConfigTest, RopeErrors) {
  json yarn = NorthJson();
  yarn["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  ExpectError(yarn, {"rope_scaling", "yarn"});
  json parameters_yarn = NorthJson();
  parameters_yarn["rope_parameters"] = {{"rope_type", "linear"}, {"rope_theta", 50000}};
  ExpectError(parameters_yarn, {"rope_parameters", "linear"});
  json disagree = NorthJson();
  disagree["rope_parameters"] = {{"rope_theta", 10000}, {"rope_type", "default"}};
  ExpectError(disagree, {"rope_parameters", "10000"});
}

TEST(ModelConfigTest, RouterAndSharedExpertBranches) {
  json config = NorthJson();
  config["expert_selection_fn"] = "softmax";
  config["num_shared_experts"] = 2;
  config["shared_expert_combination_strategy"] = "sum";
  config["norm_topk_prob"] = true;
  ModelConfig parsed = ModelConfig::FromJson(config);
  EXPECT_EQ(parsed.expert_selection, ExpertSelection::kSoftmax);
  EXPECT_EQ(parsed.num_shared_experts, 2);
  EXPECT_EQ(parsed.shared_expert_combination, SharedExpertCombination::kSum);
  EXPECT_TRUE(parsed.norm_topk_prob);
  config["shared_expert_combination_strategy"] = "average";
  EXPECT_EQ(ModelConfig::FromJson(config).shared_expert_combination,
            SharedExpertCombination::kAverage);
}

TEST(ModelConfigTest, TokenIds) {
  json config = NorthJson();
  config["eos_token_id"] = {255001, 3};
  config["bos_token_id"] = nullptr;
  config["logit_scale"] = 0.5;
  config["tie_word_embeddings"] = false;
  ModelConfig parsed = ModelConfig::FromJson(config);
  EXPECT_EQ(parsed.eos_token_ids, (std::vector<int32_t>{255001, 3}));
  EXPECT_EQ(parsed.bos_token_id, -1);
  EXPECT_FLOAT_EQ(parsed.logit_scale, 0.5f);
  EXPECT_FALSE(parsed.tie_word_embeddings);
  config["eos_token_id"] = nullptr;
  EXPECT_TRUE(ModelConfig::FromJson(config).eos_token_ids.empty());
}

TEST(ModelConfigTest, UnsupportedSemanticsAreErrors) {
  auto with = [](const std::string& key, const json& value) {
    json config = NorthJson();
    config[key] = value;
    return config;
  };
  ExpectError(with("model_type", "cohere2"), {"model_type", "cohere2"});
  ExpectError(with("hidden_act", "gelu"), {"hidden_act", "gelu"});
  ExpectError(with("attention_bias", true), {"attention_bias", "true"});
  ExpectError(with("use_qk_norm", true), {"use_qk_norm", "true"});
  ExpectError(with("use_parallel_block", false), {"use_parallel_block", "false"});
  ExpectError(with("expert_selection_fn", "relu"), {"expert_selection_fn", "relu"});
  ExpectError(with("shared_expert_combination_strategy", "max"),
              {"shared_expert_combination_strategy", "max"});
  json no_type = NorthJson();
  no_type.erase("model_type");
  ExpectError(no_type, {"model_type", "missing"});
  ExpectError(json::array(), {"object"});
}

TEST(ModelConfigTest, InconsistentValuesAreErrors) {
  auto with = [](const std::string& key, const json& value) {
    json config = NorthJson();
    config[key] = value;
    return config;
  };
  ExpectError(with("num_key_value_heads", 5), {"num_key_value_heads", "5", "32"});
  ExpectError(with("num_hidden_layers", 48), {"layer_types", "48"});
  ExpectError(with("num_experts_per_tok", 129), {"num_experts_per_tok", "129", "128"});
  ExpectError(with("num_experts_per_tok", 0), {"num_experts_per_tok", "0"});
  ExpectError(with("prefix_dense_intermediate_size", nullptr),
              {"prefix_dense_intermediate_size", "layer 0", "dense"});
  ExpectError(with("sliding_window", nullptr), {"sliding_window", "layer 1", "sliding"});
  ExpectError(with("first_k_dense_replace", 50), {"first_k_dense_replace", "50"});
  ExpectError(with("eos_token_id", 262144), {"eos_token_id", "262144", "vocab_size"});
  ExpectError(with("pad_token_id", -1), {"pad_token_id", "-1"});
  ExpectError(with("hidden_size", "2048"), {"hidden_size", "\"2048\"", "integer"});
  ExpectError(with("hidden_size", 0), {"hidden_size", "0", "positive"});
  ExpectError(with("norm_topk_prob", 1), {"norm_topk_prob", "1"});
  ExpectError(with("rms_norm_eps", -1.0), {"rms_norm_eps", "-1"});
  ExpectError(with("rms_norm_eps", 1e-46), {"rms_norm_eps", "1e-46", "float32"});  // 0 there
  ExpectError(with("rms_norm_eps", 1e39), {"rms_norm_eps", "float32"});
  json negative_dense = with("prefix_dense_intermediate_size", -128);
  negative_dense["first_k_dense_replace"] = 0;  // no dense layer reads it: refused all the same
  negative_dense.erase("mlp_layer_types");
  ExpectError(negative_dense, {"prefix_dense_intermediate_size", "-128"});
  json bad_type = NorthJson();
  bad_type["layer_types"][3] = "chunked_attention";
  ExpectError(bad_type, {"layer_types[3]", "chunked_attention"});
  json bad_mlp = NorthJson();
  bad_mlp["mlp_layer_types"] = json::array();
  for (int i = 0; i < 49; ++i) bad_mlp["mlp_layer_types"].push_back(i == 2 ? "moe" : "sparse");
  bad_mlp.erase("first_k_dense_replace");
  ExpectError(bad_mlp, {"mlp_layer_types[2]", "moe"});
  json stale_k = NorthJson();
  stale_k["mlp_layer_types"] = json::array();
  for (int i = 0; i < 49; ++i) stale_k["mlp_layer_types"].push_back(i < 2 ? "dense" : "sparse");
  ExpectError(stale_k, {"first_k_dense_replace", "mlp_layer_types[1]"});
}

// Sizes past any real model are refused before per-layer tables or weight names are built (a
// billion layers or experts exhausted memory; a head_dim near 2^62 wrapped heads x head_dim to a
// plausible width); so are an odd head_dim (RoPE turns pairs) and a logit_scale that is not a
// positive number.
TEST(ModelConfigTest, SizesPastAnyModelAreErrors) {
  auto with = [](const std::string& key, const json& value) {
    json config = NorthJson();
    config[key] = value;
    config.erase("layer_types");
    config.erase("mlp_layer_types");
    return config;
  };
  ExpectError(with("num_hidden_layers", 1000000000), {"num_hidden_layers", "1000000000", "1024"});
  ExpectError(with("num_experts", 1000000000), {"num_experts", "1000000000"});
  ExpectError(with("head_dim", (int64_t{1} << 62) + 16), {"head_dim", "past any model"});
  ExpectError(with("vocab_size", int64_t{1} << 40), {"vocab_size"});
  ExpectError(with("head_dim", 15), {"head_dim", "15", "even"});
  ExpectError(with("logit_scale", 0.0), {"logit_scale", "positive"});
  ExpectError(with("logit_scale", -0.5), {"logit_scale", "positive"});
}

TEST(ModelConfigTest, ToJsonRoundTrips) {
  json shared = NorthJson();
  shared["num_hidden_layers"] = 5;
  shared.erase("layer_types");
  shared["first_k_dense_replace"] = 2;
  shared["prefix_dense_sliding_window_pattern"] = 2;
  shared["num_shared_experts"] = 1;
  shared["shared_expert_combination_strategy"] = "sum";
  shared["expert_selection_fn"] = "softmax";
  shared["rms_norm_eps"] = nullptr;
  shared["eos_token_id"] = {7, 9};
  for (const json& source : {NorthJson(), shared}) {
    ModelConfig config = ModelConfig::FromJson(source);
    json written = config.ToJson();
    EXPECT_EQ(ModelConfig::FromJson(written), config) << written.dump();
    EXPECT_EQ(written["layer_types"].size(), static_cast<size_t>(config.num_layers));
  }
  EXPECT_EQ(ModelConfig::FromJson(NorthJson()).ToJson()["rms_norm_eps"].dump(), "1e-06");
}

TEST(ModelConfigTest, LoadNamesTheFile) {
  std::string path = testing::TempDir() + "/bad_config.json";
  std::ofstream(path) << "{\"model_type\": \"cohere2_moe\", ";
  try {
    ModelConfig::Load(path);
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(path), std::string::npos) << error.what();
  }
  std::ofstream(path) << NorthJson().dump();
  EXPECT_EQ(ModelConfig::Load(path).num_layers, 49);
  EXPECT_THROW(ModelConfig::Load(testing::TempDir() + "/absent.json"), Error);
}

// A checkpoint may name its chat end-of-turn token only in generation_config.json: generation must
// stop there too, or a served answer runs on past its turn.
TEST(ModelConfigTest, LoadDirAddsGenerationConfigEos) {
  std::filesystem::path dir = std::filesystem::path(testing::TempDir()) / "generation_config_eos";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  json config = NorthJson();
  config["eos_token_id"] = 255001;
  std::ofstream(dir / "config.json") << config.dump();
  EXPECT_EQ(ModelConfig::LoadDir(dir).eos_token_ids, std::vector<int32_t>{255001});

  std::ofstream(dir / "generation_config.json") << R"({"eos_token_id": [255001, 255003, 6]})";
  EXPECT_EQ(ModelConfig::LoadDir(dir).eos_token_ids, (std::vector<int32_t>{255001, 255003, 6}));

  std::ofstream(dir / "generation_config.json") << R"({"bos_token_id": 5})";
  EXPECT_EQ(ModelConfig::LoadDir(dir).eos_token_ids, std::vector<int32_t>{255001});

  for (const char* bad :
       {R"({"eos_token_id": 300000})", R"({"eos_token_id": "x"})", "[1]", R"({"eos_token_id": )"}) {
    std::ofstream(dir / "generation_config.json") << bad;
    try {
      ModelConfig::LoadDir(dir);
      ADD_FAILURE() << "no error for " << bad;
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("generation_config.json"), std::string::npos)
          << error.what();
    }
  }
}

}  // namespace
}  // namespace mkserve
