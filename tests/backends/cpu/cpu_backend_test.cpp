// CpuBackend consistency: chunked prefill, decode, block placement and window release must not
// change the logits; every config branch must run and change them.
#include "backends/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "backends/cpu/test_model.h"
#include "common/error.h"

namespace mkserve::testing {
namespace {

constexpr float kTolerance = 1e-5f;
constexpr int64_t kNumBlocks = 8;

std::unique_ptr<CpuBackend> MakeBackend(const TestModel& model, int num_threads = 2) {
  CpuBackendOptions options;
  options.num_blocks = kNumBlocks;
  options.num_threads = num_threads;
  return std::make_unique<CpuBackend>(model.config, model.weights, options);
}

std::vector<int32_t> MakePrompt(int64_t length, int32_t vocab_size) {
  std::vector<int32_t> ids(length);
  for (int64_t i = 0; i < length; ++i) ids[i] = static_cast<int32_t>((i * 37 + 11) % vocab_size);
  return ids;
}

// Runs `ids` in chunks of the given sizes (cycled) and returns the logits of every position.
std::vector<float> RunChunks(CpuBackend& backend, const std::vector<int32_t>& ids,
                             const std::vector<int64_t>& chunk_sizes,
                             const std::vector<std::vector<int32_t>>& tables) {
  std::vector<float> logits;
  int64_t start = 0;
  for (size_t c = 0; start < static_cast<int64_t>(ids.size()); ++c) {
    int64_t size = std::min<int64_t>(chunk_sizes[c % chunk_sizes.size()], ids.size() - start);
    SequenceStep step;
    step.token_ids = std::span<const int32_t>(ids).subspan(start, size);
    step.start_position = start;
    step.block_tables = TableSpans(tables);
    std::vector<float> chunk = backend.Forward(step, /*all_positions=*/true);
    logits.insert(logits.end(), chunk.begin(), chunk.end());
    start += size;
  }
  return logits;
}

float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float max_diff = 0.0f;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    max_diff = std::max(max_diff, std::abs(a[i] - b[i]));
  }
  return max_diff;
}

// 150 tokens cross two block boundaries (64, 128) and many sliding windows of 8.
constexpr int64_t kPromptTokens = 150;

TEST(CpuBackendTest, LogitsAreFiniteAndNotFlat) {
  auto model = MakeTestModel(TestVariant::kNorth);
  auto backend = MakeBackend(*model);
  auto ids = MakePrompt(kPromptTokens, 96);
  auto tables = ContiguousBlockTables(backend->kv_layout(), kPromptTokens);
  std::vector<float> logits = RunChunks(*backend, ids, {kPromptTokens}, tables);
  ASSERT_EQ(logits.size(), static_cast<size_t>(kPromptTokens * 96));
  for (float logit : logits) ASSERT_TRUE(std::isfinite(logit));
  auto [low, high] = std::ranges::minmax_element(logits.end() - 96, logits.end());
  EXPECT_GT(*high - *low, 0.05f);
}

TEST(CpuBackendTest, ChunkedPrefillAndDecodeMatchOnePrefill) {
  auto model = MakeTestModel(TestVariant::kNorth);
  auto ids = MakePrompt(kPromptTokens, 96);
  auto reference_backend = MakeBackend(*model);
  auto tables = ContiguousBlockTables(reference_backend->kv_layout(), kPromptTokens);
  std::vector<float> reference = RunChunks(*reference_backend, ids, {kPromptTokens}, tables);
  const std::vector<std::vector<int64_t>> schedules = {{1}, {7}, {64}, {33, 5, 64}, {100}};
  for (const auto& schedule : schedules) {
    auto backend = MakeBackend(*model);
    std::vector<float> logits = RunChunks(*backend, ids, schedule, tables);
    EXPECT_LE(MaxAbsDiff(logits, reference), kTolerance) << "first chunk " << schedule[0];
  }
}

