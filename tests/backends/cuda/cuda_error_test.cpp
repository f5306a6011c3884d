// Host only: which CUDA errors are fatal to the backend (BackendFatalError) and which fail only
// the call (mkserve::Error).
#include <gtest/gtest.h>

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/core/device_info.h"

namespace mkserve::cuda {
namespace {

bool ThrowsFatal(cudaError_t status) {
  try {
    ThrowCudaError(status, "call()", "file.cu", 1);
  } catch (const BackendFatalError&) {
    return true;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(cudaGetErrorName(status)), std::string::npos);
    return false;
  }
  ADD_FAILURE() << "no exception";
  return false;
}

TEST(CudaErrorTest, ContextKillingErrorsAreFatalOthersTransient) {
  for (cudaError_t sticky :
       {cudaErrorIllegalAddress, cudaErrorLaunchFailure, cudaErrorIllegalInstruction,
        cudaErrorMisalignedAddress, cudaErrorAssert, cudaErrorLaunchTimeout,
        cudaErrorECCUncorrectable, cudaErrorHardwareStackError}) {
    EXPECT_TRUE(ThrowsFatal(sticky)) << cudaGetErrorName(sticky);
  }
  for (cudaError_t transient :
       {cudaErrorMemoryAllocation, cudaErrorInvalidValue, cudaErrorInvalidConfiguration,
        cudaErrorLaunchOutOfResources, cudaErrorNotReady}) {
    EXPECT_FALSE(ThrowsFatal(transient)) << cudaGetErrorName(transient);
  }
}

TEST(CudaErrorTest, MacroThrowsTheClassifiedType) {
  EXPECT_THROW(MKSERVE_CUDA_CHECK(cudaErrorIllegalAddress), BackendFatalError);
  EXPECT_THROW(MKSERVE_CUDA_CHECK(cudaErrorMemoryAllocation), Error);
  try {
    MKSERVE_CUDA_CHECK(cudaErrorMemoryAllocation);
  } catch (const BackendFatalError&) {
    ADD_FAILURE() << "out of memory must not be fatal";
  } catch (const Error&) {
  }
}

// A machine without a driver or a visible device gets a reason a user can act on, naming the
// runtime's error and the CPU backend; a visible device gets none.
TEST(CudaErrorTest, NoGpuReasonsNameTheCauseAndTheWayOut) {
  const std::string no_driver = GpuUnavailableReason(cudaErrorInsufficientDriver, 0);
  EXPECT_NE(no_driver.find("no usable NVIDIA GPU"), std::string::npos) << no_driver;
  EXPECT_NE(no_driver.find("cudaErrorInsufficientDriver"), std::string::npos) << no_driver;
  EXPECT_NE(no_driver.find("--backend cpu"), std::string::npos) << no_driver;
  const std::string no_device = GpuUnavailableReason(cudaErrorNoDevice, 0);
  EXPECT_NE(no_device.find("cudaErrorNoDevice"), std::string::npos) << no_device;
  const std::string hidden = GpuUnavailableReason(cudaSuccess, 0);
  EXPECT_NE(hidden.find("no CUDA device is visible"), std::string::npos) << hidden;
  EXPECT_NE(hidden.find("CUDA_VISIBLE_DEVICES"), std::string::npos) << hidden;
  EXPECT_EQ(GpuUnavailableReason(cudaSuccess, 1), "");
}

}  // namespace
}  // namespace mkserve::cuda
