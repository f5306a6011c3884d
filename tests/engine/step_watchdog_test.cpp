// StepWatchdog on its own: a step past its deadline fires once, with the timeout in the message;
// steps that end in time never do; and a step with a shorter deadline than the one the watcher
// is waiting for (the first step's longer timeout) is caught at its own deadline, not at the
// earlier step's.
#include "engine/step_watchdog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace mkserve {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

struct Fired {
  std::mutex mutex;
  std::string message;
  Clock::time_point when{};
  std::atomic<int> count{0};
  std::function<void(const std::string&)> Callback() {
    return [this](const std::string& m) {
      std::lock_guard lock(mutex);
      message = m;
      when = Clock::now();
      ++count;
    };
  }
};

bool WaitFor(const Fired& fired, milliseconds limit) {
  const auto until = Clock::now() + limit;
  while (fired.count == 0 && Clock::now() < until) std::this_thread::sleep_for(milliseconds(2));
  return fired.count > 0;
}

TEST(StepWatchdogTest, StepsThatEndInTimeNeverFire) {
  Fired fired;
  StepWatchdog watchdog(milliseconds(1000), milliseconds(500), fired.Callback());
  for (int i = 0; i < 200; ++i) {
    watchdog.StepStarted();
    std::this_thread::sleep_for(std::chrono::microseconds(500));
    watchdog.StepFinished();
  }
  std::this_thread::sleep_for(milliseconds(1200));  // past every deadline the watcher took up
  EXPECT_EQ(fired.count, 0);
}

TEST(StepWatchdogTest, AShorterDeadlineAfterTheFirstStepIsCaughtAtItsOwnTime) {
  Fired fired;
  StepWatchdog watchdog(milliseconds(20000), milliseconds(100), fired.Callback());
  watchdog.StepStarted();  // the first step: the watcher waits until 20 s from now
  std::this_thread::sleep_for(milliseconds(50));  // it has taken up that deadline
  watchdog.StepFinished();
  const auto started = Clock::now();
  watchdog.StepStarted();  // never finishes
  ASSERT_TRUE(WaitFor(fired, milliseconds(10000))) << "not caught before the first step's deadline";
  std::lock_guard lock(fired.mutex);
  EXPECT_LT(fired.when - started, milliseconds(5000));
  EXPECT_GE(fired.when - started, milliseconds(100));
  EXPECT_NE(fired.message.find("within 0.1 s"), std::string::npos) << fired.message;
}

TEST(StepWatchdogTest, AHangAfterManyQuickStepsIsCaughtAtItsDeadline) {
  Fired fired;
  StepWatchdog watchdog(milliseconds(100), milliseconds(100), fired.Callback());
  for (int i = 0; i < 100; ++i) {  // each a later deadline than the one the watcher waits for
    watchdog.StepStarted();
    watchdog.StepFinished();
  }
  const auto started = Clock::now();
  watchdog.StepStarted();
  ASSERT_TRUE(WaitFor(fired, milliseconds(5000)));
  std::lock_guard lock(fired.mutex);
  EXPECT_GE(fired.when - started, milliseconds(100));
  EXPECT_EQ(fired.count, 1);
}

}  // namespace
}  // namespace mkserve
