// StepWatchdog: waits for a launched megakernel step with a deadline instead of blocking forever.
// A step still running at the deadline is abandoned: the host raises a flag in mapped memory that
// every spinning wait of the kernel polls, the kernel ends, and the counters that fell short of
// their expected arrivals are reported in a BackendFatalError.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <span>
#include <string>

#include "backends/cuda/core/host_mapped_buffer.h"
#include "megakernel/schedule/schedule.h"

namespace mkserve::megakernel {

class StepWatchdog {
 public:
  StepWatchdog();
  ~StepWatchdog();
  StepWatchdog(const StepWatchdog&) = delete;
  StepWatchdog& operator=(const StepWatchdog&) = delete;

  // The flag for StepParams::abort_flag.
  const volatile uint32_t* device_flag() const { return flag_.device(); }

  // Lowers the flag; call before launching the step.
  void Arm();

  // Returns once `done` (recorded after the step's launch) has completed. Past `timeout`: raises
  // the flag, waits a short grace for the kernel to end, reads `counters` (one per `infos` entry)
  // and throws mkserve::BackendFatalError naming the step and the counters short of arrivals.
  void Wait(cudaEvent_t done, std::chrono::milliseconds timeout, const uint32_t* counters,
            std::span<const CounterInfo> infos, const std::string& step) const;

 private:
  cuda::HostMappedBuffer<uint32_t> flag_{1};
  cudaStream_t diagnostics_ = nullptr;  // reads the counters while the step's stream is stuck
};

}  // namespace mkserve::megakernel
