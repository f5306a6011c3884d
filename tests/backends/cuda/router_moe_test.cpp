// Router top-k (sigmoid, renormalised sigmoid, softmax; lowest id on ties, NaN as -inf) and the MoE
// forward (bucketed per expert, SiLU*up, down, weighted combine, shared expert) against CPU loops.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "backends/cuda/core/weight_layout.h"
#include "backends/cuda/decode/moe.h"
#include "backends/cuda/decode/router.h"
#include "backends/cuda/prefill/moe_grouped.h"
#include "common/error.h"
#include "gpu_test_util.h"

namespace mkserve::cuda::testing {
namespace {

struct RouterCase {
  ExpertSelection selection;
  bool renormalize;
  int64_t experts, top_k;
};

class RouterTest : public ::testing::TestWithParam<RouterCase> {};

TEST_P(RouterTest, MatchesCpu) {
  const RouterCase c = GetParam();
  const int64_t tokens = 7;
  std::vector<float> logits = RandomFloats(tokens * c.experts, 41);
  logits[2] = logits[5] = 9.0f;  // a tie in token 0: expert 2 must come first
  // Token 1: NaNs rank as -inf (with 6 experts and top 3, one is picked, with weight 0).
  for (int64_t e = 0; e < 4; ++e) logits[c.experts + e] = std::numeric_limits<float>::quiet_NaN();
  auto ranked = [](float v) { return std::isnan(v) ? -std::numeric_limits<float>::infinity() : v; };
  auto d_logits = ToDevice(logits);
  auto d_ids = ToDevice(std::vector<int32_t>(tokens * c.top_k, -7));
  auto d_weights = NanFloats(tokens * c.top_k);
  RouterTopK({d_logits.data(), tokens, c.experts, c.top_k, c.selection, c.renormalize, d_ids.data(),
              d_weights.data()},
             0);
  std::vector<int32_t> ids = ToHost(d_ids);
  std::vector<float> weights = ToHost(d_weights);
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = &logits[t * c.experts];
    std::vector<int32_t> order(c.experts);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return ranked(row[a]) > ranked(row[b]); });
    const bool softmax = c.selection == ExpertSelection::kSoftmax;
    double picked = 0;
    std::vector<float> want(c.top_k);
    for (int64_t j = 0; j < c.top_k; ++j) {
      const double l = ranked(row[order[j]]);
      want[j] = static_cast<float>(softmax ? std::exp(l - ranked(row[order[0]]))
                                           : 1.0 / (1.0 + std::exp(-l)));
      picked += want[j];
      EXPECT_EQ(ids[t * c.top_k + j], order[j]) << "token " << t << " rank " << j;
    }
    if (c.renormalize || softmax) {  // softmax over the selected k is always normalised
      for (auto& w : want) w = static_cast<float>(w / picked);
    }
    ExpectClose(
        std::vector<float>(weights.begin() + t * c.top_k, weights.begin() + (t + 1) * c.top_k),
        want, 1e-6f, 1e-5f, "weights");
  }
}

// The router reads the fp32 normalized hidden state: rounding the input to bf16 would move these
// logits by ~1e-2, ten times the tolerance.
TEST(RouterLogitsTest, Fp32InputMatchesCpu) {
  const int64_t tokens = 11, hidden = 264, experts = 13;  // a partial token group and warp group
  const std::vector<float> x = RandomFloats(tokens * hidden, 51);
  const std::vector<float> w = RandomBf16Values(experts * hidden, 52);
  auto d_x = ToDevice(x);
  auto d_w = ToDeviceBf16(w);
  auto d_out = NanFloats(tokens * experts);
  RouterLogits(d_x.data(), tokens, hidden, d_w.data(), experts, d_out.data(), 0);
  std::vector<float> want(tokens * experts);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t e = 0; e < experts; ++e) {
      double sum = 0;
      for (int64_t i = 0; i < hidden; ++i) sum += double{x[t * hidden + i]} * w[e * hidden + i];
      want[t * experts + e] = static_cast<float>(sum);
    }
  }
  ExpectClose(ToHost(d_out), want, 1e-4f, 1e-4f, "router logits");
}

