// StepWatchdog: declares the backend wedged when one step runs past its deadline.
//
// The engine thread brackets every Backend::Step with StepStarted / StepFinished; a thread of the
// watchdog's own checks the deadline, because the engine thread may never come back from a stuck
// device. The first step gets its own, longer timeout (CUDA graph capture, lazy initialisation).
// On a timeout `on_timeout` runs once, on the watchdog's thread, and the watchdog stops watching.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace mkserve {

class StepWatchdog {
 public:
  using Clock = std::chrono::steady_clock;

  // Throws mkserve::Error unless both timeouts are positive.
  StepWatchdog(std::chrono::milliseconds first_step_timeout, std::chrono::milliseconds step_timeout,
               std::function<void(const std::string& message)> on_timeout);
  ~StepWatchdog();
  StepWatchdog(const StepWatchdog&) = delete;
  StepWatchdog& operator=(const StepWatchdog&) = delete;

  void StepStarted();
  void StepFinished();

 private:
  void Watch();

  std::chrono::milliseconds first_step_timeout_;
  std::chrono::milliseconds step_timeout_;
  std::function<void(const std::string&)> on_timeout_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::optional<Clock::time_point> deadline_;  // set while a step runs
  std::chrono::milliseconds running_timeout_{0};
  bool first_step_ = true;
  // What the watcher waits until (none: for a step to start); StepStarted notifies it only when
  // its deadline comes earlier.
  std::optional<Clock::time_point> watching_until_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace mkserve
