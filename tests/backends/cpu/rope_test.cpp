#include "backends/cpu/rope.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

namespace mkserve::cpu {
namespace {

TEST(RopeTest, InverseFrequenciesSpanTheWholeHead) {
  Rope rope(10000.0, 4);  // inv_freq = [10000^0, 10000^(-2/4)] = [1, 0.01]
  ASSERT_EQ(rope.inv_freq().size(), 2u);
  EXPECT_FLOAT_EQ(rope.inv_freq()[0], 1.0f);
  EXPECT_FLOAT_EQ(rope.inv_freq()[1], 0.01f);
}

TEST(RopeTest, RotatesInterleavedPairs) {
  Rope rope(10000.0, 4);
  // Pair 0 = (1, 0) turns by 1 rad; pair 1 = (0, 1) turns by 0.01 rad.
  std::vector<float> head = {1.0f, 0.0f, 0.0f, 1.0f};
  rope.Apply(head, 1);
  EXPECT_NEAR(head[0], 0.5403023f, 1e-6f);   // cos 1
  EXPECT_NEAR(head[1], 0.8414710f, 1e-6f);   // sin 1
  EXPECT_NEAR(head[2], -0.0099998f, 1e-6f);  // -sin 0.01
  EXPECT_NEAR(head[3], 0.99995f, 1e-6f);     // cos 0.01
}

TEST(RopeTest, IsNotTheHalfSplitStyle) {
  // Half-split (NeoX) would pair x[0] with x[2]; interleaved pairs x[0] with x[1].
  Rope rope(10000.0, 4);
  std::vector<float> head = {1.0f, 0.0f, 0.0f, 0.0f};
  rope.Apply(head, 2);
  EXPECT_NEAR(head[0], std::cos(2.0f), 1e-6f);
  EXPECT_NEAR(head[1], std::sin(2.0f), 1e-6f);
  EXPECT_EQ(head[2], 0.0f);
  EXPECT_EQ(head[3], 0.0f);
}

TEST(RopeTest, PositionZeroIsIdentity) {
  Rope rope(50000.0, 8);
  std::vector<float> head = {0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f, 0.7f, -0.8f};
  std::vector<float> original = head;
  rope.Apply(head, 0);
  EXPECT_EQ(head, original);
}

TEST(RopeTest, DotProductDependsOnlyOnRelativePosition) {
  Rope rope(50000.0, 8);
  std::vector<float> q = {0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f, 0.7f, -0.8f};
  std::vector<float> k = {0.9f, 0.2f, -0.4f, 0.1f, 0.5f, 0.3f, -0.7f, 0.2f};
  auto rotated_dot = [&](int64_t q_position, int64_t k_position) {
    std::vector<float> a = q, b = k;
    rope.Apply(a, q_position);
    rope.Apply(b, k_position);
    float dot = 0.0f;
    for (size_t i = 0; i < a.size(); ++i) dot += a[i] * b[i];
    return dot;
  };
  EXPECT_NEAR(rotated_dot(5, 2), rotated_dot(103, 100), 1e-5f);
  EXPECT_GT(std::abs(rotated_dot(5, 2) - rotated_dot(5, 4)), 1e-3f);
}

TEST(RopeTest, ApplyHeadsRotatesEveryHead) {
  Rope rope(10000.0, 4);
  std::vector<float> heads = {1.0f, 0.0f, 0.0f, 0.0f, 1.0f, 0.0f, 0.0f, 0.0f};
  rope.ApplyHeads(heads, 2, 1);
  EXPECT_NEAR(heads[1], 0.8414710f, 1e-6f);
  EXPECT_NEAR(heads[5], 0.8414710f, 1e-6f);
}

}  // namespace
}  // namespace mkserve::cpu