// Views of a MoE index buffer (counts, offsets, cursors, active list, slot maps).
// Bucketing invariants: counts, prefix offsets, the active list in id order, every assignment in
// its expert's slot range, the slots a permutation.
void ExpectValidBucket(const std::vector<int32_t>& ids, int64_t experts, int64_t top_k,
                       const std::vector<int32_t>& all) {
  const int64_t assignments = static_cast<int64_t>(ids.size());
  const int32_t* counts = all.data();
  const int32_t* offsets = counts + experts;
  const int32_t* active = offsets + experts + 1 + experts;
  const int32_t* token_of_slot = active + experts + 1;
  const int32_t* slot_of = token_of_slot + assignments;
  std::vector<int32_t> want_counts(experts, 0), want_active;
  for (int32_t id : ids) ++want_counts[id];
  for (int64_t e = 0; e < experts; ++e) {
    EXPECT_EQ(counts[e], want_counts[e]) << "expert " << e;
    if (want_counts[e] > 0) want_active.push_back(static_cast<int32_t>(e));
  }
  int32_t running = 0;
  for (int64_t e = 0; e <= experts; ++e) {
    EXPECT_EQ(offsets[e], running) << "offset " << e;
    if (e < experts) running += want_counts[e];
  }
  ASSERT_EQ(active[experts], static_cast<int32_t>(want_active.size()));
  EXPECT_EQ(std::vector<int32_t>(active, active + want_active.size()), want_active);
  std::vector<int32_t> seen(assignments, 0);
  for (int64_t a = 0; a < assignments; ++a) {
    const int32_t slot = slot_of[a], e = ids[a];
    ASSERT_TRUE(slot >= offsets[e] && slot < offsets[e + 1]) << "assignment " << a;
    EXPECT_EQ(token_of_slot[slot], a / top_k) << "assignment " << a;
    ++seen[slot];
  }
  EXPECT_EQ(seen, std::vector<int32_t>(assignments, 1));
}

// The fused decode router (logits + top-k in one launch, last block selects) gives bitwise what
// RouterLogits + RouterTopK give, leaves its counter at zero, and so runs right a second time;
// with a workspace its last block also buckets the ids.
TEST(RouterLogitsTopKTest, MatchesTwoKernelPathTwice) {
  const int64_t hidden = 2048, experts = 128, top_k = 8;
  for (int64_t tokens : {1, 8}) {
    const std::vector<float> x = RandomFloats(tokens * hidden, 56);
    const std::vector<float> w = RandomBf16Values(experts * hidden, 57, 0.02f);
    auto d_x = ToDevice(x);
    auto d_w = ToDeviceBf16(w);
    auto d_counter = ToDevice(std::vector<int32_t>{0});
    auto d_logits_ref = NanFloats(tokens * experts);
    auto d_ids_ref = ToDevice(std::vector<int32_t>(tokens * top_k, -7));
    auto d_weights_ref = NanFloats(tokens * top_k);
    RouterLogits(d_x.data(), tokens, hidden, d_w.data(), experts, d_logits_ref.data(), 0);
    RouterTopK({d_logits_ref.data(), tokens, experts, top_k, ExpertSelection::kSigmoid, false,
                d_ids_ref.data(), d_weights_ref.data()},
               0);
    for (int run = 0; run < 2; ++run) {
      auto d_logits = NanFloats(tokens * experts);
      auto d_ids = ToDevice(std::vector<int32_t>(tokens * top_k, -7));
      auto d_weights = NanFloats(tokens * top_k);
      const RouterArgs route{d_logits.data(),           tokens, experts,      top_k,
                             ExpertSelection::kSigmoid, false,  d_ids.data(), d_weights.data()};
      DeviceBuffer<int32_t> index(MoeIndexElements(experts, tokens * top_k));
      MKSERVE_CUDA_CHECK(cudaMemset(index.data(), 0xff, index.bytes()));
      const MoeWorkspace bucket = MoeIndexViews(index.data(), experts, tokens * top_k);
      RouterLogitsTopK(d_x.data(), hidden, d_w.data(), d_logits.data(), route, d_counter.data(), 0,
                       run == 1 ? &bucket : nullptr);  // the second run also buckets
      EXPECT_EQ(ToHost(d_logits), ToHost(d_logits_ref)) << tokens << " tokens, run " << run;
      EXPECT_EQ(ToHost(d_ids), ToHost(d_ids_ref)) << tokens << " tokens, run " << run;
      if (run == 1) ExpectValidBucket(ToHost(d_ids_ref), experts, top_k, ToHost(index));
      EXPECT_EQ(ToHost(d_weights), ToHost(d_weights_ref)) << tokens << " tokens, run " << run;
      EXPECT_EQ(ToHost(d_counter), std::vector<int32_t>{0}) << "counter left set";
    }
  }
}