TEST(CpuBackendTest, ScatteredBlocksMatchContiguousOnes) {
  auto model = MakeTestModel(TestVariant::kNorth);
  auto ids = MakePrompt(kPromptTokens, 96);
  auto backend = MakeBackend(*model);
  auto contiguous = ContiguousBlockTables(backend->kv_layout(), kPromptTokens);
  std::vector<float> reference = RunChunks(*backend, ids, {50}, contiguous);
  std::vector<std::vector<int32_t>> scattered = contiguous;
  for (size_t g = 0; g < scattered.size(); ++g) {
    scattered[g] = {static_cast<int32_t>(7 - g), 3, static_cast<int32_t>(5 + g)};
  }
  auto other = MakeBackend(*model);
  std::vector<float> logits = RunChunks(*other, ids, {50}, scattered);
  EXPECT_LE(MaxAbsDiff(logits, reference), kTolerance);
}

TEST(CpuBackendTest, ThreadCountDoesNotChangeLogits) {
  auto model = MakeTestModel(TestVariant::kSharedAverage);
  auto ids = MakePrompt(70, 96);
  auto one = MakeBackend(*model, 1);
  auto three = MakeBackend(*model, 3);
  auto tables = ContiguousBlockTables(one->kv_layout(), 70);
  EXPECT_EQ(RunChunks(*one, ids, {70}, tables), RunChunks(*three, ids, {70}, tables));
}

// Marks the logical blocks of sliding groups that no query at or after `position` can see.
void ReleaseOutOfWindow(const KvLayout& layout, int64_t position,
                        std::vector<std::vector<int32_t>>& tables) {
  for (int64_t g = 0; g < layout.num_groups(); ++g) {
    const KvGroup& group = layout.groups[g];
    if (group.attention != AttentionKind::kSliding) continue;
    int64_t first_needed = FirstKeyInWindow(position, group.window_tokens);
    for (int64_t b = 0; (b + 1) * kBlockTokens <= first_needed; ++b) tables[g][b] = -1;
  }
}

TEST(CpuBackendTest, ReleasedBlocksOutsideTheWindowGiveTheSameLogits) {
  auto model = MakeTestModel(TestVariant::kNorth);
  auto ids = MakePrompt(kPromptTokens, 96);
  auto kept_backend = MakeBackend(*model);
  const KvLayout& layout = kept_backend->kv_layout();
  auto kept = ContiguousBlockTables(layout, kPromptTokens);
  std::vector<float> reference = RunChunks(*kept_backend, ids, {1}, kept);

  auto backend = MakeBackend(*model);
  auto tables = kept;
  std::vector<float> logits;
  int64_t released = 0;
  for (int64_t p = 0; p < kPromptTokens; ++p) {
    ReleaseOutOfWindow(layout, p, tables);
    SequenceStep step;
    step.token_ids = std::span<const int32_t>(ids).subspan(p, 1);
    step.start_position = p;
    step.block_tables = TableSpans(tables);
    std::vector<float> row = backend->Forward(step, false);
    logits.insert(logits.end(), row.begin(), row.end());
  }
  for (const auto& table : tables) released += std::ranges::count(table, -1);
  EXPECT_GE(released, 2);  // blocks 0 and 1 of the sliding group went away
  EXPECT_LE(MaxAbsDiff(logits, reference), kTolerance);
}

TEST(CpuBackendTest, ChunkStartingRightAfterTheReleaseEdgeStillRuns) {
  // Position 71 with window 8 needs keys 64..71 only: block 0 may already be released.
  auto model = MakeTestModel(TestVariant::kNorth);
  auto ids = MakePrompt(80, 96);
  auto backend = MakeBackend(*model);
  auto reference_backend = MakeBackend(*model);
  auto tables = ContiguousBlockTables(backend->kv_layout(), 80);
  std::vector<float> reference = RunChunks(*reference_backend, ids, {80}, tables);
  std::vector<float> first =
      RunChunks(*backend, std::vector<int32_t>(ids.begin(), ids.begin() + 71), {71}, tables);
  ReleaseOutOfWindow(backend->kv_layout(), 71, tables);
  SequenceStep step;
  step.token_ids = std::span<const int32_t>(ids).subspan(71);
  step.start_position = 71;
  step.block_tables = TableSpans(tables);
  std::vector<float> rest = backend->Forward(step, true);
  first.insert(first.end(), rest.begin(), rest.end());
  EXPECT_LE(MaxAbsDiff(first, reference), kTolerance);
}

