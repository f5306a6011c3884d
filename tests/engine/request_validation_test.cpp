#include "engine/request_validation.h"

#include <gtest/gtest.h>

namespace mkserve {
namespace {

TEST(SiblingParamsTest, SeedsEosMaskAndPromptLogprobs) {
  ModelConfig config;
  config.eos_token_ids = {1, 2};
  EngineRequest request;
  request.sampling.seed = 100;
  request.sampling.stop_token_ids = {7};
  request.sampling.num_prompt_logprobs = 3;
  SamplingParams first = SiblingParams(request, 0, 555, config);
  SamplingParams third = SiblingParams(request, 2, 555, config);
  EXPECT_EQ(first.seed, 100u);  // n = 1 keeps the client's seed
  EXPECT_EQ(third.seed, 102u);
  EXPECT_EQ(first.min_tokens_suppressed_ids, (std::vector<int32_t>{7, 1, 2}));
  EXPECT_EQ(first.num_prompt_logprobs, 3);
  EXPECT_EQ(third.num_prompt_logprobs, -1);

  request.sampling.seed.reset();
  request.sampling.ignore_eos = true;
  SamplingParams unseeded = SiblingParams(request, 1, 555, config);
  EXPECT_EQ(unseeded.seed, 555u);
  EXPECT_EQ(unseeded.min_tokens_suppressed_ids, (std::vector<int32_t>{7}));
}

TEST(ValidateRequestTest, NamesTheBadField) {
  ModelConfig config;
  config.vocab_size = 10;
  RequestLimits limits{&config, 100, true};
  EngineRequest request;
  request.prompt_token_ids = {1, 2};
  EXPECT_FALSE(ValidateRequest(request, limits).has_value());
  auto message = [&](auto mutate) {
    EngineRequest copy = request;
    mutate(copy);
    return ValidateRequest(copy, limits).value_or("");
  };
  EXPECT_NE(message([](auto& r) { r.n = 0; }).find("n must be"), std::string::npos);
  EXPECT_NE(message([](auto& r) { r.sampling.temperature = -1; }).find("temperature"),
            std::string::npos);
  EXPECT_NE(message([](auto& r) { r.sampling.min_p = 2; }).find("min_p"), std::string::npos);
  EXPECT_NE(message([](auto& r) {
              r.sampling.logit_bias = {{10, 1.0f}};
            }).find("logit_bias"),
            std::string::npos);
  EXPECT_NE(message([](auto& r) { r.sampling.min_tokens = 99; }).find("min_tokens"),
            std::string::npos);
  EXPECT_NE(message([](auto& r) { r.sampling.stop = {""}; }).find("empty"), std::string::npos);
  // A prompt that exactly fills the context is fine only for prompt-only (echo) requests.
  EXPECT_NE(message([](auto& r) { r.prompt_token_ids.assign(100, 3); }).find("context limit"),
            std::string::npos);
  EXPECT_EQ(message([](auto& r) {
              r.prompt_token_ids.assign(100, 3);
              r.sampling.max_tokens = 0;
            }),
            "");
}

}  // namespace
}  // namespace mkserve
