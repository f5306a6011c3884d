// CudaBackend::StartStep on the megakernel (5 North-width layers, random weights): decode steps
// started before the previous one is read, each row's token taken on the device from the step
// before (the argmax of a plain greedy row, the in-step sample of the others), must pick the
// tokens that whole steps fed those tokens from the host pick; and rows the backend cannot start
// that way are refused by name or run whole. The megakernel adds split-K partials in arrival
// order, so a pick may flip where two tokens are within rounding: a row may part from the whole
// steps only where both runs saw the same distribution (same most likely token, its logprob
// within 0.02), and from then on its histories differ. The plain greedy row has no logprobs: it
// is judged by its logits: a whole step in the same state must find the two picks within 1 %.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/started_step.h"
#include "gpu_test_util.h"
#include "model/presets.h"

namespace mkserve::cuda::testing {
namespace {

constexpr int64_t kRows = 4;
constexpr int64_t kPrompt = 20;
constexpr int kSteps = 12;

class StartedStepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RequireGpu();
    config_ = NmcPreset(5);
    CudaBackendOptions options;
    options.max_batch = 8;
    options.max_num_tokens = 256;
    options.decode_path = "megakernel";
    backend_ = std::make_unique<CudaBackend>(config_, DeviceWeights::Random(config_, 5), options);
    ASSERT_NE(backend_->FindDecodePath("megakernel"), nullptr);
    greedy_.temperature = 0.0f;
    seeded_.temperature = 0.8f;
    seeded_.top_p = 0.9f;
    seeded_.seed = 42;
    seeded_.num_logprobs = 1;
    greedy_logprobs_ = greedy_;
    greedy_logprobs_.num_logprobs = 1;
    for (int64_t r = 0; r < kRows; ++r) {  // one block of every group per row: 64 positions
      blocks_.push_back({static_cast<int32_t>(r)});
      for (int64_t i = 0; i < kPrompt; ++i) {
        prompts_.push_back(static_cast<int32_t>((r * 7919 + i * 104729) % 200000 + 8));
      }
    }
  }

  SequenceStep Row(int64_t r, std::span<const int32_t> tokens, int64_t position, int64_t index) {
    SequenceStep step;
    step.sequence_id = r;
    step.token_ids = tokens;
    step.start_position = position;
    for (size_t g = 0; g < backend_->kv_layout().groups.size(); ++g) {
      step.block_tables.push_back(blocks_[r]);
    }
    step.sample = true;
    step.sampling = r == 0 ? &greedy_ : r == 2 ? &greedy_logprobs_ : &seeded_;
    step.sample_index = index;
    return step;
  }

  // Row r's logits at decode step k (position kPrompt + k) fed `token`, from a whole step.
  std::vector<float> RowLogits(int64_t r, int32_t token, int k) {
    StepInputs inputs;
    inputs.sequences.push_back(Row(r, std::span<const int32_t>(&token, 1), kPrompt + k, k + 1));
    inputs.sequences[0].return_logits = true;
    return backend_->Step(inputs).results.at(0).logits.at(0);
  }

  // The prompts, then the first decode tokens: [row].
  std::vector<int32_t> Prefill() {
    StepInputs inputs;
    for (int64_t r = 0; r < kRows; ++r) {
      inputs.sequences.push_back(
          Row(r, std::span<const int32_t>(prompts_).subspan(r * kPrompt, kPrompt), 0, 0));
    }
    std::vector<int32_t> first;
    for (const SequenceResult& result : backend_->Step(inputs).results) {
      first.push_back(result.token_id);
    }
    return first;
  }

  ModelConfig config_;
  std::unique_ptr<CudaBackend> backend_;
  SamplingParams greedy_, greedy_logprobs_, seeded_;
  std::vector<std::vector<int32_t>> blocks_;
  std::vector<int32_t> prompts_;
};

