// MaskWorkers: the engine's threads for the allowed-token masks of constrained sequences. Start
// hands one step's masks to a coordinating thread and returns at once, so they are computed
// while the backend runs the step's forward pass; the coordinator spreads them over a small
// ThreadPool. The threads live as long as the engine instead of starting every step.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <future>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "common/thread_pool.h"
#include "grammar/grammar_matcher.h"

namespace mkserve {

class MaskWorkers {
 public:
  struct Job {
    const grammar::GrammarMatcher* matcher;
    std::span<const int32_t> end_token_ids;  // the tokens that may end the output where it can
    std::span<uint32_t> mask;                // grammar::MaskWords words
  };

  explicit MaskWorkers(int num_threads);
  ~MaskWorkers();
  MaskWorkers(const MaskWorkers&) = delete;
  MaskWorkers& operator=(const MaskWorkers&) = delete;

  // Fills every job's mask; the future is ready when all are (it holds the first error). The
  // previous batch must be done: the engine waits for each step's masks before the next step.
  std::shared_future<void> Start(std::vector<Job> jobs);

 private:
  struct Batch {
    std::vector<Job> jobs;
    std::promise<void> done;
  };
  void Loop();

  ThreadPool pool_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::optional<Batch> batch_;  // posted by Start, taken by the coordinator
  bool stopping_ = false;
  std::thread coordinator_;  // last: started once the rest is built
};

}  // namespace mkserve
