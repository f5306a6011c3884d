// ArgmaxRows on both of its row scans: float4 rows (vocab a multiple of 4) and the scalar loop
// (any other vocab), with NaN logits that must never win and ties that go to the lower id.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/cuda/decode/argmax.h"
#include "gpu_test_util.h"

namespace mkserve::cuda::testing {
namespace {

std::vector<int32_t> CpuArgmax(const std::vector<float>& logits, int64_t rows, int64_t vocab) {
  std::vector<int32_t> ids(rows);
  for (int64_t r = 0; r < rows; ++r) {
    int32_t best = -1;
    for (int64_t i = 0; i < vocab; ++i) {
      const float v = logits[r * vocab + i];
      if (!std::isnan(v) && (best < 0 || v > logits[r * vocab + best])) {
        best = static_cast<int32_t>(i);
      }
    }
    ids[r] = best;
  }
  return ids;
}

class ArgmaxVocabTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(ArgmaxVocabTest, MatchesCpuWithNanAndTies) {
  const int64_t vocab = GetParam(), rows = 5;
  std::vector<float> logits = RandomFloats(rows * vocab, 73);
  logits[0 * vocab + 5] = NAN;  // NaN next to the maximum
  logits[0 * vocab + 6] = 40.0f;
  logits[1 * vocab + vocab - 1] = logits[1 * vocab + vocab - 3] = 41.0f;  // tie near the end
  logits[2 * vocab + vocab - 1] = 42.0f;                                  // the ragged tail
  logits[3 * vocab + 0] = NAN;
  auto d_logits = ToDevice(logits);
  auto d_ids = ToDevice(std::vector<int32_t>(rows, -1));
  ArgmaxRows(d_logits.data(), rows, vocab, d_ids.data(), 0);
  EXPECT_EQ(ToHost(d_ids), CpuArgmax(logits, rows, vocab));
}

INSTANTIATE_TEST_SUITE_P(Vocabs, ArgmaxVocabTest, ::testing::Values(262144, 50001, 262147, 8));

}  // namespace
}  // namespace mkserve::cuda::testing
