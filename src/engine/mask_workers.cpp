#include "engine/mask_workers.h"

#include <exception>
#include <utility>

#include "common/error.h"

namespace mkserve {

MaskWorkers::MaskWorkers(int num_threads) : pool_(num_threads), coordinator_([this] { Loop(); }) {}

MaskWorkers::~MaskWorkers() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  coordinator_.join();
}

std::shared_future<void> MaskWorkers::Start(std::vector<Job> jobs) {
  Batch batch{std::move(jobs), {}};
  std::shared_future<void> done = batch.done.get_future().share();
  {
    std::lock_guard lock(mutex_);
    if (batch_) throw Error("MaskWorkers::Start while the previous batch waits (bug)");
    batch_ = std::move(batch);
  }
  wake_.notify_one();
  return done;
}

void MaskWorkers::Loop() {
  while (true) {
    std::optional<Batch> batch;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || batch_.has_value(); });
      if (!batch_) return;  // stopping, nothing posted
      batch.swap(batch_);
    }
    try {
      const std::vector<Job>& jobs = batch->jobs;
      pool_.ParallelFor(static_cast<int64_t>(jobs.size()), 1, [&jobs](int64_t begin, int64_t end) {
        for (int64_t j = begin; j < end; ++j) {
          jobs[j].matcher->FillMask(jobs[j].end_token_ids, jobs[j].mask);
        }
      });
      batch->done.set_value();
    } catch (...) {
      batch->done.set_exception(std::current_exception());
    }
  }
}

}  // namespace mkserve