TEST(RouterLogitsTopKTest, RejectsTooManyTokens) {
  const RouterArgs route{
      nullptr, kFusedRouterMaxTokens + 1, 128, 8, ExpertSelection::kSigmoid, false, nullptr,
      nullptr};
  EXPECT_THROW(RouterLogitsTopK(nullptr, 2048, nullptr, nullptr, route, nullptr, 0), Error);
}

TEST(RouterLogitsTest, RejectsBadShape) {
  EXPECT_THROW(RouterLogits(nullptr, 1, 12, nullptr, 4, nullptr, 0), Error);
}

INSTANTIATE_TEST_SUITE_P(Branches, RouterTest,
                         ::testing::Values(RouterCase{ExpertSelection::kSigmoid, false, 128, 8},
                                           RouterCase{ExpertSelection::kSigmoid, true, 8, 3},
                                           RouterCase{ExpertSelection::kSoftmax, false, 6, 3},
                                           RouterCase{ExpertSelection::kSoftmax, false, 256, 16}));

struct MoeCase {
  bool shared;
  SharedExpertCombination combination;
  int64_t tokens;        // 1 and 3: fewer assignments than experts (decode-sized grids)
  bool grouped = false;  // MoeForwardGrouped (tensor-core grouped GEMMs) instead of MoeForward
  int64_t inter = 48;    // expert width: 48 pads the panels' K (down) and features (gate/up)
};

class MoeTest : public ::testing::TestWithParam<MoeCase> {};

TEST_P(MoeTest, MatchesCpu) {
  const MoeCase c = GetParam();
  const int64_t tokens = c.tokens, hidden = 64, inter = c.inter, experts = 16, top_k = 4;
  std::vector<float> x = RandomBf16Values(tokens * hidden, 51);
  std::vector<float> gate_up = RandomBf16Values(experts * 2 * inter * hidden, 52, 0.1f);
  std::vector<float> down = RandomBf16Values(experts * hidden * inter, 53, 0.1f);
  std::vector<float> shared = RandomFloats(tokens * hidden, 54);
  std::vector<int32_t> ids(tokens * top_k);
  std::vector<float> weights = RandomFloats(tokens * top_k, 55);
  for (int64_t t = 0; t < tokens; ++t) {  // experts 0..3 popular, 12..15 never used
    for (int64_t j = 0; j < top_k; ++j)
      ids[t * top_k + j] = static_cast<int32_t>((t * 3 + j * 5) % 12);
  }
  auto d_x = ToDeviceBf16(x);
  auto d_gu = ToDeviceBf16(PackPanelsOnHost(gate_up, ExpertGateUpPanels(hidden, inter), experts));
  auto d_down = ToDeviceBf16(PackPanelsOnHost(down, ExpertDownPanels(hidden, inter), experts));
  auto d_shared = ToDevice(shared);
  auto d_ids = ToDevice(ids);
  auto d_w = ToDevice(weights);
  auto d_out = NanFloats(tokens * hidden);
  DeviceBuffer<int32_t> index(MoeIndexElements(experts, tokens * top_k));
  auto d_hidden = NanBf16(tokens * top_k * inter);
  auto d_expert_out = NanFloats(tokens * top_k * hidden);
  MoeWorkspace ws = MoeIndexViews(index.data(), experts, tokens * top_k);
  ws.hidden = d_hidden.data();
  ws.expert_out = d_expert_out.data();
  MoeArgs args{d_x.data(),    d_ids.data(),  d_w.data(),
               d_gu.data(),   d_down.data(), c.shared ? d_shared.data() : nullptr,
               c.combination, tokens,        hidden,
               inter,         experts,       top_k,
               d_out.data()};
  if (c.grouped) {
    MoeForwardGrouped(args, ws, 0);
  } else {
    MoeForward(args, ws, 0);
  }
  std::vector<float> want(tokens * hidden, 0.0f);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t j = 0; j < top_k; ++j) {
      const int64_t e = ids[t * top_k + j];
      std::vector<float> h(inter);
      for (int64_t i = 0; i < inter; ++i) {
        double g = 0, u = 0;
        for (int64_t k = 0; k < hidden; ++k) {
          g += static_cast<double>(x[t * hidden + k]) * gate_up[(e * 2 * inter + i) * hidden + k];
          u += static_cast<double>(x[t * hidden + k]) *
               gate_up[(e * 2 * inter + inter + i) * hidden + k];
        }
        h[i] = RoundBf16(static_cast<float>(g / (1.0 + std::exp(-g)) * u));
      }
      for (int64_t n = 0; n < hidden; ++n) {
        double y = 0;
        for (int64_t i = 0; i < inter; ++i)
          y += static_cast<double>(h[i]) * down[(e * hidden + n) * inter + i];
        want[t * hidden + n] += static_cast<float>(weights[t * top_k + j] * y);
      }
    }
    for (int64_t n = 0; n < hidden && c.shared; ++n) {
      want[t * hidden + n] += shared[t * hidden + n];
      if (c.combination == SharedExpertCombination::kAverage) want[t * hidden + n] *= 0.5f;
    }
  }
  ExpectClose(ToHost(d_out), want, 2e-3f, 1e-2f, "moe");
}