TEST_F(StartedStepTest, StepsStartedAheadPickWhatWholeStepsPick) {
  // Whole steps, each row fed the token the step before picked.
  std::vector<std::vector<int32_t>> whole(kSteps + 1);
  std::vector<StepOutputs> whole_outputs;
  whole[0] = Prefill();
  for (int k = 0; k < kSteps; ++k) {
    StepInputs inputs;
    for (int64_t r = 0; r < kRows; ++r) {
      inputs.sequences.push_back(
          Row(r, std::span<const int32_t>(&whole[k][r], 1), kPrompt + k, k + 1));
    }
    whole_outputs.push_back(backend_->Step(inputs));
    for (const SequenceResult& result : whole_outputs.back().results) {
      whole[k + 1].push_back(result.token_id);
    }
  }
  // The same decode, each step started before the previous one is read.
  const std::vector<int32_t> first = Prefill();
  ASSERT_EQ(first, whole[0]);
  static constexpr int32_t kSampledBefore[1] = {kTokenSampledBefore};
  std::vector<std::unique_ptr<PendingStep>> steps;
  for (int k = 0; k < kSteps; ++k) {
    StepInputs inputs;
    for (int64_t r = 0; r < kRows; ++r) {
      const std::span<const int32_t> token = k == 0 ? std::span<const int32_t>(&first[r], 1)
                                                    : std::span<const int32_t>(kSampledBefore);
      inputs.sequences.push_back(Row(r, token, kPrompt + k, k + 1));
    }
    steps.push_back(backend_->StartStep(inputs, k == 0 ? nullptr : steps.back().get()));
    ASSERT_NE(dynamic_cast<StartedStep*>(steps.back().get()), nullptr) << "step " << k;
    if (k >= 1) steps[k - 1]->Wait();  // read one step behind, as the engine does
  }
  int64_t matched = 0;
  for (int64_t r = 0; r < kRows; ++r) {
    for (int k = 0; k < kSteps; ++k) {
      const StepOutputs& outputs = steps[k]->Wait();
      EXPECT_EQ(outputs.decode_path, "megakernel");
      const SequenceResult& got = outputs.results[r];
      const SequenceResult& want = whole_outputs[k].results[r];
      if (got.token_id == want.token_id) {
        ++matched;
        continue;
      }
      if (r == 0) {  // no logprobs: the two picks' logits, from a whole step in the same state
        const std::vector<float> logits = RowLogits(0, whole[k][0], k);
        const float tolerance = 0.01f * std::max(1.0f, std::fabs(logits.at(want.token_id)));
        EXPECT_GE(logits.at(got.token_id), logits.at(want.token_id) - tolerance)
            << "the plain greedy row parted at step " << k << " on a pick that is not a near tie";
      } else {
        ASSERT_FALSE(got.logprobs.top.empty() || want.logprobs.top.empty()) << "row " << r;
        EXPECT_EQ(got.logprobs.top[0].token_id, want.logprobs.top[0].token_id)
            << "row " << r << " step " << k << ": the two runs saw different distributions";
        EXPECT_NEAR(got.logprobs.top[0].logprob, want.logprobs.top[0].logprob, 0.02)
            << "row " << r << " step " << k;
      }
      std::printf("row %lld parts at step %d (a pick within rounding)\n", static_cast<long long>(r),
                  k);
      break;
    }
  }
  EXPECT_GE(matched, kRows);
}

TEST_F(StartedStepTest, RowsThatCannotStartAheadAreRefusedOrRunWhole) {
  const std::vector<int32_t> first = Prefill();
  static constexpr int32_t kSampledBefore[1] = {kTokenSampledBefore};
  // No step to take the token from: refused by name when read.
  StepInputs orphan;
  orphan.sequences.push_back(Row(0, kSampledBefore, kPrompt, 1));
  std::unique_ptr<PendingStep> refused = backend_->StartStep(orphan, nullptr);
  try {
    refused->Wait();
    FAIL() << "a row with no step to take its token from ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sequence 0"), std::string::npos) << e.what();
  }
  // Penalties read the output tokens, which lack the one sampled before: refused.
  StepInputs head;
  head.sequences.push_back(Row(1, std::span<const int32_t>(&first[1], 1), kPrompt, 1));
  std::unique_ptr<PendingStep> before = backend_->StartStep(head, nullptr);
  SamplingParams penalised = seeded_;
  penalised.frequency_penalty = 0.5f;
  StepInputs next;
  next.sequences.push_back(Row(1, kSampledBefore, kPrompt + 1, 2));
  next.sequences[0].sampling = &penalised;
  EXPECT_THROW(backend_->StartStep(next, before.get())->Wait(), Error);
  // Top logprobs past what the GPU returns need the host: the step runs whole, still correct.
  SamplingParams many_logprobs = greedy_;
  many_logprobs.num_logprobs = 1000;
  next.sequences[0].sampling = &many_logprobs;
  std::unique_ptr<PendingStep> whole = backend_->StartStep(next, before.get());
  EXPECT_EQ(dynamic_cast<StartedStep*>(whole.get()), nullptr);
  const int32_t picked = whole->Wait().results.at(0).token_id;
  StepInputs fed;
  const int32_t token = before->Wait().results.at(0).token_id;
  fed.sequences.push_back(Row(1, std::span<const int32_t>(&token, 1), kPrompt + 1, 2));
  fed.sequences[0].sampling = &many_logprobs;
  EXPECT_EQ(backend_->Step(fed).results.at(0).token_id, picked);
}

}  // namespace
}  // namespace mkserve::cuda::testing
