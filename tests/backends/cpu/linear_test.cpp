#include "backends/cpu/linear.h"

#include <gtest/gtest.h>

#include <vector>

#include "common/thread_pool.h"

namespace mkserve::cpu {
namespace {

TEST(LinearTest, MultipliesByTheTransposedWeight) {
  ThreadPool pool(2);
  Matrix w{{1, 2, 3, 4, 5, 6}, 2, 3};          // [out 2, in 3]
  std::vector<float> x = {1, 0, -1, 2, 1, 0};  // two tokens
  std::vector<float> y(4);
  Linear(x, 2, w, y, pool);
  EXPECT_EQ(y, (std::vector<float>{-2, -2, 4, 13}));
}

}  // namespace
}  // namespace mkserve::cpu
