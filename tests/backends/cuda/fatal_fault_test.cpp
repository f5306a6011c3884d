// Fault injection (GPU, its own process: the fault kills the CUDA context for the rest of it): a
// kernel of the backend reading through a null pointer must surface from the next checked call as
// BackendFatalError, and so must every later call.
#include <gtest/gtest.h>

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/core/device_buffer.h"
#include "backends/cuda/decode/embedding.h"
#include "gpu_test_util.h"

namespace mkserve::cuda::testing {
namespace {

TEST(FatalFaultTest, FaultingKernelIsABackendFatalError) {
  RequireGpu();
  constexpr int64_t kHidden = 64;
  DeviceBuffer<__nv_bfloat16> table(16 * kHidden);
  DeviceBuffer<float> out(kHidden);
  // The launch itself is valid; the kernel reads the token id through a null pointer.
  EmbedTokens(/*token_ids=*/nullptr, table.data(), out.data(), 1, kHidden, nullptr);
  EXPECT_THROW(MKSERVE_CUDA_CHECK(cudaDeviceSynchronize()), BackendFatalError);
  EXPECT_THROW(MKSERVE_CUDA_CHECK(cudaMemset(out.data(), 0, out.bytes())), BackendFatalError);
}

}  // namespace
}  // namespace mkserve::cuda::testing