INSTANTIATE_TEST_SUITE_P(
    Shared, MoeTest,
    ::testing::Values(MoeCase{false, SharedExpertCombination::kAverage, 19},
                      MoeCase{true, SharedExpertCombination::kAverage, 19},
                      MoeCase{true, SharedExpertCombination::kSum, 19},
                      MoeCase{false, SharedExpertCombination::kAverage, 1},
                      MoeCase{true, SharedExpertCombination::kSum, 3},
                      MoeCase{false, SharedExpertCombination::kAverage, 19, false, 64},
                      MoeCase{false, SharedExpertCombination::kAverage, 19, true, 64},
                      MoeCase{true, SharedExpertCombination::kSum, 2, true, 96}));

// Widths the grouped GEMM does not take are refused by name (the layered forward sends them to
// the decode GEMV at every token count instead).
TEST(MoeGroupedTest, RefusesWidthsOffThe32Grid) {
  EXPECT_TRUE(MoeGroupedSupports(64, 96));
  EXPECT_FALSE(MoeGroupedSupports(64, 48));
  EXPECT_FALSE(MoeGroupedSupports(72, 64));
  MoeArgs args;
  args.num_tokens = 1;
  args.hidden = 64;
  args.intermediate = 48;
  EXPECT_THROW(MoeForwardGrouped(args, MoeWorkspace{}, 0), Error);
}

// The one-block (decode) and the multi-kernel (prefill) bucketing paths.
class MoeBucketTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(MoeBucketTest, SlotsFormExpertRanges) {
  const int64_t tokens = GetParam(), experts = 40, top_k = 6, assignments = tokens * top_k;
  std::vector<int32_t> ids(assignments);
  std::mt19937 rng(58);
  for (auto& id : ids) id = static_cast<int32_t>(rng() % 33);  // experts 33..39 unused
  auto d_ids = ToDevice(ids);
  DeviceBuffer<int32_t> index(MoeIndexElements(experts, assignments));
  MKSERVE_CUDA_CHECK(cudaMemset(index.data(), 0xff, index.bytes()));  // -1 everywhere
  MoeArgs args;
  args.expert_ids = d_ids.data();
  args.num_tokens = tokens;
  args.num_experts = experts;
  args.top_k = top_k;
  MoeBucket(args, MoeIndexViews(index.data(), experts, assignments), 0);
  ExpectValidBucket(ids, experts, top_k, ToHost(index));
}

INSTANTIATE_TEST_SUITE_P(Paths, MoeBucketTest, ::testing::Values(1, 64, 700, 1500));

TEST(SiluMulTest, MatchesCpu) {
  const int64_t tokens = 3, inter = 40;
  std::vector<float> gu = RandomFloats(tokens * 2 * inter, 61, 3.0f);
  auto d_gu = ToDevice(gu);
  auto d_out = NanBf16(tokens * inter);
  SiluMul(d_gu.data(), tokens, inter, d_out.data(), 0);
  std::vector<float> want(tokens * inter);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t i = 0; i < inter; ++i) {
      const double g = gu[t * 2 * inter + i], u = gu[t * 2 * inter + inter + i];
      want[t * inter + i] = static_cast<float>(g / (1.0 + std::exp(-g)) * u);
    }
  }
  ExpectClose(ToHostFloat(d_out), want, 1e-3f, 8e-3f, "silu_mul");
}

}  // namespace
}  // namespace mkserve::cuda::testing
