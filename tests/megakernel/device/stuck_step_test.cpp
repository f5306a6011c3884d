// A wedged megakernel step while serving (GPU): streams decode through the megakernel, a test
// hook makes one step wait on a counter no task signals, and the watchdog must end that step:
// every request in flight fails with the counters that fell short, the engine reports the fatal
// error (serve turns that into 503 on /health and a non-zero exit: tests/e2e/faults.test.mjs),
// and nothing hangs.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/gpu_test_util.h"
#include "backends/cuda/tools/tool_hooks.h"
#include "engine/engine.h"
#include "engine/engine_test_util.h"
#include "model/presets.h"

namespace mkserve::megakernel::testing {
namespace {

using mkserve::testing::Collected;
using mkserve::testing::Drain;

EngineRequest Request(int64_t index) {
  EngineRequest request;
  for (int64_t i = 0; i < 40; ++i) {
    request.prompt_token_ids.push_back(
        static_cast<int32_t>((i * 7919 + index * 104729) % 200000 + 8));
  }
  request.sampling.max_tokens = 100000;  // only the fault ends it
  request.sampling.ignore_eos = true;
  return request;
}

TEST(MegakernelStuckStep, AWedgedStepFailsEveryRequestAndStopsTheEngine) {
  cuda::testing::RequireGpu();
  auto hooks = std::make_shared<cuda::ToolHooks>();
  cuda::CudaBackendOptions options;
  options.max_batch = 4;
  options.max_num_tokens = 256;
  options.decode_path = "megakernel";
  options.warmup_context_tokens = 0;
  options.hooks = hooks;
  ModelConfig config = NmcPreset(3);
  auto backend = std::make_unique<cuda::CudaBackend>(
      config, cuda::DeviceWeights::Random(config, /*seed=*/5), options);
  EngineOptions engine_options;
  engine_options.max_batch = 4;
  engine_options.max_step_tokens = 256;
  engine_options.step_timeout = std::chrono::seconds(60);  // the kernel's own watchdog is 10 s
  Engine engine(std::move(backend), engine_options);
  std::vector<RequestHandle> streams;
  for (int64_t i = 0; i < 3; ++i) streams.push_back(engine.Submit(Request(i)));
  while (engine.Snapshot().generation_tokens_total < 3 * 8) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_GT(engine.Snapshot().decode_steps_by_path.count("megakernel"), 0u);
  const auto stuck_at = std::chrono::steady_clock::now();
  hooks->stick_next_step();
  for (RequestHandle& stream : streams) {
    const Collected out = Drain(stream, std::chrono::seconds(60));
    ASSERT_TRUE(out.error.has_value()) << "a request outlived the wedged step";
    EXPECT_NE(out.error->message.find("did not finish"), std::string::npos) << out.error->message;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - stuck_at).count();
  EXPECT_LT(seconds, 30.0) << "the watchdog took too long";
  ASSERT_TRUE(engine.fatal_error().has_value());
  EXPECT_NE(engine.fatal_error()->find("counters short"), std::string::npos)
      << *engine.fatal_error();
  // A new request is refused at once rather than queued behind a dead backend.
  RequestHandle late_request = engine.Submit(Request(9));
  const Collected late = Drain(late_request, std::chrono::seconds(5));
  EXPECT_TRUE(late.error.has_value());
}

}  // namespace
}  // namespace mkserve::megakernel::testing
