// CudaBackend against the HF transformers golden fixtures (tests/fixtures/golden): every prompt
// position's logits and 16 greedy decode steps, for the North semantics and the other branches
// (LayerNorm + softmax + averaged shared expert; renormalised sigmoid + summed shared experts +
// untied head from float32 weights). Prefill is also run in two chunks.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "backend_test_util.h"
#include "backends/cuda/cuda_backend.h"
#include "gpu_test_util.h"

namespace mkserve::cuda::testing {
namespace {

constexpr double kMinCosine = 0.999;

struct Golden {
  std::vector<int32_t> prompt_ids, greedy_ids;
  std::vector<std::vector<float>> prompt_logits, decode_logits;
};

Golden ReadGolden(const std::filesystem::path& dir) {
  std::ifstream in(dir / "golden.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  return {j.at("prompt_ids").get<std::vector<int32_t>>(),
          j.at("greedy_ids").get<std::vector<int32_t>>(),
          j.at("prompt_logits").get<std::vector<std::vector<float>>>(),
          j.at("decode_logits").get<std::vector<std::vector<float>>>()};
}

std::unique_ptr<CudaBackend> LoadForTest(const std::filesystem::path& dir) {
  const ModelConfig config = ModelConfig::Load(dir / "config.json");
  CudaBackendOptions options;
  options.kv_layout = PlanKvLayout(config, 8 << 20, 2 * config.kv_width() * 2, 4);
  options.max_num_tokens = 256;
  return LoadCudaBackend(dir, options);
}

void ExpectLogitsClose(const std::vector<float>& got, const std::vector<float>& want,
                       const std::string& where) {
  ASSERT_EQ(got.size(), want.size()) << where;
  EXPECT_GE(Cosine(got, want), kMinCosine) << where;
  double max_diff = 0, max_abs = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    max_diff = std::max(max_diff, static_cast<double>(std::fabs(got[i] - want[i])));
    max_abs = std::max(max_abs, static_cast<double>(std::fabs(want[i])));
  }
  EXPECT_LE(max_diff, 0.05 * max_abs + 1e-3) << where;
}

class GoldenTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::filesystem::path Dir() const {
    // Tests run from the repository root; the compiled-in source dir is the fallback (a build
    // carried to another machine may have been configured elsewhere).
    const std::filesystem::path local = std::filesystem::path("tests/fixtures/golden") / GetParam();
    if (std::filesystem::exists(local / "golden.json")) return local;
    return std::filesystem::path(MKSERVE_SOURCE_DIR) / "tests/fixtures/golden" / GetParam();
  }
};

TEST_P(GoldenTest, PrefillAndGreedyDecodeMatchHf) {
  const Golden golden = ReadGolden(Dir());
  auto backend = LoadForTest(Dir());
  SimpleBlocks blocks(backend->kv_layout());
  const int64_t prompt = static_cast<int64_t>(golden.prompt_ids.size());
  const auto tables = blocks.Allocate(prompt + static_cast<int64_t>(golden.greedy_ids.size()));
  const SamplingParams greedy = GreedyParams();
  StepInputs prefill;
  prefill.sequences.push_back(MakeStep(1, golden.prompt_ids, 0, tables, &greedy, true));
  SequenceResult result = backend->Step(prefill).results.at(0);
  ASSERT_EQ(result.logits.size(), golden.prompt_logits.size());
  for (int64_t t = 0; t < prompt; ++t) {
    ExpectLogitsClose(result.logits[t], golden.prompt_logits[t],
                      "prompt position " + std::to_string(t));
  }
  ExpectSameGreedy(result.token_id, golden.greedy_ids[0], golden.prompt_logits.back(), "prefill");
  for (size_t i = 0; i + 1 < golden.greedy_ids.size(); ++i) {
    const std::vector<int32_t> token = {golden.greedy_ids[i]};  // teacher-forced
    StepInputs decode;
    decode.sequences.push_back(
        MakeStep(1, token, prompt + static_cast<int64_t>(i), tables, &greedy, true));
    SequenceResult step = backend->Step(decode).results.at(0);
    ExpectLogitsClose(step.logits.at(0), golden.decode_logits[i],
                      "decode step " + std::to_string(i));
    ExpectSameGreedy(step.token_id, golden.greedy_ids[i + 1], golden.decode_logits[i],
                     "decode step " + std::to_string(i));
  }
}

TEST_P(GoldenTest, ChunkedPrefillMatchesHf) {
  const Golden golden = ReadGolden(Dir());
  auto backend = LoadForTest(Dir());
  SimpleBlocks blocks(backend->kv_layout());
  const auto tables = blocks.Allocate(static_cast<int64_t>(golden.prompt_ids.size()));
  const int64_t split = 17;
  const std::vector<int32_t> first(golden.prompt_ids.begin(), golden.prompt_ids.begin() + split);
  const std::vector<int32_t> rest(golden.prompt_ids.begin() + split, golden.prompt_ids.end());
  StepInputs one, two;
  one.sequences.push_back(MakeStep(1, first, 0, tables, nullptr, false));
  backend->Step(one);
  two.sequences.push_back(MakeStep(1, rest, split, tables, nullptr, true));
  SequenceResult result = backend->Step(two).results.at(0);
  ASSERT_EQ(result.logits.size(), rest.size());
  for (size_t t = 0; t < rest.size(); ++t) {
    ExpectLogitsClose(result.logits[t], golden.prompt_logits[split + t],
                      "chunk 2 position " + std::to_string(t));
  }
}

INSTANTIATE_TEST_SUITE_P(Models, GoldenTest,
                         ::testing::Values("north", "layernorm_softmax_shared",
                                           "sigmoid_renorm_sum"),
                         // Named by fixture so a filter such as '*north*' selects one model.
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace mkserve::cuda::testing
