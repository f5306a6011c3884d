#include "common/thread_pool.h"

#include <algorithm>

namespace mkserve {

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::thread::hardware_concurrency());
  num_threads = std::max(num_threads, 1);
  for (int i = 0; i + 1 < num_threads; ++i) {
    workers_.emplace_back([this, i] { WorkerLoop(i); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

// Share s of num_shares covers [n * s / num_shares, n * (s + 1) / num_shares).
void ThreadPool::RunShare(int share, int num_shares, int64_t n, const RangeFn& fn) {
  int64_t begin = n * share / num_shares;
  int64_t end = n * (share + 1) / num_shares;
  if (begin < end) fn(begin, end);
}

void ThreadPool::ParallelFor(int64_t n, int64_t min_grain, const RangeFn& fn) {
  if (n <= 0) return;
  int64_t max_shares = std::max<int64_t>(1, n / std::max<int64_t>(min_grain, 1));
  int num_shares = static_cast<int>(std::min<int64_t>(num_threads(), max_shares));
  if (num_shares == 1) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    task_ = &fn;
    task_size_ = n;
    task_shares_ = num_shares;
    pending_workers_ = static_cast<int>(workers_.size());
    error_ = nullptr;
    ++generation_;
  }
  work_ready_.notify_all();
  std::exception_ptr caller_error;
  try {
    RunShare(0, num_shares, n, fn);
  } catch (...) {
    caller_error = std::current_exception();
  }
  std::unique_lock<std::mutex> lock(mutex_);
  work_done_.wait(lock, [this] { return pending_workers_ == 0; });
  task_ = nullptr;
  if (caller_error) std::rethrow_exception(caller_error);
  if (error_) std::rethrow_exception(error_);
}

void ThreadPool::WorkerLoop(int worker_index) {
  uint64_t seen_generation = 0;
  while (true) {
    std::unique_lock<std::mutex> lock(mutex_);
    work_ready_.wait(lock, [&] { return stopping_ || generation_ != seen_generation; });
    if (stopping_) return;
    seen_generation = generation_;
    const RangeFn* task = task_;
    int64_t size = task_size_;
    int shares = task_shares_;
    lock.unlock();
    // Worker i takes share i + 1; workers beyond the share count just report back.
    if (worker_index + 1 < shares) {
      try {
        RunShare(worker_index + 1, shares, size, *task);
      } catch (...) {
        std::lock_guard<std::mutex> error_lock(mutex_);
        if (!error_) error_ = std::current_exception();
      }
    }
    lock.lock();
    if (--pending_workers_ == 0) work_done_.notify_one();
  }
}

}  // namespace mkserve
