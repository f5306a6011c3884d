#include "megakernel/device/step_watchdog.h"

#include <string>
#include <thread>
#include <vector>

#include "backends/cuda/core/cuda_check.h"
#include "engine/backend_error.h"

namespace mkserve::megakernel {
namespace {

constexpr auto kAbortGrace = std::chrono::seconds(5);
constexpr auto kSpinFor = std::chrono::milliseconds(100);
constexpr auto kPollInterval = std::chrono::microseconds(20);
constexpr int kCountersReported = 8;

// True when `done` completed before `until`. The first kSpinFor (longer than any healthy step)
// polls without sleeping, as cudaStreamSynchronize spins for the layered path: a sleeping poll
// wakes 50-80 us late (the kernel's timer slack), 2-3 % of a batch-1 step. A step still running
// after that is likely wedged, and the wait polls with sleeps until the deadline.
bool CompletesBy(cudaEvent_t done, std::chrono::steady_clock::time_point until) {
  const auto spin_until = std::chrono::steady_clock::now() + kSpinFor;
  for (;;) {
    const cudaError_t status = cudaEventQuery(done);
    if (status == cudaSuccess) return true;
    if (status != cudaErrorNotReady) MKSERVE_CUDA_CHECK(status);
    const auto now = std::chrono::steady_clock::now();
    if (now > until) return false;
    if (now < spin_until) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(kPollInterval);
    }
  }
}

}  // namespace

StepWatchdog::StepWatchdog() {
  *flag_.host() = 0;
  MKSERVE_CUDA_CHECK(cudaStreamCreateWithFlags(&diagnostics_, cudaStreamNonBlocking));
}

StepWatchdog::~StepWatchdog() {
  if (diagnostics_ != nullptr) cudaStreamDestroy(diagnostics_);
}

void StepWatchdog::Arm() { *static_cast<volatile uint32_t*>(flag_.host()) = 0; }

void StepWatchdog::Wait(cudaEvent_t done, std::chrono::milliseconds timeout,
                        const uint32_t* counters, std::span<const CounterInfo> infos,
                        const std::string& step) const {
  if (CompletesBy(done, std::chrono::steady_clock::now() + timeout)) return;
  *static_cast<volatile uint32_t*>(flag_.host()) = 1;
  std::string report;
  if (CompletesBy(done, std::chrono::steady_clock::now() + kAbortGrace)) {
    std::vector<uint32_t> values(infos.size());
    MKSERVE_CUDA_CHECK(cudaMemcpyAsync(values.data(), counters, values.size() * sizeof(uint32_t),
                                       cudaMemcpyDeviceToHost, diagnostics_));
    MKSERVE_CUDA_CHECK(cudaStreamSynchronize(diagnostics_));
    int short_counters = 0;
    for (size_t i = 0; i < infos.size(); ++i) {
      const CounterInfo& c = infos[i];
      if (values[i] >= c.expected_arrivals || (c.fed_by_claims && values[i] == 0)) continue;
      if (short_counters++ < kCountersReported) {
        report += "\n  counter " + std::to_string(i) + " (" + std::string(WaveName(c.producer)) +
                  " of layer " + std::to_string(c.layer) + ", unit " + std::to_string(c.unit) +
                  "): " + std::to_string(values[i]) + " of " + std::to_string(c.expected_arrivals);
      }
    }
    report = std::to_string(short_counters) + " counters short of their arrivals" + report;
  } else {
    report = "the kernel did not stop after the abort flag; restart the process";
  }
  throw BackendFatalError(step + " did not finish within " + std::to_string(timeout.count()) +
                          " ms; " + report);
}

}  // namespace mkserve::megakernel
