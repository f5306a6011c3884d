// AddNorm (RMSNorm and Cohere LayerNorm, with and without the fused residual adds), the
// embedding gather and the row gather against plain CPU loops.
#include <gtest/gtest.h>

#include "backends/cuda/decode/embedding.h"
#include "backends/cuda/decode/moe.h"
#include "backends/cuda/decode/norm.h"
#include "common/error.h"
#include "gpu_test_util.h"

namespace mkserve::cuda::testing {
namespace {

struct NormCase {
  NormKind kind;
  bool with_adds;
};

class AddNormTest : public ::testing::TestWithParam<NormCase> {};

TEST_P(AddNormTest, MatchesCpu) {
  const int64_t tokens = 5, hidden = 1000;  // not a multiple of the block size
  const float eps = 1e-5f;
  std::vector<float> x = RandomFloats(tokens * hidden, 1, 2.0f);
  std::vector<float> a = RandomFloats(tokens * hidden, 2), b = RandomFloats(tokens * hidden, 3);
  std::vector<float> gamma = RandomBf16Values(hidden, 4);
  for (auto& g : gamma) g = RoundBf16(1.0f + g * 0.1f);
  auto d_x = ToDevice(x);
  auto d_a = ToDevice(a), d_b = ToDevice(b);
  auto d_gamma = ToDeviceBf16(gamma);
  auto d_out = NanBf16(tokens * hidden);
  const bool adds = GetParam().with_adds;
  AddNorm(d_x.data(), adds ? d_a.data() : nullptr, adds ? d_b.data() : nullptr, d_gamma.data(),
          d_out.data(), tokens, hidden, GetParam().kind, eps, 0);
  std::vector<float> want_x(x), want_out(x.size());
  for (int64_t t = 0; t < tokens; ++t) {
    double sum = 0, squares = 0;
    for (int64_t i = 0; i < hidden; ++i) {
      float& v = want_x[t * hidden + i];
      if (adds) v += a[t * hidden + i] + b[t * hidden + i];
      sum += v;
    }
    const double mean = GetParam().kind == NormKind::kLayerNorm ? sum / hidden : 0.0;
    for (int64_t i = 0; i < hidden; ++i) squares += std::pow(want_x[t * hidden + i] - mean, 2);
    const double inv = 1.0 / std::sqrt(squares / hidden + eps);
    for (int64_t i = 0; i < hidden; ++i) {
      want_out[t * hidden + i] =
          static_cast<float>((want_x[t * hidden + i] - mean) * inv * gamma[i]);
    }
  }
  ExpectClose(ToHost(d_x), want_x, 1e-5f, 1e-5f, "residual");
  ExpectClose(ToHostFloat(d_out), want_out, 1e-3f, 8e-3f, "normed");
}

INSTANTIATE_TEST_SUITE_P(Kinds, AddNormTest,
                         ::testing::Values(NormCase{NormKind::kRmsNorm, false},
                                           NormCase{NormKind::kRmsNorm, true},
                                           NormCase{NormKind::kLayerNorm, false},
                                           NormCase{NormKind::kLayerNorm, true}));

// AddNorm folding a pending MoE combine (decode) gives bitwise what MoeCombine into a buffer
// followed by AddNorm gives, with and without an averaged shared expert.
class PendingMoeTest : public ::testing::TestWithParam<bool> {};

TEST_P(PendingMoeTest, MatchesCombineThenAddNorm) {
  const bool shared = GetParam();
  const int64_t tokens = 3, hidden = 2048, top_k = 8, assignments = tokens * top_k;
  std::vector<float> x = RandomFloats(tokens * hidden, 5), attn = RandomFloats(tokens * hidden, 6);
  std::vector<float> expert_out = RandomFloats(assignments * hidden, 7);
  std::vector<float> shared_out = RandomFloats(tokens * hidden, 8);
  std::vector<float> weights = RandomFloats(assignments, 9);
  std::vector<int32_t> slots(assignments);
  for (int64_t a = 0; a < assignments; ++a)
    slots[a] = static_cast<int32_t>((a * 7 + 3) % assignments);
  std::vector<float> gamma = RandomBf16Values(hidden, 10);
  auto d_attn = ToDevice(attn), d_expert_out = ToDevice(expert_out);
  auto d_shared = ToDevice(shared_out), d_weights = ToDevice(weights);
  auto d_slots = ToDevice(slots);
  auto d_gamma = ToDeviceBf16(gamma);
  auto d_ffn = NanFloats(tokens * hidden);
  MoeArgs args;
  args.weights = d_weights.data();
  args.shared_out = shared ? d_shared.data() : nullptr;
  args.shared_combination = SharedExpertCombination::kAverage;
  args.num_tokens = tokens;
  args.hidden = hidden;
  args.top_k = top_k;
  args.out = d_ffn.data();
  MoeWorkspace ws;
  ws.slot_of_assignment = d_slots.data();
  ws.expert_out = d_expert_out.data();
  MoeCombine(args, ws, 0);
  auto d_x_ref = ToDevice(x), d_x = ToDevice(x);
  auto d_out_ref = NanBf16(tokens * hidden), d_out = NanBf16(tokens * hidden);
  AddNorm(d_x_ref.data(), d_attn.data(), d_ffn.data(), d_gamma.data(), d_out_ref.data(), tokens,
          hidden, NormKind::kLayerNorm, 1e-5f, 0);
  const PendingMoe pending{d_expert_out.data(),
                           d_slots.data(),
                           d_weights.data(),
                           shared ? d_shared.data() : nullptr,
                           top_k,
                           shared ? 0.5f : 1.0f};
  AddNorm(d_x.data(), d_attn.data(), nullptr, d_gamma.data(), d_out.data(), tokens, hidden,
          NormKind::kLayerNorm, 1e-5f, 0, nullptr, &pending);
  const std::vector<float> residual = ToHost(d_x), residual_ref = ToHost(d_x_ref);
  EXPECT_EQ(residual, residual_ref);
  EXPECT_EQ(ToHostFloat(d_out), ToHostFloat(d_out_ref));
  EXPECT_NE(residual, x);  // the adds happened
}

INSTANTIATE_TEST_SUITE_P(Shared, PendingMoeTest, ::testing::Values(false, true));

TEST(PendingMoeShapeTest, RejectsTopKOutOfRange) {
  const PendingMoe pending{nullptr, nullptr, nullptr, nullptr, kMaxPendingTopK + 1, 1.0f};
  EXPECT_THROW(AddNorm(nullptr, nullptr, nullptr, nullptr, nullptr, 1, 8, NormKind::kRmsNorm, 1e-5f,
                       0, nullptr, &pending),
               Error);
}

TEST(EmbeddingTest, GathersRowsAsFloat) {
  const int64_t vocab = 50, hidden = 24;
  std::vector<float> table = RandomBf16Values(vocab * hidden, 5);
  std::vector<int32_t> ids = {3, 0, 49, 3, 17};
  auto d_table = ToDeviceBf16(table);
  auto d_ids = ToDevice(ids);
  auto d_out = NanFloats(static_cast<int64_t>(ids.size()) * hidden);
  EmbedTokens(d_ids.data(), d_table.data(), d_out.data(), static_cast<int64_t>(ids.size()), hidden,
              0);
  std::vector<float> want;
  for (int32_t id : ids)
    want.insert(want.end(), table.begin() + id * hidden, table.begin() + (id + 1) * hidden);
  ExpectClose(ToHost(d_out), want, 0.0f, 0.0f, "embedding");
}

TEST(GatherRowsTest, CopiesSelectedRows) {
  const int64_t rows = 9, width = 40;
  std::vector<float> src = RandomBf16Values(rows * width, 6);
  std::vector<int32_t> pick = {8, 2, 2};
  auto d_src = ToDeviceBf16(src);
  auto d_pick = ToDevice(pick);
  auto d_out = NanBf16(static_cast<int64_t>(pick.size()) * width);
  GatherRows(d_src.data(), d_pick.data(), static_cast<int64_t>(pick.size()), width, d_out.data(),
             0);
  std::vector<float> want;
  for (int32_t r : pick)
    want.insert(want.end(), src.begin() + r * width, src.begin() + (r + 1) * width);
  ExpectClose(ToHostFloat(d_out), want, 0.0f, 0.0f, "gather");
}

}  // namespace
}  // namespace mkserve::cuda::testing
