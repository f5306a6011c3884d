#include "engine/scripted_backend.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <fstream>

#include "common/error.h"
#include "engine/backend_error.h"

namespace mkserve {
namespace {

std::filesystem::path WriteScript(const std::string& name, const std::string& text) {
  std::filesystem::path path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path) << text;
  return path;
}

// 'a' -> 10, 'b' -> 11, ...
std::vector<int32_t> Encode(const std::string& text) {
  std::vector<int32_t> ids;
  for (char c : text) ids.push_back(10 + (c - 'a'));
  return ids;
}

ModelConfig SmallConfig() {
  ModelConfig config;
  config.vocab_size = 50;
  config.eos_token_ids = {1};
  config.num_layers = 2;
  config.layers.resize(2);
  return config;
}

TEST(ScriptedBackendTest, LoadsTextAndIdRules) {
  auto path = WriteScript("mkserve_script_ok.json", R"({"rules": [
      {"prompt_contains": "cab", "output": "dd"},
      {"prompt_contains": [7, 8], "output": [20, 21, 22]},
      {"output": "e"}]})");
  Script script = LoadScript(path, Encode);
  ASSERT_EQ(script.rules.size(), 3u);
  EXPECT_EQ(script.rules[0].prompt_contains, (std::vector<int32_t>{12, 10, 11}));
  EXPECT_EQ(script.rules[1].output_token_ids, (std::vector<int32_t>{20, 21, 22}));
  EXPECT_TRUE(script.rules[2].prompt_contains.empty());

  auto backend = MakeScriptedBackend(SmallConfig(), script, 1024, 4);
  std::vector<int32_t> prompt = {3, 12, 10, 11, 7, 8};  // the first rule wins
  EXPECT_EQ(backend->ScriptedToken(prompt, 0), 13);
  EXPECT_EQ(backend->ScriptedToken(prompt, 1), 13);
  EXPECT_EQ(backend->ScriptedToken(prompt, 2), 1);  // then EOS
  std::vector<int32_t> other = {7, 8};
  EXPECT_EQ(backend->ScriptedToken(other, 2), 22);
  std::vector<int32_t> none = {2};
  EXPECT_EQ(backend->ScriptedToken(none, 0), 14);
  EXPECT_EQ(backend->kv_layout().groups[0].num_blocks, 1024 * 2 / (64 * 2));
}

TEST(ScriptedBackendTest, BadScriptsNameTheProblem) {
  auto expect_error = [](const std::string& text, const std::string& needle, EncodeFn encode) {
    auto path = WriteScript("mkserve_script_bad.json", text);
    try {
      LoadScript(path, encode);
      ADD_FAILURE() << "no error for " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error("{", "\"rules\" array", Encode);
  expect_error(R"({"rules": [{"prompt_contains": "a"}]})", "rules[0] needs \"output\" or \"fault\"",
               Encode);
  expect_error(R"({"rules": [{"fault": "boom"}]})", "rules[0].fault must be", Encode);
  expect_error(R"({"rules": [{"fault": "hang"}]})", "needs \"hang_ms\"", Encode);
  expect_error(R"({"rules": [{"output": 5}]})", "rules[0].output must be", Encode);
  expect_error(R"({"rules": [{"output": "ab"}]})", "no tokenizer", nullptr);
  EXPECT_THROW(LoadScript("/nonexistent/script.json", Encode), Error);
}

TEST(ScriptedBackendTest, FaultRulesThrowOrHangForTheirPrompt) {
  auto path = WriteScript("mkserve_script_faults.json", R"({"rules": [
      {"prompt_contains": "a", "fault": "error"},
      {"prompt_contains": "b", "fault": "fatal"},
      {"prompt_contains": "c", "fault": "hang", "hang_ms": 50},
      {"output": "d"}]})");
  auto backend = MakeScriptedBackend(SmallConfig(), LoadScript(path, Encode), 1024, 4);
  auto step_with = [&](std::vector<int32_t> prompt) {
    SequenceStep step;
    step.token_ids = prompt;
    step.prompt_token_ids = prompt;
    return backend->Step(StepInputs{{step}});
  };
  try {
    step_with(Encode("xa"));
    ADD_FAILURE() << "no error";
  } catch (const BackendFatalError&) {
    ADD_FAILURE() << "a transient error must not be fatal";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("transient"), std::string::npos);
  }
  EXPECT_THROW(step_with(Encode("xb")), BackendFatalError);
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(step_with(Encode("xc")).results.size(), 1u);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(50));
  EXPECT_EQ(step_with(Encode("xd")).results.size(), 1u);
}

TEST(ScriptedBackendTest, StepReturnsScriptedTokensAndPeakedLogprobs) {
  Script script{{ScriptRule{{}, {5, 6}}}};
  auto backend = MakeScriptedBackend(SmallConfig(), script, 1024, 4);
  SamplingParams params;
  params.num_logprobs = 1;
  params.num_prompt_logprobs = 0;
  std::vector<int32_t> prompt = {2, 3, 4}, output = {5}, next = {3, 4, -1};
  SequenceStep step;
  step.token_ids = prompt;
  step.sample = true;
  step.sampling = &params;
  step.prompt_token_ids = prompt;
  step.output_token_ids = output;
  step.sample_index = 1;
  step.next_token_ids = next;
  StepOutputs out = backend->Step(StepInputs{{step}});
  ASSERT_EQ(out.results.size(), 1u);
  EXPECT_EQ(out.results[0].token_id, 6);
  EXPECT_EQ(out.results[0].logprobs.chosen.token_id, 6);
  // logit 8 against 49 zeros: log(e^8 / (e^8 + 49))
  EXPECT_NEAR(out.results[0].logprobs.chosen.logprob, -std::log1p(49 * std::exp(-8.0)), 1e-5);
  ASSERT_EQ(out.results[0].prompt_logprobs.size(), 2u);
  EXPECT_EQ(out.results[0].prompt_logprobs[1].chosen.token_id, 4);
}

// Chunks beside the steps: refused when too long or asking for outputs (CheckPromptChunk), a
// rule's error thrown at the start, and a chunk finishes after kChunkTime.
TEST(ScriptedBackendTest, PromptChunksFinishLaterAndRefuseWhatTheyCannotRun) {
  Script script{{ScriptRule{{9}, {}, ScriptFault::kError}, ScriptRule{{}, {20}}}};
  auto backend = MakeScriptedBackend(SmallConfig(), script, 1024, 4, /*prompt_chunk_tokens=*/8);
  EXPECT_EQ(backend->max_prompt_chunk_tokens(), 8);
  std::vector<int32_t> prompt(20, 3);
  SequenceStep chunk;
  chunk.prompt_token_ids = prompt;
  chunk.token_ids = std::span<const int32_t>(prompt).first(9);
  EXPECT_THROW(backend->StartPromptChunk(chunk), Error);  // 9 > 8
  chunk.token_ids = std::span<const int32_t>(prompt).first(8);
  chunk.sample = true;
  EXPECT_THROW(backend->StartPromptChunk(chunk), Error);
  chunk.sample = false;
  std::unique_ptr<PendingChunk> pending = backend->StartPromptChunk(chunk);
  EXPECT_FALSE(pending->Wait(std::chrono::microseconds(0)));
  EXPECT_TRUE(pending->Wait(std::chrono::seconds(5)));
  std::vector<int32_t> faulty = {3, 9, 3};
  chunk.prompt_token_ids = faulty;
  chunk.token_ids = std::span<const int32_t>(faulty).first(2);
  EXPECT_THROW(backend->StartPromptChunk(chunk), Error);
}

}  // namespace
}  // namespace mkserve
