#include "backends/cpu/thread_pool.h"

#include <atomic>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "backends/cpu/linear.h"

namespace mkserve::cpu {
namespace {

TEST(ThreadPoolTest, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 7, 100}) {
      std::vector<std::atomic<int>> hits(n);
      pool.ParallelFor(n, 1, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) hits[i]++;
      });
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << threads << " " << n;
    }
  }
}

TEST(ThreadPoolTest, RethrowsAWorkerException) {
  ThreadPool pool(3);
  EXPECT_THROW(pool.ParallelFor(30, 1,
                                [](int64_t begin, int64_t) {
                                  if (begin > 0) throw std::runtime_error("worker failed");
                                }),
               std::runtime_error);
  int64_t covered = 0;  // the pool still works afterwards
  pool.ParallelFor(4, 1, [&](int64_t begin, int64_t end) {
    static std::mutex mutex;
    std::lock_guard<std::mutex> lock(mutex);
    covered += end - begin;
  });
  EXPECT_EQ(covered, 4);
}

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
