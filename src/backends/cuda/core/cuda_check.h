// Checked CUDA and cuBLAS calls: a failure throws mkserve::Error naming the call, where it was
// made and the library's own reason, so a GPU fault reads like any other mkserve error. Errors
// after which the CUDA context is unusable throw mkserve::BackendFatalError instead
// (engine/backend_error.h): the process must restart to use the GPU again.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "common/error.h"
#include "engine/backend_error.h"

namespace mkserve::cuda {

// The runtime documents these as leaving the process in an inconsistent state in which every
// later CUDA call returns the same error (device faults, traps, asserts, a timed-out kernel); an
// uncorrectable ECC or NVLink error, a destroyed context and an unknown error are treated the
// same, since no later result could be trusted. Everything else (out of memory, a bad launch
// configuration, an unsupported shape) fails only the call.
inline bool IsStickyCudaError(cudaError_t status) {
  switch (status) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
    case cudaErrorTensorMemoryLeak:
    case cudaErrorMpsClientTerminated:
    case cudaErrorExternalDevice:
    case cudaErrorECCUncorrectable:
    case cudaErrorNvlinkUncorrectable:
    case cudaErrorContextIsDestroyed:
    case cudaErrorUnknown:
      return true;
    default:
      return false;
  }
}

[[noreturn]] inline void ThrowCudaError(cudaError_t status, const char* call, const char* file,
                                        int line) {
  const std::string message = std::string("CUDA call failed: ") + call + " at " + file + ":" +
                              std::to_string(line) + ": " + cudaGetErrorName(status) + " (" +
                              cudaGetErrorString(status) + ")";
  if (IsStickyCudaError(status)) {
    throw BackendFatalError(message + "; the GPU context is unusable, the process must restart");
  }
  throw Error(message);
}

// A cuBLAS failure is fatal when the CUDA context behind it is (a kernel of an earlier call
// faulted).
[[noreturn]] inline void ThrowCublasError(cublasStatus_t status, const char* call, const char* file,
                                          int line) {
  const std::string message = std::string("cuBLAS call failed: ") + call + " at " + file + ":" +
                              std::to_string(line) + ": " + cublasGetStatusName(status) + " (" +
                              cublasGetStatusString(status) + ")";
  const cudaError_t context = cudaPeekAtLastError();
  if (IsStickyCudaError(context)) {
    throw BackendFatalError(message + "; CUDA: " + cudaGetErrorName(context) +
                            ", the GPU context is unusable, the process must restart");
  }
  throw Error(message);
}

}  // namespace mkserve::cuda

#define MKSERVE_CUDA_CHECK(call)                                                   \
  do {                                                                             \
    cudaError_t mkserve_status_ = (call);                                          \
    if (mkserve_status_ != cudaSuccess) {                                          \
      ::mkserve::cuda::ThrowCudaError(mkserve_status_, #call, __FILE__, __LINE__); \
    }                                                                              \
  } while (0)

#define MKSERVE_CUBLAS_CHECK(call)                                                   \
  do {                                                                               \
    cublasStatus_t mkserve_status_ = (call);                                         \
    if (mkserve_status_ != CUBLAS_STATUS_SUCCESS) {                                  \
      ::mkserve::cuda::ThrowCublasError(mkserve_status_, #call, __FILE__, __LINE__); \
    }                                                                                \
  } while (0)

// After a kernel launch: catches bad launch configurations at once (not the kernel's own faults,
// which surface at the next synchronizing call).
#define MKSERVE_CUDA_CHECK_LAUNCH() MKSERVE_CUDA_CHECK(cudaGetLastError())
