// Host only: which CUDA errors are fatal to the backend (BackendFatalError) and which fail only
// the call (mkserve::Error).
#include <gtest/gtest.h>

#include "backends/cuda/core/cuda_check.h"

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

}  // namespace
}  // namespace mkserve::cuda
