// GpuSampler against the engine's CPU sampler (SampleFromLogits, the definition of the
// semantics) on the same logits: random rows of several shapes (flat, peaked, heavy ties, masked
// entries) and every combination of temperature, top-k, top-p, min-p, penalties, logit_bias,
// min_tokens and logprobs, with and without a grammar's allowed-token mask. Tokens must be
// identical and logprobs within 1e-4; results must not depend on the slot or the batch; bad
// parameters must be clear errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "backend_test_util.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/sampling/gpu_sampler.h"
#include "engine/kv_layout.h"
#include "engine/sampler.h"
#include "gpu_test_util.h"
#include "model/presets.h"
#include "model/random_checkpoint.h"
#include "sampling_cases.h"

namespace mkserve::cuda::testing {
namespace {

class GpuSamplerTest : public ::testing::Test {
 protected:
  // GPU results for `cases`, sampling case i from row rows[i] of `logits`.
  static std::vector<SequenceResult> RunGpu(GpuSampler& sampler, const std::vector<float>& logits,
                                            int64_t vocab, std::vector<Case>& cases,
                                            const std::vector<int64_t>& rows) {
    auto device = ToDevice(logits);
    std::vector<GpuSampleRequest> requests;
    for (size_t i = 0; i < cases.size(); ++i) requests.push_back({rows[i], &cases[i].step});
    return sampler.Sample(device.data(), static_cast<int64_t>(logits.size()) / vocab, requests, 0);
  }

