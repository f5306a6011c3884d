#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "tokenizer/test_util.h"

namespace mkserve::tokenizer {
namespace {

using Ids = std::vector<int32_t>;
using testing::FromJson;
using testing::SmallBpeJson;

nlohmann::json WithBosEos() {
  nlohmann::json json = SmallBpeJson();
  json["model"]["vocab"]["</s>"] = 11;
  json["added_tokens"] = {
      {{"id", 10}, {"content", "<s>"}, {"special", true}, {"normalized", false}},
      {{"id", 11}, {"content", "</s>"}, {"special", true}, {"normalized", false}}};
  return json;
}

TEST(TokenizerTest, ConfigAddBosEosOverridesPostProcessor) {
  const std::string config =
      R"({"bos_token": "<s>", "eos_token": {"content": "</s>"}, "add_bos_token": true,
          "add_eos_token": true, "chat_template": "{{ messages }}"})";
  Tokenizer tokenizer = FromJson(WithBosEos(), config);
  EXPECT_EQ(tokenizer.Encode("ab", true), (Ids{10, 6, 11}));
  EXPECT_EQ(tokenizer.Encode("ab", false), (Ids{6}));
  EXPECT_EQ(tokenizer.bos_id(), 10);
  EXPECT_EQ(tokenizer.eos_id(), 11);
  EXPECT_EQ(tokenizer.eos()->text, "</s>");
  EXPECT_EQ(tokenizer.chat_template(), "{{ messages }}");
  TokenizerOptions json_only;
  json_only.apply_config_bos_eos = false;
  EXPECT_EQ(Tokenizer::FromJsonText(WithBosEos().dump(), config, json_only).Encode("ab", true),
            (Ids{6}));
}

TEST(TokenizerTest, TemplateProcessingAddsSpecialTokens) {
  nlohmann::json json = WithBosEos();
  json["post_processor"] = nlohmann::json::parse(R"({
      "type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A"}},
                 {"SpecialToken": {"id": "</s>"}}],
      "special_tokens": {"<s>": {"id": "<s>", "ids": [10]}, "</s>": {"id": "</s>", "ids": [11]}}
  })");
  EXPECT_EQ(FromJson(json).Encode("c", true), (Ids{10, 2, 11}));
  EXPECT_EQ(FromJson(json).Encode("c", false), (Ids{2}));
}

TEST(TokenizerTest, LoadReadsCompanionFiles) {
  auto dir = std::filesystem::temp_directory_path() / "mkserve_tokenizer_test_load";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << WithBosEos().dump();
  std::ofstream(dir / "tokenizer_config.json") << R"({"chat_template": "from config"})";
  std::ofstream(dir / "special_tokens_map.json") << R"({"bos_token": "<s>"})";
  std::ofstream(dir / "chat_template.jinja") << "from file";
  Tokenizer tokenizer = Tokenizer::Load(dir);
  EXPECT_EQ(tokenizer.bos_id(), 10);
  EXPECT_EQ(tokenizer.chat_template(), "from file");
  EXPECT_EQ(tokenizer.vocab_size(), 12);
  EXPECT_EQ(Tokenizer::Load(dir / "tokenizer.json").IdToToken(7), "abc");
  std::filesystem::remove_all(dir);
}

TEST(TokenizerTest, ConcurrentEncodeMatchesSequential) {
  Tokenizer tokenizer = Tokenizer::Load(testing::NpmTokenizerDir("qwen3"));
  std::vector<std::string> cases = testing::CorpusCases();
  std::vector<Ids> expected;
  for (const std::string& text : cases) expected.push_back(tokenizer.Encode(text, true));
  constexpr int kNumThreads = 4;
  std::vector<int> mismatches(kNumThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kNumThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round) {
        for (size_t i = 0; i < cases.size(); ++i) {
          size_t index = (i * (t + 1) + round) % cases.size();
          mismatches[t] += tokenizer.Encode(cases[index], true) != expected[index];
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kNumThreads; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

}  // namespace
}  // namespace mkserve::tokenizer
