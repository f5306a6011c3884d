// The tensor-core router logits (fp32 x split into three bf16 terms) against a double-precision
// CPU loop and against RouterLogits, within fp32 accumulation error: a single bf16 term would
// be off by ~2^-9 relative and fail.
#include "backends/cuda/prefill/router_prefill.h"

#include <gtest/gtest.h>

#include <cmath>

#include "backends/cuda/decode/router.h"
#include "common/error.h"
#include "gpu_test_util.h"

namespace mkserve::cuda::testing {
namespace {

void CheckShape(int64_t m, int64_t k, int64_t n) {
  std::vector<float> x = RandomFloats(m * k, 91);        // full fp32 values, not bf16-rounded
  for (int64_t i = 0; i < m * k; i += 7) x[i] *= 37.0f;  // mixed magnitudes
  const std::vector<float> w = RandomBf16Values(n * k, 92, 0.05f);
  auto d_x = ToDevice(x);
  auto d_w = ToDeviceBf16(w);
  auto d_out = NanFloats(m * n);
  auto d_plain = NanFloats(m * n);
  RouterLogitsPrefill(d_x.data(), m, k, d_w.data(), n, d_out.data(), 0);
  RouterLogits(d_x.data(), m, k, d_w.data(), n, d_plain.data(), 0);
  const std::vector<float> got = ToHost(d_out), plain = ToHost(d_plain);
  int64_t bad = 0;
  for (int64_t t = 0; t < m; ++t) {
    for (int64_t e = 0; e < n; ++e) {
      double sum = 0, magnitude = 0;
      for (int64_t i = 0; i < k; ++i) {
        sum += double{x[t * k + i]} * w[e * k + i];
        magnitude += std::fabs(double{x[t * k + i]} * w[e * k + i]);
      }
      const double tolerance = 1e-5 * magnitude + 1e-7;  // fp32 sums of k exact products
      const size_t i = t * n + e;
      const bool ok =
          std::fabs(got[i] - sum) <= tolerance && std::fabs(got[i] - plain[i]) <= 2 * tolerance;
      if (!ok && bad++ < 5) {
        ADD_FAILURE() << "logit[" << t << "][" << e << "]: got " << got[i] << ", RouterLogits "
                      << plain[i] << ", want " << sum << " +- " << tolerance;
      }
    }
  }
  EXPECT_EQ(bad, 0) << bad << " of " << m * n << " logits off";
}

TEST(RouterPrefillTest, PartialTiles) { CheckShape(200, 96, 136); }

TEST(RouterPrefillTest, NorthShape) { CheckShape(300, 2048, 128); }

TEST(RouterPrefillTest, RejectsUnsupportedShapes) {
  EXPECT_FALSE(RouterLogitsPrefillSupports(48, 128));
  EXPECT_THROW(RouterLogitsPrefill(nullptr, 4, 48, nullptr, 128, nullptr, 0), Error);
}

}  // namespace
}  // namespace mkserve::cuda::testing
