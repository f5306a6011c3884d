#include "backends/cpu/norm.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

namespace mkserve::cpu {
namespace {

TEST(NormTest, RmsNormMatchesHandComputedValues) {
  // mean(x^2) = (9 + 16) / 4 = 6.25, rms = 2.5.
  std::vector<float> x = {3.0f, 4.0f, 0.0f, 0.0f};
  std::vector<float> weight = {1.0f, 0.5f, 2.0f, 1.0f};
  std::vector<float> out(4);
  RmsNorm(x, weight, 0.0f, out);
  EXPECT_FLOAT_EQ(out[0], 1.2f);
  EXPECT_FLOAT_EQ(out[1], 0.8f);
  EXPECT_FLOAT_EQ(out[2], 0.0f);
  EXPECT_FLOAT_EQ(out[3], 0.0f);
}

TEST(NormTest, RmsNormEpsilonEntersUnderTheRoot) {
  // mean(x^2) = 0.75, plus eps 0.25 = 1: the output equals the input.
  std::vector<float> x = {1.0f, 1.0f, 1.0f, 0.0f};
  std::vector<float> weight(4, 1.0f);
  std::vector<float> out(4);
  RmsNorm(x, weight, 0.25f, out);
  EXPECT_FLOAT_EQ(out[0], 1.0f);
  EXPECT_FLOAT_EQ(out[3], 0.0f);
}

TEST(NormTest, LayerNormIsMeanCentredWithoutBias) {
  // mean 2, deviations [-1, -1, 1, 1], variance 1.
  std::vector<float> x = {1.0f, 1.0f, 3.0f, 3.0f};
  std::vector<float> weight = {1.0f, 2.0f, 3.0f, 0.5f};
  std::vector<float> out(4);
  LayerNorm(x, weight, 0.0f, out);
  EXPECT_FLOAT_EQ(out[0], -1.0f);
  EXPECT_FLOAT_EQ(out[1], -2.0f);
  EXPECT_FLOAT_EQ(out[2], 3.0f);
  EXPECT_FLOAT_EQ(out[3], 0.5f);
}

TEST(NormTest, LayerNormIgnoresAShiftAndRmsNormDoesNot) {
  std::vector<float> x = {0.3f, -1.2f, 2.5f, 0.7f};
  std::vector<float> shifted = x;
  for (float& value : shifted) value += 10.0f;
  std::vector<float> weight(4, 1.0f);
  std::vector<float> a(4), b(4), c(4), d(4);
  LayerNorm(x, weight, 1e-5f, a);
  LayerNorm(shifted, weight, 1e-5f, b);
  RmsNorm(x, weight, 1e-6f, c);
  RmsNorm(shifted, weight, 1e-6f, d);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(a[i], b[i], 1e-5f);
  EXPECT_GT(std::abs(c[1] - d[1]), 0.1f);
}

TEST(NormTest, NormRowsNormalisesEachRowOnItsOwn) {
  std::vector<float> x = {3.0f, 4.0f, 0.0f, 0.0f, 1.0f, 1.0f, 3.0f, 3.0f};
  std::vector<float> weight(4, 1.0f);
  std::vector<float> out(8);
  NormRows(NormKind::kRmsNorm, x, 2, weight, 0.0f, out);
  EXPECT_FLOAT_EQ(out[0], 1.2f);
  EXPECT_FLOAT_EQ(out[4], 1.0f / std::sqrt(5.0f));  // mean(x^2) of row 2 = 20 / 4
  NormRows(NormKind::kLayerNorm, x, 2, weight, 0.0f, out);
  EXPECT_FLOAT_EQ(out[4], -1.0f);
}

}  // namespace
}  // namespace mkserve::cpu
