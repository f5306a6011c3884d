// A step whose dependency never arrives must not hang the host: the watchdog abandons it, names
// the counter that fell short, and the device runs the next step normally.
#include <gtest/gtest.h>

#include <string>

#include "engine/backend_error.h"
#include "megakernel/device/op_harness.h"

namespace mkserve::megakernel::testing {
using M = TinyModel;
namespace {

TEST(MegakernelWatchdog, AStepWaitingForeverFailsCleanlyAndTheNextStepRuns) {
  cuda::testing::RequireGpu();
  M m;
  DeviceBuffer<uint32_t> counters = ToDevice(std::vector<uint32_t>{0, 0});
  m.p.counters = counters.data();
  const std::vector<CounterInfo> infos = {{Wave::kQkv, 3, 1, 1, false},
                                          {Wave::kJoin, 3, 0, 1, false}};
  TaskDescriptor stuck = Task(kNop);
  stuck.wait0_counter = 0;  // nothing signals counter 0
  stuck.wait0_target = 1;
  stuck.signal_counter = 1;
  StepWatchdog watchdog;
  m.p.abort_flag = watchdog.device_flag();
  std::vector<TaskDescriptor> packed(MegakernelGridSize(), Task(kNop));
  packed[0] = stuck;
  std::vector<uint32_t> counts(MegakernelGridSize(), 0);
  counts[0] = 1;
  DeviceBuffer<TaskDescriptor> tasks = ToDevice(packed);
  DeviceBuffer<uint32_t> device_counts = ToDevice(counts);
  const TaskLists lists{tasks.data(), device_counts.data(), MegakernelGridSize(), 1};
  cudaEvent_t done;
  MKSERVE_CUDA_CHECK(cudaEventCreate(&done));
  watchdog.Arm();
  LaunchMegakernel(m.p, lists, 0);
  MKSERVE_CUDA_CHECK(cudaEventRecord(done, 0));
  std::string message;
  try {
    watchdog.Wait(done, std::chrono::milliseconds(300), counters.data(), infos, "test step");
  } catch (const BackendFatalError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("test step did not finish within 300 ms"), std::string::npos) << message;
  EXPECT_NE(message.find("2 counters short"), std::string::npos) << message;
  EXPECT_NE(message.find("counter 0 (qkv of layer 3, unit 1): 0 of 1"), std::string::npos)
      << message;
  MKSERVE_CUDA_CHECK(cudaDeviceSynchronize());

  // The same list with its dependency satisfied runs to the end.
  const std::vector<uint32_t> ready = {1, 0};
  MKSERVE_CUDA_CHECK(cudaMemcpy(counters.data(), ready.data(), 8, cudaMemcpyHostToDevice));
  watchdog.Arm();
  LaunchMegakernel(m.p, lists, 0);
  MKSERVE_CUDA_CHECK(cudaEventRecord(done, 0));
  watchdog.Wait(done, std::chrono::milliseconds(10000), counters.data(), infos, "second step");
  const std::vector<uint32_t> after = cuda::testing::ToHost(counters);
  EXPECT_EQ(after[1], 1u);  // the task ran and signalled
  MKSERVE_CUDA_CHECK(cudaEventDestroy(done));
}

}  // namespace
}  // namespace mkserve::megakernel::testing
