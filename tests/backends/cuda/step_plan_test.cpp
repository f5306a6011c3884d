// StepPlan (host only, no GPU needed): flattening of prefill chunks and decode rows into per-token
// arrays and KV slots, padded block tables, logits rows, and the validation errors.
#include "backends/cuda/core/step_plan.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "model/presets.h"

namespace mkserve::cuda {
namespace {

class StepPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    layout_ = PlanKvLayout(config_, 4 << 20, 2 * config_.kv_width() * 2, 4);
    ASSERT_GE(layout_.num_groups(), 2);
  }
  SequenceStep MakeStep(std::span<const int32_t> tokens, int64_t start,
                        std::span<const int32_t> table) {
    SequenceStep step;
    step.token_ids = tokens;
    step.start_position = start;
    for (int64_t g = 0; g < layout_.num_groups(); ++g) step.block_tables.push_back(table);
    return step;
  }
  ModelConfig config_ = TinyPreset(6);
  KvLayout layout_;
  SamplingParams greedy_ = GreedyParams();
};

TEST_F(StepPlanTest, FlattensChunksAndDecodeRows) {
  const std::vector<int32_t> prompt = {5, 6, 7}, decode = {9};
  const std::vector<int32_t> table_a = {4, 2, 5}, table_b = {1, 3, 0, 6};  // longer than needed
  StepInputs inputs;
  inputs.sequences.push_back(MakeStep(prompt, 62, table_a));  // crosses into page 1
  inputs.sequences.push_back(MakeStep(decode, 130, table_b));
  inputs.sequences[1].sample = true;
  inputs.sequences[1].sampling = &greedy_;
  StepPlan plan = BuildStepPlan(config_, layout_, inputs, 64);
  EXPECT_EQ(plan.num_tokens, 4);
  EXPECT_EQ(plan.token_ids, (std::vector<int32_t>{5, 6, 7, 9}));
  EXPECT_EQ(plan.positions, (std::vector<int32_t>{62, 63, 64, 130}));
  EXPECT_EQ(plan.seq_of_token, (std::vector<int32_t>{0, 0, 0, 1}));
  EXPECT_EQ(plan.slots[0],
            (std::vector<int32_t>{4 * 64 + 62, 4 * 64 + 63, 2 * 64 + 0, 0 * 64 + 2}));
  EXPECT_EQ(plan.max_pages[0], 3);
  EXPECT_EQ(plan.block_tables[0], (std::vector<int32_t>{4, 2, -1, 1, 3, 0}));
  EXPECT_EQ(plan.max_context_tokens, 131);
  ASSERT_EQ(plan.logit_rows.size(), 1u);
  EXPECT_EQ(plan.logit_rows[0].token_index, 3);
  EXPECT_EQ(plan.logit_rows[0].sequence_index, 1);
}

TEST_F(StepPlanTest, LogitRowsForReturnLogitsAndPromptLogprobs) {
  const std::vector<int32_t> prompt = {5, 6, 7}, next = {6, 7, -1}, table = {0};
  StepInputs inputs;
  inputs.sequences.push_back(MakeStep(prompt, 0, table));
  inputs.sequences[0].next_token_ids = next;
  StepPlan plan = BuildStepPlan(config_, layout_, inputs, 64);
  ASSERT_EQ(plan.logit_rows.size(), 2u);
  EXPECT_EQ(plan.logit_rows[1].token_in_sequence, 1);
  inputs.sequences[0].return_logits = true;
  EXPECT_EQ(BuildStepPlan(config_, layout_, inputs, 64).logit_rows.size(), 3u);
}

// What decode paths decide on: one token per sequence, and what each logits row needs.
TEST_F(StepPlanTest, MarksDecodeOnlyStepsAndWhatEachRowNeeds) {
  const std::vector<int32_t> one = {9}, two = {5, 6}, next = {7}, table = {0, 1, 2};
  SamplingParams seeded;
  seeded.temperature = 0.8f;
  seeded.seed = 3;
  SamplingParams many_logprobs = seeded;
  many_logprobs.num_logprobs = 1000;  // more than the GPU sampler returns: host
  StepInputs inputs;
  for (const SamplingParams* params : {&greedy_, &seeded, &many_logprobs}) {
    inputs.sequences.push_back(MakeStep(one, 70, table));
    inputs.sequences.back().sample = true;
    inputs.sequences.back().sampling = params;
  }
  inputs.sequences.push_back(MakeStep(one, 70, table));
  inputs.sequences.back().next_token_ids = next;  // a prompt logprob, no sample
  StepPlan plan = BuildStepPlan(config_, layout_, inputs, 64);
  EXPECT_TRUE(plan.decode_only);
  ASSERT_EQ(plan.logit_rows.size(), 4u);
  const RowNeeds& argmax = plan.logit_rows[0].needs;
  EXPECT_TRUE(argmax.sample && !argmax.gpu_sample && !argmax.host_sample && !argmax.host_logits);
  const RowNeeds& gpu = plan.logit_rows[1].needs;
  EXPECT_TRUE(gpu.sample && gpu.gpu_sample && !gpu.host_sample && !gpu.host_logits);
  const RowNeeds& host = plan.logit_rows[2].needs;
  EXPECT_TRUE(host.sample && !host.gpu_sample && host.host_sample && host.host_logits);
  const RowNeeds& prompt = plan.logit_rows[3].needs;
  EXPECT_TRUE(!prompt.sample && prompt.prompt_logprob && prompt.host_logits);
  inputs.sequences.push_back(MakeStep(two, 0, table));  // a prefill chunk joins
  EXPECT_FALSE(BuildStepPlan(config_, layout_, inputs, 64).decode_only);
  EXPECT_FALSE(BuildStepPlan(config_, layout_, StepInputs{}, 64).decode_only);
}

TEST_F(StepPlanTest, RejectsBadInputsWithClearErrors) {
  const std::vector<int32_t> tokens = {1, 2}, bad_token = {1, 5000}, table = {0}, short_table = {};
  const std::vector<int32_t> released = {-1}, beyond = {1 << 20};
  auto expect_error = [&](const SequenceStep& step, int64_t max_tokens, const std::string& text) {
    StepInputs inputs;
    inputs.sequences.push_back(step);
    try {
      BuildStepPlan(config_, layout_, inputs, max_tokens);
      ADD_FAILURE() << "no error for: " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  expect_error(MakeStep(bad_token, 0, table), 64, "outside the vocabulary");
  expect_error(MakeStep(tokens, 0, short_table), 64, "block table has 0 blocks");
  expect_error(MakeStep(tokens, 0, released), 64, "released");
  expect_error(MakeStep(tokens, 0, beyond), 64, "outside the pool");
  expect_error(MakeStep(tokens, 0, table), 1, "max_num_tokens");
  expect_error(MakeStep({}, 0, table), 64, "no tokens");
  SequenceStep no_params = MakeStep(tokens, 0, table);
  no_params.sample = true;
  expect_error(no_params, 64, "sample set without sampling");
  SequenceStep wrong_groups = MakeStep(tokens, 0, table);
  wrong_groups.block_tables.pop_back();
  expect_error(wrong_groups, 64, "block tables for");
}

}  // namespace
}  // namespace mkserve::cuda
