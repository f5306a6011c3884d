// Sampler semantics: each filter is checked by drawing many times and comparing the empirical
// frequencies with a distribution written out by hand in the test.
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

namespace mkserve {
namespace {

constexpr int kDraws = 20000;
constexpr double kTolerance = 0.015;

// Logits whose softmax is exactly `probs` (they sum to 1).
std::vector<float> LogitsOf(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(p > 0 ? static_cast<float>(std::log(p)) : -1e30f);
  return logits;
}

std::map<int32_t, double> Frequencies(const std::vector<float>& logits, SamplingParams params,
                                      std::vector<int32_t> prompt = {},
                                      std::vector<int32_t> output = {},
                                      std::vector<uint32_t> allowed = {}) {
  std::map<int32_t, double> freq;
  SequenceStep step;
  step.sampling = &params;
  step.allowed_tokens = allowed;
  step.prompt_token_ids = prompt;
  step.output_token_ids = output;
  for (int i = 0; i < kDraws; ++i) {
    params.seed = 1234 + i / 100;
    step.sample_index = i % 100;
    freq[SampleFromLogits(logits, step).token_id] += 1.0 / kDraws;
  }
  return freq;
}

void ExpectDistribution(const std::map<int32_t, double>& freq,
                        const std::map<int32_t, double>& expected) {
  double total = 0;
  for (auto [id, p] : expected) total += p;
  for (auto [id, f] : freq) {
    ASSERT_TRUE(expected.count(id)) << "token " << id << " must be filtered out, got " << f;
  }
  for (auto [id, p] : expected) {
    double f = freq.count(id) ? freq.at(id) : 0.0;
    EXPECT_NEAR(f, p / total, kTolerance) << "token " << id;
  }
}

const std::vector<double> kProbs = {0.05, 0.4, 0.25, 0.15, 0.1, 0.03, 0.02};

TEST(SamplerTest, UniformIsInRangeAndRoughlyFlat) {
  std::vector<int> bins(10, 0);
  for (int i = 0; i < 100000; ++i) {
    double u = SampleUniform(7, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    ++bins[static_cast<int>(u * 10)];
  }
  for (int count : bins) EXPECT_NEAR(count, 10000, 400);
  EXPECT_NE(SampleUniform(7, 0), SampleUniform(8, 0));
  EXPECT_NE(SampleUniform(7, 0), SampleUniform(7, 1));
}

TEST(SamplerTest, PlainTemperatureOneFollowsSoftmax) {
  SamplingParams params;
  ExpectDistribution(Frequencies(LogitsOf(kProbs), params),
                     {{0, .05}, {1, .4}, {2, .25}, {3, .15}, {4, .1}, {5, .03}, {6, .02}});
}

TEST(SamplerTest, TopKKeepsTheKMostLikely) {
  SamplingParams params;
  params.top_k = 3;
  ExpectDistribution(Frequencies(LogitsOf(kProbs), params), {{1, .4}, {2, .25}, {3, .15}});
}

TEST(SamplerTest, TopPKeepsSmallestPrefixReachingP) {
  SamplingParams params;
  params.top_p = 0.7f;  // 0.4, 0.65, 0.8: the third token is needed to reach 0.7
  ExpectDistribution(Frequencies(LogitsOf(kProbs), params), {{1, .4}, {2, .25}, {3, .15}});
  params.top_p = 0.1f;  // never empty
  ExpectDistribution(Frequencies(LogitsOf(kProbs), params), {{1, .4}});
}

TEST(SamplerTest, MinPDropsTokensBelowFractionOfMax) {
  SamplingParams params;
  params.min_p = 0.3f;  // floor 0.12
  ExpectDistribution(Frequencies(LogitsOf(kProbs), params), {{1, .4}, {2, .25}, {3, .15}});
  params.min_p = 0.2f;  // floor 0.08
  ExpectDistribution(Frequencies(LogitsOf(kProbs), params), {{1, .4}, {2, .25}, {3, .15}, {4, .1}});
}

TEST(SamplerTest, CombinedFiltersApplyInOrder) {
  SamplingParams params;
  params.top_k = 5;      // 0.4 .25 .15 .1 .05
  params.top_p = 0.85f;  // of the top-5 mass 0.95: .4 .25 .15 reach 0.8/0.95 = 0.84, so add .1
  params.min_p = 0.3f;   // floor 0.12 drops 0.1
  ExpectDistribution(Frequencies(LogitsOf(kProbs), params), {{1, .4}, {2, .25}, {3, .15}});
}

// A big vocabulary with a long flat tail: the lazy partial sort must still find every token.
TEST(SamplerTest, LargeVocabularyTailIsReachable) {
  std::vector<double> probs(5000, 0.5 / 4999);
  probs[123] = 0.5;
  std::vector<float> logits = LogitsOf(probs);
  SamplingParams params;
  params.seed = 5;
  SequenceStep step;
  step.sampling = &params;
  std::map<int32_t, int> counts;
  const int draws = 2000;
  for (step.sample_index = 0; step.sample_index < draws; ++step.sample_index) {
    ++counts[SampleFromLogits(logits, step).token_id];
  }
  EXPECT_NEAR(counts[123] / double(draws), 0.5, 0.04);  // ~3.5 standard deviations
  EXPECT_GT(counts.size(), 500u);                       // ~900 distinct tail tokens expected
}

TEST(SamplerTest, TemperatureSharpens) {
  SamplingParams params;
  params.temperature = 0.5f;  // p^2, renormalised
  std::map<int32_t, double> expected;
  for (size_t i = 0; i < kProbs.size(); ++i) expected[i] = kProbs[i] * kProbs[i];
  ExpectDistribution(Frequencies(LogitsOf(kProbs), params), expected);
}

TEST(SamplerTest, GreedyTakesArgmaxWithLowestIdOnTies) {
  SamplingParams params;
  params.temperature = 0.0f;
  SequenceStep step;
  step.sampling = &params;
  std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f};
  EXPECT_EQ(SampleFromLogits(logits, step).token_id, 1);
  params.logit_bias = {{3, 0.5f}};
  EXPECT_EQ(SampleFromLogits(logits, step).token_id, 3);
}

TEST(SamplerTest, LogitBiasShiftsTheDistribution) {
  SamplingParams params;
  params.logit_bias = {{0, static_cast<float>(std::log(8.0))}, {1, -100.0f}};
  // token 0 becomes 0.05 * 8 = 0.4; token 1 vanishes.
  ExpectDistribution(Frequencies(LogitsOf(kProbs), params),
                     {{0, .4}, {2, .25}, {3, .15}, {4, .1}, {5, .03}, {6, .02}});
}

TEST(SamplerTest, RepetitionPenaltyDividesPositiveAndMultipliesNegative) {
  SamplingParams params;
  params.temperature = 0.0f;
  params.repetition_penalty = 2.0f;
  SequenceStep step;
  step.sampling = &params;
  std::vector<int32_t> prompt = {0};
  step.prompt_token_ids = prompt;
  std::vector<float> logits = {3.0f, 2.0f};  // 3 / 2 = 1.5 < 2
  EXPECT_EQ(SampleFromLogits(logits, step).token_id, 1);
  logits = {-1.0f, -1.5f};  // -1 * 2 = -2 < -1.5
  EXPECT_EQ(SampleFromLogits(logits, step).token_id, 1);
}

TEST(SamplerTest, FrequencyAndPresencePenaltiesUseOutputCounts) {
  SamplingParams params;
  params.frequency_penalty = 0.5f;
  params.presence_penalty = static_cast<float>(std::log(2.0)) - 1.0f;
  // token 1 appears twice in the output: logit drops by 2 * 0.5 + (ln 2 - 1) = ln 2, p halves.
  // Prompt tokens do not count.
  std::vector<double> probs = {0.25, 0.5, 0.25};
  ExpectDistribution(Frequencies(LogitsOf(probs), params, {2, 2, 2}, {1, 1}),
                     {{0, .25}, {1, .25}, {2, .25}});
}

TEST(SamplerTest, MinTokensMasksSuppressedIds) {
  SamplingParams params;
  params.temperature = 0.0f;
  params.min_tokens = 2;
  params.min_tokens_suppressed_ids = {0};
  SequenceStep step;
  step.sampling = &params;
  std::vector<float> logits = {5.0f, 1.0f};
  std::vector<int32_t> output = {1};
  step.output_token_ids = output;
  EXPECT_EQ(SampleFromLogits(logits, step).token_id, 1);
  output = {1, 1};
  step.output_token_ids = output;
  EXPECT_EQ(SampleFromLogits(logits, step).token_id, 0);
}

TEST(SamplerTest, SameSeedAndIndexGiveSameToken) {
  SamplingParams params;
  params.seed = 99;
  SequenceStep a, b;
  a.sampling = b.sampling = &params;
  a.sequence_id = 1;
  b.sequence_id = 2;  // another slot, another sequence: the seed alone decides
  std::vector<float> logits(1000, 0.0f);
  int differing = 0;
  for (int i = 0; i < 200; ++i) {
    a.sample_index = b.sample_index = i;
    EXPECT_EQ(SampleFromLogits(logits, a).token_id, SampleFromLogits(logits, b).token_id);
    b.sample_index = i + 1;
    differing += SampleFromLogits(logits, a).token_id != SampleFromLogits(logits, b).token_id;
  }
  EXPECT_GT(differing, 190);
}

TEST(SamplerTest, LogprobsAreRawLogSoftmax) {
  SamplingParams params;
  params.temperature = 0.5f;
  params.logit_bias = {{2, 50.0f}};  // forces token 2; logprobs must ignore the bias
  params.num_logprobs = 2;
  SequenceStep step;
  step.sampling = &params;
  std::vector<double> probs = {0.5, 0.3, 0.2};
  SequenceResult result = SampleFromLogits(LogitsOf(probs), step);
  EXPECT_EQ(result.token_id, 2);
  EXPECT_EQ(result.logprobs.chosen.token_id, 2);
  EXPECT_NEAR(result.logprobs.chosen.logprob, std::log(0.2), 1e-5);
  ASSERT_EQ(result.logprobs.top.size(), 2u);
  EXPECT_EQ(result.logprobs.top[0].token_id, 0);
  EXPECT_NEAR(result.logprobs.top[0].logprob, std::log(0.5), 1e-5);
  EXPECT_EQ(result.logprobs.top[1].token_id, 1);
}

TEST(SamplerTest, AllowedTokensMaskBeforeTheFilters) {
  // Tokens 1, 3 and 4 allowed (bits 1, 3, 4): the draw renormalises over them, and top-k counts
  // only allowed tokens.
  const std::vector<uint32_t> allowed = {0b11010};
  SamplingParams params;
  ExpectDistribution(Frequencies(LogitsOf(kProbs), params, {}, {}, allowed),
                     {{1, 0.4}, {3, 0.15}, {4, 0.1}});
  params.top_k = 2;
  ExpectDistribution(Frequencies(LogitsOf(kProbs), params, {}, {}, allowed), {{1, 0.4}, {3, 0.15}});
}

TEST(SamplerTest, AllowedTokensGreedyAndLogprobs) {
  SamplingParams params;
  params.temperature = 0.0f;
  params.num_logprobs = 1;
  params.logit_bias = {{0, 100.0f}};  // a bias cannot bring back a masked token
  SequenceStep step;
  step.sampling = &params;
  const std::vector<uint32_t> allowed = {0b1100};  // tokens 2 and 3
  step.allowed_tokens = allowed;
  std::vector<double> probs = {0.5, 0.3, 0.15, 0.05};
  SequenceResult result = SampleFromLogits(LogitsOf(probs), step);
  EXPECT_EQ(result.token_id, 2);
  // Logprobs are the model's own: unmasked, so token 0 still leads the top list.
  EXPECT_NEAR(result.logprobs.chosen.logprob, std::log(0.15), 1e-5);
  ASSERT_EQ(result.logprobs.top.size(), 1u);
  EXPECT_EQ(result.logprobs.top[0].token_id, 0);
  // Ids past the mask's end are not allowed.
  std::vector<float> wide(40, 0.0f);
  wide[35] = 10.0f;
  EXPECT_EQ(SampleFromLogits(wide, step).token_id, 2);
}

}  // namespace
}  // namespace mkserve
