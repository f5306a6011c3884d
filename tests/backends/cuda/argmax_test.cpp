// Greedy argmax on the GPU: the largest logit, the LOWEST id among equal maxima (the CPU
// sampler's rule), at full vocabulary size.
#include <gtest/gtest.h>

#include "backends/cuda/decode/argmax.h"
#include "gpu_test_util.h"

namespace mkserve::cuda::testing {
namespace {

TEST(ArgmaxTest, LargestLogitLowestIdOnTies) {
  const int64_t vocab = 262144, rows = 4;
  std::vector<float> logits = RandomFloats(rows * vocab, 71);
  logits[0 * vocab + 262143] = 50.0f;                              // last id
  logits[1 * vocab + 1000] = logits[1 * vocab + 7] = 50.0f;        // tie: 7 wins
  logits[2 * vocab + 99999] = logits[2 * vocab + 200000] = 50.0f;  // tie across threads
  logits[3 * vocab + 0] = 50.0f;                                   // first id
  auto d_logits = ToDevice(logits);
  auto d_ids = ToDevice(std::vector<int32_t>(rows, -1));
  ArgmaxRows(d_logits.data(), rows, vocab, d_ids.data(), 0);
  EXPECT_EQ(ToHost(d_ids), (std::vector<int32_t>{262143, 7, 99999, 0}));
}

TEST(ArgmaxTest, MatchesCpuOnRandomRows) {
  const int64_t vocab = 5000, rows = 9;
  std::vector<float> logits = RandomFloats(rows * vocab, 72);
  auto d_logits = ToDevice(logits);
  auto d_ids = ToDevice(std::vector<int32_t>(rows, -1));
  ArgmaxRows(d_logits.data(), rows, vocab, d_ids.data(), 0);
  std::vector<int32_t> got = ToHost(d_ids);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = &logits[r * vocab];
    EXPECT_EQ(got[r], std::max_element(row, row + vocab) - row) << "row " << r;
  }
}

}  // namespace
}  // namespace mkserve::cuda::testing
