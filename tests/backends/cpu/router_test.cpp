#include "backends/cpu/router.h"

#include <limits>
#include <vector>

#include <gtest/gtest.h>

namespace mkserve::cpu {
namespace {

ModelConfig RouterConfig(ExpertSelection selection, bool norm_topk_prob) {
  ModelConfig config;
  config.num_experts = 4;
  config.num_experts_per_token = 2;
  config.expert_selection = selection;
  config.norm_topk_prob = norm_topk_prob;
  return config;
}

// Logits [0.5, 2.0, -1.0, 1.0]: the top 2 are expert 1 (2.0) and expert 3 (1.0).
const std::vector<float> kLogits = {0.5f, 2.0f, -1.0f, 1.0f};

TEST(RouterTest, SigmoidWithoutRenormalisation) {
  auto choices = SelectExperts(kLogits, RouterConfig(ExpertSelection::kSigmoid, false));
  ASSERT_EQ(choices.size(), 2u);
  EXPECT_EQ(choices[0].expert_id, 1);
  EXPECT_EQ(choices[1].expert_id, 3);
  EXPECT_NEAR(choices[0].weight, 0.8807971f, 1e-6f);  // sigmoid(2)
  EXPECT_NEAR(choices[1].weight, 0.7310586f, 1e-6f);  // sigmoid(1)
}

TEST(RouterTest, SigmoidRenormalised) {
  auto choices = SelectExperts(kLogits, RouterConfig(ExpertSelection::kSigmoid, true));
  ASSERT_EQ(choices.size(), 2u);
  EXPECT_NEAR(choices[0].weight, 0.5464491f, 1e-6f);  // 0.8808 / (0.8808 + 0.7311)
  EXPECT_NEAR(choices[1].weight, 0.4535509f, 1e-6f);
}

TEST(RouterTest, SoftmaxOverTheTopKOnly) {
  // softmax([2, 1]) = [0.7311, 0.2689], not a softmax over all four logits.
  auto choices = SelectExperts(kLogits, RouterConfig(ExpertSelection::kSoftmax, false));
  ASSERT_EQ(choices.size(), 2u);
  EXPECT_EQ(choices[0].expert_id, 1);
  EXPECT_NEAR(choices[0].weight, 0.7310586f, 1e-6f);
  EXPECT_NEAR(choices[1].weight, 0.2689414f, 1e-6f);
}

TEST(RouterTest, SoftmaxIgnoresNormTopkProb) {
  auto plain = SelectExperts(kLogits, RouterConfig(ExpertSelection::kSoftmax, false));
  auto flagged = SelectExperts(kLogits, RouterConfig(ExpertSelection::kSoftmax, true));
  EXPECT_EQ(plain[0].weight, flagged[0].weight);
}

TEST(RouterTest, TiesGoToTheLowerExpertId) {
  std::vector<float> logits = {1.0f, 3.0f, 1.0f, 1.0f};
  auto choices = SelectExperts(logits, RouterConfig(ExpertSelection::kSigmoid, false));
  EXPECT_EQ(choices[0].expert_id, 1);
  EXPECT_EQ(choices[1].expert_id, 0);
}

TEST(RouterTest, NanRanksAsMinusInfinity) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  ModelConfig config = RouterConfig(ExpertSelection::kSigmoid, false);
  config.num_experts = 5;
  config.num_experts_per_token = 3;
  auto choices = SelectExperts(std::vector<float>{nan, 1.0f, nan, 2.0f, -inf}, config);
  ASSERT_EQ(choices.size(), 3u);
  EXPECT_EQ(choices[0].expert_id, 3);
  EXPECT_EQ(choices[1].expert_id, 1);
  EXPECT_EQ(choices[2].expert_id, 0);  // NaN and -inf tie: the lower id
  EXPECT_EQ(choices[2].weight, 0.0f);  // sigmoid(-inf)
}

}  // namespace
}  // namespace mkserve::cpu
