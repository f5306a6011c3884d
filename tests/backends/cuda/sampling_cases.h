// Sampling test cases shared by the GPU sampler's tests and the megakernel's kSample test: random
// logits rows of several shapes (flat, peaked, heavy ties, masked entries), requests over every
// combination of the sampling parameters, grammar masks, and the comparison of two results
// (tokens identical, logprobs within kLogprobTolerance).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/sampling_params.h"

namespace mkserve::cuda::testing {

inline constexpr float kLogprobTolerance = 1e-4f;

enum class Shape { kFlat, kPeaked, kTies, kMasked };

inline std::vector<float> MakeRow(Shape shape, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> row(vocab);
  for (float& v : row) v = normal(rng);
  std::uniform_int_distribution<int64_t> any(0, vocab - 1);
  if (shape == Shape::kPeaked) {  // a few dominant tokens over a long tail
    for (int i = 0; i < 6; ++i) row[any(rng)] = 14.0f - 1.5f * i;
  } else if (shape == Shape::kTies) {  // few distinct values, exact ties at the top
    for (float& v : row) v = std::round(v * 2.0f) / 2.0f;
    for (int i = 0; i < 5; ++i) row[any(rng)] = 9.0f;
  } else if (shape == Shape::kMasked) {  // -inf entries, as a grammar mask would leave them
    for (int64_t i = 0; i < vocab; i += 3) row[i] = -std::numeric_limits<float>::infinity();
  }
  return row;
}

// One request's data kept alive for its SequenceStep spans.
struct Case {
  SamplingParams params;
  std::vector<int32_t> prompt, output;
  std::vector<uint32_t> allowed;  // grammar mask, bit id % 32 of word id / 32
  SequenceStep step;
  std::string name;
};

// The combination number `combo` over every parameter axis (mixed radix).
inline void SetCombo(Case& c, int combo, int64_t vocab, std::mt19937& rng) {
  static const float kTemperatures[] = {0.0f, 0.7f, 1.3f};
  static const int32_t kTopKs[] = {0, 1, 40, 3000};
  static const float kTopPs[] = {1.0f, 0.9f, 0.35f};
  static const float kMinPs[] = {0.0f, 0.02f, 0.3f};
  SamplingParams& p = c.params;
  p.temperature = kTemperatures[combo % 3];
  p.top_k = kTopKs[combo / 3 % 4];
  p.top_p = kTopPs[combo / 12 % 3];
  p.min_p = kMinPs[combo / 36 % 3];
  const bool penalties = combo / 108 % 2, bias = combo / 216 % 2, logprobs = combo / 432 % 2;
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocab) - 1);
  for (int i = 0; i < 30; ++i) c.prompt.push_back(token(rng));
  for (int i = 0; i < 12; ++i) c.output.push_back(i % 3 == 0 ? c.prompt[i] : token(rng));
  if (penalties) {
    p.repetition_penalty = 1.3f;
    p.frequency_penalty = 0.4f;
    p.presence_penalty = 0.25f;
  }
  if (bias) {  // a duplicate id (applied twice, in order), an id out of range (ignored)
    p.logit_bias = {{c.output[1], 3.5f},
                    {token(rng), -100.0f},
                    {c.output[1], -0.75f},
                    {static_cast<int32_t>(vocab) + 5, 2.0f}};
    p.min_tokens = 20;  // 12 generated: still masked
    p.min_tokens_suppressed_ids = {c.output[2], token(rng), -1};
  }
  p.num_logprobs = logprobs ? (combo % 2 ? 5 : 0) : -1;
  if (combo % 5 != 0) p.seed = 1000 + combo;  // every fifth row unseeded: the sequence's stream
  c.name = "combo " + std::to_string(combo);
}

// A random allowed-token mask on `c`: about half the tokens, one in 64, or a single token.
inline void AllowRandomTokens(Case& c, int64_t vocab, std::mt19937& rng, int kind) {
  c.allowed.assign((vocab + 31) / 32, 0u);
  std::uniform_int_distribution<int64_t> any(0, vocab - 1);
  if (kind % 3 == 2) {
    const int64_t id = any(rng);
    c.allowed[id / 32] |= 1u << (id % 32);
  } else {
    const uint32_t one_in = kind % 3 == 0 ? 2 : 64;
    for (int64_t id = 0; id < vocab; ++id) {
      if (rng() % one_in == 0) c.allowed[id / 32] |= 1u << (id % 32);
    }
  }
  c.step.allowed_tokens = c.allowed;
  c.name += " allowed kind " + std::to_string(kind % 3);
}

inline void Link(Case& c, int64_t sequence_id, int64_t sample_index) {
  c.step.sequence_id = sequence_id;
  c.step.sample = true;
  c.step.sampling = &c.params;
  c.step.prompt_token_ids = c.prompt;
  c.step.output_token_ids = c.output;
  c.step.sample_index = sample_index;
}

inline void ExpectSame(const SequenceResult& got, const SequenceResult& want,
                       const std::string& where) {
  ASSERT_EQ(got.token_id, want.token_id) << where;
  EXPECT_EQ(got.logprobs.chosen.token_id, want.logprobs.chosen.token_id) << where;
  EXPECT_NEAR(got.logprobs.chosen.logprob, want.logprobs.chosen.logprob, kLogprobTolerance)
      << where;
  ASSERT_EQ(got.logprobs.top.size(), want.logprobs.top.size()) << where;
  for (size_t i = 0; i < want.logprobs.top.size(); ++i) {
    EXPECT_EQ(got.logprobs.top[i].token_id, want.logprobs.top[i].token_id) << where << " #" << i;
    EXPECT_NEAR(got.logprobs.top[i].logprob, want.logprobs.top[i].logprob, kLogprobTolerance)
        << where << " #" << i;
  }
}

}  // namespace mkserve::cuda::testing
