#include "common/thread_pool.h"

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

namespace mkserve {
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

}  // namespace
}  // namespace mkserve