  // Every parameter combination on rows of `shape`; each case gets its own row.
  static void CompareAllCombos(Shape shape, int64_t vocab, int num_combos, int combo_step,
                               uint32_t seed, bool constrained = false) {
    RequireGpu();
    std::mt19937 rng(seed);
    std::vector<Case> cases(num_combos);
    std::vector<float> logits;
    std::vector<int64_t> rows;
    for (int i = 0; i < num_combos; ++i) {
      SetCombo(cases[i], (i * combo_step) % 864, vocab, rng);
      Link(cases[i], 7000 + i, i % 9);
      if (constrained) AllowRandomTokens(cases[i], vocab, rng, i);
      std::vector<float> row = MakeRow(shape, vocab, seed * 1000 + i);
      logits.insert(logits.end(), row.begin(), row.end());
      rows.push_back(i);
    }
    GpuSampler sampler(vocab);
    std::vector<SequenceResult> got = RunGpu(sampler, logits, vocab, cases, rows);
    ASSERT_EQ(got.size(), cases.size());
    for (int i = 0; i < num_combos; ++i) {
      std::span<const float> row(logits.data() + i * vocab, vocab);
      ExpectSame(got[i], SampleFromLogits(row, cases[i].step),
                 cases[i].name + " vocab " + std::to_string(vocab));
    }
  }
};

// 864 combinations = 3 temperatures x 4 top-k x 3 top-p x 3 min-p x penalties x bias/min_tokens
// x logprobs, each on its own random row, at a small vocabulary (cheap on the CPU side).
TEST_F(GpuSamplerTest, EveryComboMatchesCpuFlat) {
  CompareAllCombos(Shape::kFlat, 4099, 864, 1, 1);
}
TEST_F(GpuSamplerTest, EveryComboMatchesCpuPeaked) {
  CompareAllCombos(Shape::kPeaked, 4099, 864, 1, 2);
}
TEST_F(GpuSamplerTest, EveryComboMatchesCpuTies) {
  CompareAllCombos(Shape::kTies, 4099, 864, 1, 3);
}
TEST_F(GpuSamplerTest, EveryComboMatchesCpuMasked) {
  CompareAllCombos(Shape::kMasked, 4099, 864, 1, 4);
}

// Constrained decoding: the same combinations with a random allowed-token mask per row.
TEST_F(GpuSamplerTest, EveryComboMatchesCpuWithAllowedTokens) {
  CompareAllCombos(Shape::kFlat, 4099, 864, 1, 8, /*constrained=*/true);
  CompareAllCombos(Shape::kPeaked, 4099, 864, 1, 9, /*constrained=*/true);
  CompareAllCombos(Shape::kFlat, 262144, 40, 37, 10, /*constrained=*/true);
}

// The real vocabulary: a spread of the combinations (a stride coprime with 864) per shape.
TEST_F(GpuSamplerTest, FullVocabularyMatchesCpu) {
  CompareAllCombos(Shape::kFlat, 262144, 40, 37, 5);
  CompareAllCombos(Shape::kPeaked, 262144, 40, 37, 6);
  CompareAllCombos(Shape::kTies, 262144, 40, 37, 7);
}

// Many draws from one distribution: the inverse CDF lands on many different ranks, each must be
// the CPU's.
TEST_F(GpuSamplerTest, ManyDrawsMatchCpu) {
  RequireGpu();
  const int64_t vocab = 262144;
  const int num_draws = 64;
  std::vector<float> logits = MakeRow(Shape::kFlat, vocab, 99);
  for (float& v : logits) v *= 0.5f;  // thousands of plausible tokens
  std::vector<Case> cases(num_draws);
  for (int i = 0; i < num_draws; ++i) {
    cases[i].params.temperature = 1.0f;
    cases[i].params.top_p = i % 2 ? 0.95f : 1.0f;
    cases[i].params.seed = 5;
    Link(cases[i], 1, i);
  }
  GpuSampler sampler(vocab);
  std::vector<SequenceResult> got =
      RunGpu(sampler, logits, vocab, cases, std::vector<int64_t>(num_draws, 0));
  int distinct = 0;
  std::vector<int32_t> seen;
  for (int i = 0; i < num_draws; ++i) {
    EXPECT_EQ(got[i].token_id, SampleFromLogits(logits, cases[i].step).token_id) << "draw " << i;
    if (std::find(seen.begin(), seen.end(), got[i].token_id) == seen.end()) ++distinct;
    seen.push_back(got[i].token_id);
  }
  EXPECT_GT(distinct, num_draws / 2) << "the draws barely move: the uniform is not used";
}

// A request's result depends on its row, parameters, seed and index only: the same requests
// permuted over other slots and rows, and each alone, give bit-identical results.
TEST_F(GpuSamplerTest, IndependentOfSlotAndBatch) {
  RequireGpu();
  const int64_t vocab = 262144;
  const int num_cases = 8;
  std::mt19937 rng(11);
  std::vector<Case> cases(num_cases);
  std::vector<float> logits;
  for (int i = 0; i < num_cases; ++i) {
    SetCombo(cases[i], 1 + 107 * i, vocab, rng);
    cases[i].params.temperature = 0.9f;
    cases[i].params.num_logprobs = 3;
    Link(cases[i], 40 + i, 3);
    std::vector<float> row = MakeRow(i % 2 ? Shape::kPeaked : Shape::kFlat, vocab, 300 + i);
    logits.insert(logits.end(), row.begin(), row.end());
  }
  GpuSampler sampler(vocab);
  std::vector<int64_t> rows(num_cases);
  for (int i = 0; i < num_cases; ++i) rows[i] = i;
  std::vector<SequenceResult> base = RunGpu(sampler, logits, vocab, cases, rows);
  // Reverse the slots and move each row to another position of the buffer.
  std::vector<Case> permuted(cases.rbegin(), cases.rend());
  std::vector<float> moved(logits.size());
  for (int i = 0; i < num_cases; ++i) {
    Link(permuted[i], 40 + num_cases - 1 - i, 3);
    const int from = num_cases - 1 - i, to = (i + 3) % num_cases;
    std::copy_n(logits.begin() + from * vocab, vocab, moved.begin() + to * vocab);
    rows[i] = to;
  }
  std::vector<SequenceResult> got = RunGpu(sampler, moved, vocab, permuted, rows);
  for (int i = 0; i < num_cases; ++i) {
    const SequenceResult& want = base[num_cases - 1 - i];
    EXPECT_EQ(got[i].token_id, want.token_id) << "slot " << i;
    EXPECT_EQ(got[i].logprobs.chosen.logprob, want.logprobs.chosen.logprob) << "slot " << i;
  }
  std::vector<Case> alone(cases.begin() + 5, cases.begin() + 6);
  Link(alone[0], 45, 3);
  std::vector<float> one(logits.begin() + 5 * vocab, logits.begin() + 6 * vocab);
  EXPECT_EQ(RunGpu(sampler, one, vocab, alone, {0})[0].token_id, base[5].token_id);
}

TEST_F(GpuSamplerTest, BadParametersAreErrors) {
  RequireGpu();
  const int64_t vocab = 1000;
  EXPECT_THROW(GpuSampler(0), Error);
  EXPECT_THROW(GpuSampler(kGpuSamplerMaxVocab + 1), Error);
  GpuSampler sampler(vocab);
  std::vector<float> logits = MakeRow(Shape::kFlat, vocab, 1);
  auto expect_error = [&](auto change, const char* what) {
    std::vector<Case> cases(1);
    Link(cases[0], 1, 0);
    change(cases[0].params);
    EXPECT_THROW(RunGpu(sampler, logits, vocab, cases, {0}), Error) << what;
  };
  expect_error([](SamplingParams& p) { p.temperature = std::nanf(""); }, "NaN temperature");
  expect_error([](SamplingParams& p) { p.top_p = std::nanf(""); }, "NaN top_p");
  expect_error([](SamplingParams& p) { p.repetition_penalty = 0.0f; }, "zero repetition");
  expect_error([](SamplingParams& p) { p.logit_bias = {{3, INFINITY}}; }, "infinite bias");
  expect_error([](SamplingParams& p) { p.num_logprobs = kGpuMaxTopLogprobs + 1; }, "logprobs");
  std::vector<Case> cases(1);
  Link(cases[0], 1, 0);
  EXPECT_THROW(RunGpu(sampler, logits, vocab, cases, {1}), Error) << "row outside the buffer";
  EXPECT_THROW(RunGpu(sampler, logits, vocab, cases, {-1}), Error) << "negative row";
  std::vector<Case> shared(2);
  for (Case& c : shared) Link(c, 1, 0);
  shared[1].params.logit_bias = {{4, 1.0f}};
  EXPECT_THROW(RunGpu(sampler, logits, vocab, shared, {0, 0}), Error) << "edited row shared";
  EXPECT_TRUE(GpuSampler::CanSample(&cases[0].params));
  EXPECT_TRUE(GpuSampler::CanSample(nullptr));
  SamplingParams many;
  many.num_logprobs = kGpuMaxTopLogprobs + 1;
  EXPECT_FALSE(GpuSampler::CanSample(&many));
  // After the errors the sampler still works.
  EXPECT_EQ(RunGpu(sampler, logits, vocab, cases, {0})[0].token_id,
            SampleFromLogits(logits, cases[0].step).token_id);
}

// A CudaBackend over a random checkpoint of `config` written to (and removed from) a temp folder.
std::unique_ptr<CudaBackend> LoadTinyBackend(const ModelConfig& config, const std::string& name,
                                             uint64_t seed) {
  const auto dir = std::filesystem::temp_directory_path() / name;
  RandomCheckpointOptions checkpoint;
  checkpoint.seed = seed;
  WriteRandomCheckpoint(config, checkpoint, dir);
  CudaBackendOptions options;
  options.kv_layout = PlanKvLayout(config, 8 << 20, 2 * config.kv_width() * 2, 4);
  options.max_num_tokens = 256;
  auto backend = LoadCudaBackend(dir, options);
  std::filesystem::remove_all(dir);
  return backend;
}

// Through CudaBackend: sampled rows beyond plain greedy take the GPU sampler, and each result
// equals SampleFromLogits on the same row (return_logits copies it before the sampler edits it).
TEST_F(GpuSamplerTest, BackendSamplesLikeTheCpuSampler) {
  RequireGpu();
  const ModelConfig config = TinyPreset(2);
  auto backend = LoadTinyBackend(config, "mkserve_gpu_sampler_backend", /*seed=*/5);
  std::mt19937 rng(17);
  std::vector<Case> cases(4);
  std::vector<std::vector<std::vector<int32_t>>> tables;
  SimpleBlocks blocks(backend->kv_layout());
  StepInputs inputs;
  for (int i = 0; i < 4; ++i) {
    SetCombo(cases[i], 1 + 3 * i + 108 * (i % 2) + 216 * (i / 2) + 432, config.vocab_size, rng);
    tables.push_back(blocks.Allocate(static_cast<int64_t>(cases[i].prompt.size())));
  }
  cases[0].params.temperature = 0.0f;  // greedy with penalties and logprobs: GPU path too
  for (int i = 0; i < 4; ++i) {
    SequenceStep step = MakeStep(i, cases[i].prompt, 0, tables[i], &cases[i].params, true);
    step.prompt_token_ids = cases[i].prompt;
    step.output_token_ids = cases[i].output;
    step.sample_index = 12;
    inputs.sequences.push_back(step);
  }
  const StepOutputs outputs = backend->Step(inputs);
  for (int i = 0; i < 4; ++i) {
    ASSERT_FALSE(outputs.results[i].logits.empty());
    ExpectSame(outputs.results[i],
               SampleFromLogits(outputs.results[i].logits.back(), inputs.sequences[i]),
               "backend row " + std::to_string(i));
  }
}

// A plain greedy row with a grammar mask must not take the unmasked argmax: with the argmax
// itself masked out, the backend returns the best allowed token, as SampleFromLogits does.
TEST_F(GpuSamplerTest, BackendGreedyRowHonoursTheAllowedTokens) {
  RequireGpu();
  const ModelConfig config = TinyPreset(2);
  auto backend = LoadTinyBackend(config, "mkserve_gpu_sampler_allowed", /*seed=*/6);
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  const std::vector<int32_t> prompt = {5, 17, 300, 42, 9, 77};
  SimpleBlocks blocks(backend->kv_layout());
  const auto table = blocks.Allocate(static_cast<int64_t>(prompt.size()));
  StepInputs inputs;
  inputs.sequences.push_back(MakeStep(0, prompt, 0, table, &greedy, true));
  inputs.sequences[0].return_logits = true;
  const StepOutputs unmasked = backend->Step(inputs);
  const int32_t argmax = unmasked.results[0].token_id;
  std::vector<uint32_t> allowed((config.vocab_size + 31) / 32, ~0u);
  allowed[argmax / 32] &= ~(1u << (argmax % 32));
  inputs.sequences[0].allowed_tokens = allowed;
  inputs.sequences[0].return_logits = false;
  const StepOutputs masked = backend->Step(inputs);
  EXPECT_NE(masked.results[0].token_id, argmax);
  EXPECT_EQ(masked.results[0].token_id,
            SampleFromLogits(unmasked.results[0].logits.back(), inputs.sequences[0]).token_id);
}

// Run with --gtest_also_run_disabled_tests: median microseconds per step for 1/8/64 rows of
// 262144 logits: GpuSampler::Sample (host preparation, copies, kernel, sync) against the host
// path it replaces (copy each row, SampleFromLogits).
TEST_F(GpuSamplerTest, DISABLED_TopPLatency) {
  RequireGpu();
  const int64_t vocab = 262144, num_buffer_rows = 128;
  std::vector<float> host;
  for (int64_t r = 0; r < num_buffer_rows; ++r) {
    std::vector<float> row = MakeRow(r % 2 ? Shape::kPeaked : Shape::kFlat, vocab, 500 + r);
    host.insert(host.end(), row.begin(), row.end());
  }
  auto device = ToDevice(host);
  GpuSampler sampler(vocab);
  std::vector<float> row_copy(vocab);
  for (int32_t top_k : {0, 50}) {
    SamplingParams params;
    params.temperature = 0.8f;
    params.top_p = 0.9f;
    params.top_k = top_k;
    params.seed = 3;
    std::vector<SequenceStep> steps(64);
    for (int64_t b : {1, 8, 64}) {
      std::vector<float> gpu_us, host_us;
      for (int iter = 0; iter < 12; ++iter) {
        std::vector<GpuSampleRequest> requests;
        for (int64_t i = 0; i < b; ++i) {  // rotate rows so L2 does not hold the batch
          steps[i].sampling = &params;
          steps[i].sample_index = iter;
          requests.push_back({(iter * b + i) % num_buffer_rows, &steps[i]});
        }
        auto start = std::chrono::steady_clock::now();
        sampler.Sample(device.data(), num_buffer_rows, requests, 0);
        auto end = std::chrono::steady_clock::now();
        gpu_us.push_back(std::chrono::duration<float, std::micro>(end - start).count());
        if (iter >= 3) continue;  // the host path is slow: three steps are enough
        start = std::chrono::steady_clock::now();
        for (const GpuSampleRequest& r : requests) {
          MKSERVE_CUDA_CHECK(cudaMemcpy(row_copy.data(), device.data() + r.logits_row * vocab,
                                        vocab * sizeof(float), cudaMemcpyDeviceToHost));
          SampleFromLogits(row_copy, *r.step);
        }
        end = std::chrono::steady_clock::now();
        host_us.push_back(std::chrono::duration<float, std::micro>(end - start).count());
      }
      gpu_us.erase(gpu_us.begin(), gpu_us.begin() + 2);  // warm-up
      std::sort(gpu_us.begin(), gpu_us.end());
      std::sort(host_us.begin(), host_us.end());
      std::printf(
          "GPU_SAMPLER_BENCH rows=%ld top_k=%d top_p=0.9 gpu_median_us=%.1f "
          "gpu_min_us=%.1f host_path_median_us=%.1f\n",
          static_cast<long>(b), top_k, gpu_us[gpu_us.size() / 2], gpu_us.front(),
          host_us[host_us.size() / 2]);
    }
  }
}

}  // namespace
}  // namespace mkserve::cuda::testing
