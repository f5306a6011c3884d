// Constrained decoding through the engine: it hands each sampling step its grammar's allowed-token
// mask, advances the matcher with the sampled token, allows EOS only once the grammar is complete
// and fails a request whose backend sampled a token the grammar forbids.
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/request_validation.h"
#include "engine_test_util.h"
#include "grammar/json_schema.h"

namespace mkserve::testing {
namespace {

// Ids 40.. spell the characters below; every other id is an empty (never allowed) token, except
// kEos, which the grammar allows only as an end token.
constexpr char kSpelled[] = "{}\":1a";
constexpr int32_t kFirstSpelled = 40;

std::shared_ptr<const grammar::CompiledGrammar> ObjectWithIntegerA() {
  std::vector<std::string> bytes(kVocab);
  for (int i = 0; kSpelled[i] != '\0'; ++i) bytes[kFirstSpelled + i] = std::string(1, kSpelled[i]);
  auto vocabulary =
      std::make_shared<grammar::TokenVocabulary>(bytes, std::vector<bool>(kVocab, false));
  grammar::JsonGrammarBuilder builder;
  int32_t root = builder.AddSchema(grammar::Json::parse(R"({"type": "object", "properties":
      {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": false})"),
                                   "schema");
  return std::make_shared<grammar::CompiledGrammar>(std::move(builder).Finish(root), vocabulary);
}

int32_t Id(char c) { return kFirstSpelled + static_cast<int32_t>(std::string(kSpelled).find(c)); }

// Samples EOS when the mask allows it, else the lowest allowed id; `forced` overrides step 0.
class LowestAllowedBackend : public Backend {
 public:
  LowestAllowedBackend(ModelConfig config, KvLayout layout, int32_t forced_first)
      : config_(std::move(config)), layout_(std::move(layout)), forced_first_(forced_first) {}
  std::string name() const override { return "lowest-allowed"; }
  const ModelConfig& config() const override { return config_; }
  const KvLayout& kv_layout() const override { return layout_; }
  StepOutputs Step(const StepInputs& inputs) override {
    StepOutputs outputs;
    for (const SequenceStep& step : inputs.sequences) {
      SequenceResult& result = outputs.results.emplace_back();
      if (!step.sample) continue;
      EXPECT_FALSE(step.allowed_tokens.empty()) << "a constrained step without its mask";
      step.WaitForAllowedTokens();
      if (step.sample_index == 0 && forced_first_ >= 0) {
        result.token_id = forced_first_;
        continue;
      }
      auto allowed = [&](int32_t id) {
        return id / 32 < static_cast<int32_t>(step.allowed_tokens.size()) &&
               ((step.allowed_tokens[id / 32] >> (id % 32)) & 1u);
      };
      result.token_id = allowed(kEos) ? kEos : 0;
      while (result.token_id < kVocab && !allowed(result.token_id)) ++result.token_id;
    }
    return outputs;
  }

 private:
  ModelConfig config_;
  KvLayout layout_;
  int32_t forced_first_;
};

std::unique_ptr<Engine> MakeGrammarEngine(int32_t forced_first) {
  ModelConfig config;
  config.vocab_size = kVocab;
  config.eos_token_ids = {kEos};
  config.max_position_embeddings = 4096;
  KvLayout layout;
  layout.groups.push_back({AttentionKind::kFull, 0, {0}, 64});
  return std::make_unique<Engine>(
      std::make_unique<LowestAllowedBackend>(config, layout, forced_first), EngineOptions{});
}

TEST(EngineGrammarTest, MasksFollowTheGrammarAndEosWaitsForCompletion) {
  auto engine = MakeGrammarEngine(-1);
  EngineRequest request = MakeRequest(Prompt(5), 32);
  request.grammar = ObjectWithIntegerA();
  request.n = 2;  // each sibling runs its own matcher
  RequestHandle handle = engine->Submit(std::move(request));
  Collected out = Drain(handle);
  ASSERT_FALSE(out.error) << out.error->message;
  const std::vector<int32_t> expected = {Id('{'), Id('"'), Id('a'), Id('"'),
                                         Id(':'), Id('1'), Id('}')};
  for (int32_t index : {0, 1}) {
    EXPECT_EQ(out.token_ids[index], expected);  // then EOS, which is not emitted
    EXPECT_EQ(out.finished[index].reason, FinishReason::kStop);
    EXPECT_EQ(out.finished[index].usage.completion_tokens, 8);
  }
}

TEST(EngineGrammarTest, ADisallowedSampledTokenFailsTheRequest) {
  auto engine = MakeGrammarEngine(Id('1'));  // a number where the object must open
  EngineRequest request = MakeRequest(Prompt(5), 32);
  request.grammar = ObjectWithIntegerA();
  RequestHandle handle = engine->Submit(std::move(request));
  Collected out = Drain(handle);
  ASSERT_TRUE(out.error);
  EXPECT_EQ(out.error->kind, EngineErrorKind::kBackend);
  EXPECT_NE(out.error->message.find("does not allow"), std::string::npos) << out.error->message;
}

// A schema whose finite values (an integer, or arrays of them and of arrays) the vocabulary
// cannot end: it spells no digit, so always taking "[" nests until the matcher's depth limit,
// where the mask allows nothing. That ends the request as the schema's fault, by name, not as
// the backend's.
TEST(EngineGrammarTest, AMaskOfNoTokenFailsTheRequestAsItsSchemas) {
  std::vector<std::string> bytes(kVocab);
  bytes[kFirstSpelled] = "[";
  bytes[kFirstSpelled + 1] = "]";
  bytes[kFirstSpelled + 2] = "x";
  auto vocabulary =
      std::make_shared<grammar::TokenVocabulary>(bytes, std::vector<bool>(kVocab, false));
  grammar::JsonGrammarBuilder builder;
  const int32_t root = builder.AddSchema(grammar::Json::parse(R"({"anyOf": [{"type": "integer"},
      {"type": "array", "items": {"$ref": "#"}, "minItems": 1}]})"),
                                         "schema");
  auto engine = MakeGrammarEngine(-1);
  EngineRequest request = MakeRequest(Prompt(5), 1000);
  request.grammar =
      std::make_shared<grammar::CompiledGrammar>(std::move(builder).Finish(root), vocabulary);
  RequestHandle handle = engine->Submit(std::move(request));
  Collected out = Drain(handle);
  ASSERT_TRUE(out.error);
  EXPECT_EQ(out.error->kind, EngineErrorKind::kInvalidRequest) << "message: " << out.error->message;
  EXPECT_NE(out.error->message.find("allows no token"), std::string::npos) << out.error->message;
}

TEST(EngineGrammarTest, IgnoreEosAndMinTokensAreRefusedWithAGrammar) {
  auto engine = MakeGrammarEngine(-1);
  for (bool ignore_eos : {true, false}) {
    EngineRequest request = MakeRequest(Prompt(5), 32);
    request.grammar = ObjectWithIntegerA();
    request.sampling.ignore_eos = ignore_eos;
    request.sampling.min_tokens = ignore_eos ? 0 : 2;
    RequestHandle handle = engine->Submit(std::move(request));
    Collected out = Drain(handle);
    ASSERT_TRUE(out.error);
    EXPECT_EQ(out.error->kind, EngineErrorKind::kInvalidRequest);
    EXPECT_NE(out.error->message.find(ignore_eos ? "ignore_eos" : "min_tokens"), std::string::npos);
  }
}

}  // namespace
}  // namespace mkserve::testing
