// Host only: the routing comparison of the full-width and megakernel tests excuses a flip that
// rounding noise explains, and refuses one that a wrong logit or a wrong row explains.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "backend_test_util.h"

namespace mkserve::cuda::testing {
namespace {

constexpr int64_t kExperts = 128, kTopK = 2;

// One MoE layer, one row: experts 0 and 1 lead, expert 2 trails expert 1 by `gap_in_bounds`
// near-tie bounds; the rest sit below. We pick {0, 2}, inverting that gap.
struct FlippedRow {
  ReferenceRouting ref;
  std::vector<int32_t> ours = {0, 2};
  double bound = 0;

  explicit FlippedRow(double gap_in_bounds) {
    ref.num_moe_layers = 1;
    ref.num_rows = 1;
    ref.top_k = kTopK;
    ref.num_experts = kExperts;
    ref.expert_ids = {0, 1};
    for (int64_t e = 0; e < kExperts; ++e) ref.router_logits.push_back(0.9f * std::sin(1.3 * e));
    ref.router_logits[0] = 2.0f;
    ref.router_logits[1] = 1.5f;
    double sum_sq = 0;
    for (float v : ref.router_logits) sum_sq += static_cast<double>(v) * v;
    bound = kNearTieEpsilons * kBf16Epsilon * std::sqrt(sum_sq / kExperts);
    ref.router_logits[2] = static_cast<float>(1.5 - gap_in_bounds * bound);
  }

  // Our logits: the reference's plus `noise` (one value per expert).
  std::vector<float> Ours(const std::vector<double>& noise) const {
    std::vector<float> ours = ref.router_logits;
    for (int64_t e = 0; e < kExperts; ++e) ours[e] += static_cast<float>(noise[e]);
    return ours;
  }
};

// Alternating +-`level`, with expert 1 (the one we dropped) `largest` low.
std::vector<double> Noise(double level, double largest) {
  std::vector<double> noise;
  for (int64_t e = 0; e < kExperts; ++e) noise.push_back(e % 2 == 0 ? level : -level);
  noise[1] = -largest;
  return noise;
}

size_t Problems(const FlippedRow& row, const std::vector<double>& noise) {
  return CompareRouting(row.ref, row.ours, row.Ours(noise), 1, /*roots_only=*/true).problems.size();
}

TEST(CompareRoutingTest, ExcusesANearTieAndRefusesAWideGapWithoutError) {
  EXPECT_EQ(Problems(FlippedRow(0.5), Noise(0, 0)), 0u);
  EXPECT_EQ(Problems(FlippedRow(1.25), Noise(0, 0)), 1u);
}

TEST(CompareRoutingTest, ExcusesAFlipThatNoiseLikeErrorExplains) {
  // The H100 case: row RMS about half the bound, largest 1.4 bounds, gap 1.25 bounds.
  const FlippedRow row(1.25);
  EXPECT_EQ(Problems(row, Noise(0.4 * row.bound, 1.4 * row.bound)), 0u);
  // The same error cannot excuse a gap more than twice its largest.
  EXPECT_EQ(Problems(FlippedRow(3.0), Noise(0.4 * row.bound, 1.4 * row.bound)), 1u);
}

TEST(CompareRoutingTest, RefusesAFlipThatOneWrongLogitOrAWrongRowExplains) {
  const FlippedRow row(1.25);
  // One logit off by 10 bounds, the rest exact: RMS under the bound, but not noise.
  EXPECT_EQ(Problems(row, Noise(0, 10 * row.bound)), 1u);
  // Every logit off by 1.5 bounds: a row's RMS beyond the bound.
  EXPECT_EQ(Problems(row, Noise(1.5 * row.bound, 1.5 * row.bound)), 1u);
}

}  // namespace
}  // namespace mkserve::cuda::testing
