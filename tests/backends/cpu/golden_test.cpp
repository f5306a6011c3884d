// The CPU reference against HF transformers: every fixture under tests/fixtures/golden/<name>/
// (config.json, safetensors, golden.json; format in tests/fixtures/golden/README.md) is loaded
// through the real Checkpoint + MapModelWeights, prefilled, then decoded greedily for as many
// steps as the fixture records. Logits must agree within 1e-4 relative (max |a - b| / max |b|
// per position) and the greedy tokens must be identical.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backends/cpu/load_cpu_backend.h"
#include "backends/cpu/test_model.h"

namespace mkserve::testing {
namespace {

constexpr double kRelativeTolerance = 1e-4;

std::filesystem::path GoldenRoot() {
  return std::filesystem::path(MKSERVE_SOURCE_DIR) / "tests" / "fixtures" / "golden";
}

std::vector<std::string> FixtureNames() {
  std::vector<std::string> names;
  if (!std::filesystem::is_directory(GoldenRoot())) return names;
  for (const auto& entry : std::filesystem::directory_iterator(GoldenRoot())) {
    if (entry.is_directory()) names.push_back(entry.path().filename().string());
  }
  std::ranges::sort(names);
  return names;
}

// max |actual - expected| / max |expected|.
double RelativeError(const std::vector<float>& actual, const std::vector<float>& expected) {
  EXPECT_EQ(actual.size(), expected.size());
  double max_diff = 0.0;
  double max_expected = 0.0;
  for (size_t i = 0; i < std::min(actual.size(), expected.size()); ++i) {
    max_diff = std::max(max_diff, static_cast<double>(std::abs(actual[i] - expected[i])));
    max_expected = std::max(max_expected, static_cast<double>(std::abs(expected[i])));
  }
  EXPECT_GT(max_expected, 0.0) << "golden logits are all zero";
  return max_diff / max_expected;
}

struct Golden {
  std::vector<int32_t> prompt_ids;
  std::vector<std::vector<float>> prompt_logits;
  std::vector<int32_t> greedy_ids;
  std::vector<std::vector<float>> decode_logits;
};

Golden ReadGolden(const std::filesystem::path& path) {
  std::ifstream file(path);
  EXPECT_TRUE(file) << "cannot open " << path;
  nlohmann::json json = nlohmann::json::parse(file);
  Golden golden;
  json.at("prompt_ids").get_to(golden.prompt_ids);
  json.at("prompt_logits").get_to(golden.prompt_logits);
  json.at("greedy_ids").get_to(golden.greedy_ids);
  json.at("decode_logits").get_to(golden.decode_logits);
  return golden;
}

// Runs token_ids at start_position, greedy-samples the last position and returns every logit.
SequenceResult RunGreedy(CpuBackend& backend, std::span<const int32_t> token_ids,
                         int64_t start_position, const std::vector<std::vector<int32_t>>& tables) {
  static const SamplingParams greedy = [] {
    SamplingParams params;
    params.temperature = 0.0f;
    return params;
  }();
  SequenceStep step;
  step.token_ids = token_ids;
  step.start_position = start_position;
  step.block_tables = TableSpans(tables);
  step.sample = true;
  step.sampling = &greedy;
  step.return_logits = true;
  StepOutputs outputs = backend.Step(StepInputs{{step}});
  return std::move(outputs.results.at(0));
}

TEST(GoldenTest, FixturesArePresent) {
  EXPECT_FALSE(FixtureNames().empty()) << "no golden fixtures under " << GoldenRoot();
}

class GoldenFixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenFixtureTest, MatchesHfLogitsAndGreedyTokens) {
  const std::filesystem::path dir = GoldenRoot() / GetParam();
  Golden golden = ReadGolden(dir / "golden.json");
  const int64_t prompt_tokens = static_cast<int64_t>(golden.prompt_ids.size());
  ASSERT_EQ(golden.prompt_logits.size(), golden.prompt_ids.size());
  ASSERT_EQ(golden.decode_logits.size(), golden.greedy_ids.size());
  const int64_t total_tokens = prompt_tokens + static_cast<int64_t>(golden.greedy_ids.size());
  CpuBackendOptions options;
  options.num_blocks = (total_tokens + kBlockTokens - 1) / kBlockTokens;
  auto backend = LoadCpuBackend(dir, options);
  auto tables = ContiguousBlockTables(backend->kv_layout(), total_tokens);

  SequenceResult prefill = RunGreedy(*backend, golden.prompt_ids, 0, tables);
  ASSERT_EQ(prefill.logits.size(), golden.prompt_logits.size());
  double worst = 0.0;
  for (int64_t t = 0; t < prompt_tokens; ++t) {
    double error = RelativeError(prefill.logits[t], golden.prompt_logits[t]);
    EXPECT_LE(error, kRelativeTolerance) << "prompt position " << t;
    worst = std::max(worst, error);
  }
  int32_t token = prefill.token_id;
  for (size_t i = 0; i < golden.greedy_ids.size(); ++i) {
    ASSERT_EQ(token, golden.greedy_ids[i]) << "greedy token " << i;
    std::vector<int32_t> input = {token};
    SequenceResult step =
        RunGreedy(*backend, input, prompt_tokens + static_cast<int64_t>(i), tables);
    double error = RelativeError(step.logits.at(0), golden.decode_logits[i]);
    EXPECT_LE(error, kRelativeTolerance) << "decode step " << i;
    worst = std::max(worst, error);
    token = step.token_id;
  }
  std::printf("[golden] %s: worst relative logit error %.3g\n", GetParam().c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GoldenFixtureTest, ::testing::ValuesIn(FixtureNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(GoldenFixtureTest);

}  // namespace
}  // namespace mkserve::testing
