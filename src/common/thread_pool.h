// ThreadPool: a fixed set of workers that split independent index ranges (the CPU reference's
// output rows and attention heads, the engine's grammar masks). Pieces never interact, so every
// result is the same whatever the thread count.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace mkserve {

class ThreadPool {
 public:
  using RangeFn = std::function<void(int64_t begin, int64_t end)>;

  // num_threads counts the calling thread; 0 means the hardware concurrency, 1 runs inline.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn on disjoint ranges that cover [0, n) and returns when all are done. Ranges smaller
  // than min_grain items are not split further (thread hand-off costs more than tiny work).
  // An exception thrown by fn is rethrown here. Not re-entrant: fn must not call ParallelFor.
  void ParallelFor(int64_t n, int64_t min_grain, const RangeFn& fn);

 private:
  void WorkerLoop(int worker_index);
  void RunShare(int share, int num_shares, int64_t n, const RangeFn& fn);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  const RangeFn* task_ = nullptr;
  int64_t task_size_ = 0;
  int task_shares_ = 0;
  uint64_t generation_ = 0;
  int pending_workers_ = 0;
  std::exception_ptr error_;
  bool stopping_ = false;
};

}  // namespace mkserve