std::vector<float> LastLogits(TestVariant variant, const ModelConfig* override_config = nullptr) {
  auto model = MakeTestModel(variant);
  if (override_config) model->config = *override_config;
  auto backend = MakeBackend(*model);
  auto ids = MakePrompt(40, 96);
  auto tables = ContiguousBlockTables(backend->kv_layout(), 40);
  std::vector<float> logits = RunChunks(*backend, ids, {40}, tables);
  for (float logit : logits) EXPECT_TRUE(std::isfinite(logit)) << VariantName(variant);
  return std::vector<float>(logits.end() - 96, logits.end());
}

TEST(CpuBackendTest, EveryConfigBranchRunsAndDiffersFromNorth) {
  std::vector<float> north = LastLogits(TestVariant::kNorth);
  for (TestVariant variant :
       {TestVariant::kLayerNorm, TestVariant::kSoftmaxRouter, TestVariant::kRenormalisedSigmoid,
        TestVariant::kSharedAverage, TestVariant::kSharedSum, TestVariant::kDensePrefix}) {
    EXPECT_GT(MaxAbsDiff(LastLogits(variant), north), 1e-3f) << VariantName(variant);
  }
  EXPECT_GT(
      MaxAbsDiff(LastLogits(TestVariant::kSharedAverage), LastLogits(TestVariant::kSharedSum)),
      1e-3f);
}

TEST(CpuBackendTest, RopeFlagOfANopeLayerMatters) {
  // Layer 4 is a full NoPE layer; turning RoPE on there must change the logits.
  ModelConfig config = MakeTestConfig(TestVariant::kNorth);
  ASSERT_FALSE(config.layers[4].uses_rope);
  config.layers[4].uses_rope = true;
  EXPECT_GT(MaxAbsDiff(LastLogits(TestVariant::kNorth, &config), LastLogits(TestVariant::kNorth)),
            1e-3f);
}

// A NaN or an infinity in a weight would turn every answer into garbage: refused at load, by name.
TEST(CpuBackendTest, NonFiniteWeightsAreRefusedByName) {
  for (float poison : {std::nanf(""), -INFINITY}) {
    std::unique_ptr<TestModel> model = MakeTestModel(TestVariant::kNorth);
    const TensorView& view = model->weights.layers[2].experts[1].down;
    auto* values = reinterpret_cast<float*>(const_cast<std::byte*>(view.bytes.data()));
    values[view.num_elements() - 1] = poison;
    try {
      MakeBackend(*model);
      ADD_FAILURE() << "no error";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("'" + view.name + "' holds NaN or infinite"),
                std::string::npos)
          << error.what();
    }
  }
}

TEST(CpuBackendTest, BadStepsAreErrors) {
  auto model = MakeTestModel(TestVariant::kNorth);
  auto backend = MakeBackend(*model);
  auto tables = ContiguousBlockTables(backend->kv_layout(), 64);
  std::vector<int32_t> ids = {1, 2, 3};
  std::vector<int32_t> bad_ids = {1, 96};
  SequenceStep step;
  step.token_ids = bad_ids;
  step.block_tables = TableSpans(tables);
  EXPECT_THROW(backend->Forward(step, false), Error);  // token outside the vocabulary
  step.token_ids = ids;
  step.start_position = 62;  // positions 62..64: the table has one block only
  EXPECT_THROW(backend->Forward(step, false), Error);
  step.start_position = 0;
  step.block_tables.pop_back();
  EXPECT_THROW(backend->Forward(step, false), Error);  // one table short
  step.block_tables = TableSpans(tables);
  step.sample = true;  // without sampling params
  EXPECT_THROW(backend->Step(StepInputs{{step}}), Error);
}

TEST(CpuBackendTest, ReleasedBlockInsideTheWindowIsAnError) {
  auto model = MakeTestModel(TestVariant::kNorth);
  auto backend = MakeBackend(*model);
  auto ids = MakePrompt(70, 96);
  auto tables = ContiguousBlockTables(backend->kv_layout(), 71);
  RunChunks(*backend, ids, {70}, tables);
  ReleaseOutOfWindow(backend->kv_layout(), 71, tables);  // right for position 71, not 70
  std::vector<int32_t> next = {5};
  SequenceStep step;
  step.token_ids = next;
  step.start_position = 70;  // needs key 63 of the released block
  step.block_tables = TableSpans(tables);
  EXPECT_THROW(backend->Forward(step, false), Error);
}

