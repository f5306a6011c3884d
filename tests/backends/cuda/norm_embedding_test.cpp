// AddNorm (RMSNorm and Cohere LayerNorm, with and without the fused residual adds), the
// embedding gather and the row gather against plain CPU loops.
#include <gtest/gtest.h>

#include "backends/cuda/embedding.h"
#include "backends/cuda/norm.h"
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