// log_softmax of `logits` at `id`, computed in double.
double LogSoftmax(std::span<const float> logits, int32_t id) {
  double max_logit = *std::ranges::max_element(logits);
  double sum = 0.0;
  for (float logit : logits) sum += std::exp(logit - max_logit);
  return logits[id] - max_logit - std::log(sum);
}

TEST(CpuBackendTest, StepSamplesGreedilyAndReportsLogprobs) {
  auto model = MakeTestModel(TestVariant::kNorth);
  auto backend = MakeBackend(*model);
  auto oracle = MakeBackend(*model);
  auto ids = MakePrompt(20, 96);
  auto tables = ContiguousBlockTables(backend->kv_layout(), 20);
  std::vector<float> logits = RunChunks(*oracle, ids, {20}, tables);
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.num_logprobs = 2;
  greedy.num_prompt_logprobs = 0;
  std::vector<int32_t> next(ids.begin() + 1, ids.end());
  next.push_back(-1);
  SequenceStep step;
  step.token_ids = ids;
  step.block_tables = TableSpans(tables);
  step.sample = true;
  step.sampling = &greedy;
  step.prompt_token_ids = ids;
  step.next_token_ids = next;
  StepOutputs outputs = backend->Step(StepInputs{{step}});
  ASSERT_EQ(outputs.results.size(), 1u);
  const SequenceResult& result = outputs.results[0];
  std::span<const float> last = std::span<const float>(logits).subspan(19 * 96, 96);
  int32_t argmax = static_cast<int32_t>(std::ranges::max_element(last) - last.begin());
  EXPECT_EQ(result.token_id, argmax);
  EXPECT_NEAR(result.logprobs.chosen.logprob, LogSoftmax(last, argmax), 1e-4);
  EXPECT_EQ(result.logprobs.top.size(), 2u);
  ASSERT_EQ(result.prompt_logprobs.size(), 19u);
  std::span<const float> third = std::span<const float>(logits).subspan(3 * 96, 96);
  EXPECT_EQ(result.prompt_logprobs[3].chosen.token_id, ids[4]);
  EXPECT_NEAR(result.prompt_logprobs[3].chosen.logprob, LogSoftmax(third, ids[4]), 1e-4);
}

TEST(CpuBackendTest, BatchedSequencesMatchSequencesRunAlone) {
  auto model = MakeTestModel(TestVariant::kSoftmaxRouter);
  auto ids_a = MakePrompt(30, 96);
  std::vector<int32_t> ids_b(ids_a.rbegin(), ids_a.rend());
  auto alone = MakeBackend(*model);
  auto tables_a = ContiguousBlockTables(alone->kv_layout(), 30);  // block 0 of every group
  std::vector<float> reference_a = RunChunks(*alone, ids_a, {30}, tables_a);
  std::vector<std::vector<int32_t>> tables_b(tables_a.size(), std::vector<int32_t>{4});
  std::vector<float> reference_b = RunChunks(*alone, ids_b, {30}, tables_b);

  auto batched = MakeBackend(*model);
  StepInputs inputs;
  for (auto [ids, tables] : {std::pair{&ids_a, &tables_a}, std::pair{&ids_b, &tables_b}}) {
    SequenceStep step;
    step.sequence_id = static_cast<int64_t>(inputs.sequences.size());
    step.token_ids = *ids;
    step.block_tables = TableSpans(*tables);
    step.return_logits = true;
    inputs.sequences.push_back(step);
  }
  StepOutputs outputs = batched->Step(inputs);
  ASSERT_EQ(outputs.results.size(), 2u);
  for (size_t s = 0; s < 2; ++s) {
    const auto& rows = outputs.results[s].logits;
    ASSERT_EQ(rows.size(), 30u);
    std::vector<float> flat;
    for (const auto& row : rows) flat.insert(flat.end(), row.begin(), row.end());
    EXPECT_LE(MaxAbsDiff(flat, s == 0 ? reference_a : reference_b), kTolerance) << "sequence " << s;
  }
}

}  // namespace
}  // namespace mkserve::testing
