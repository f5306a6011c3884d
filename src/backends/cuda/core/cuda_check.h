// Checked CUDA and cuBLAS calls: a failure throws mkserve::Error naming the call, where it was
// made and the library's own reason, so a GPU fault reads like any other mkserve error.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "common/error.h"

namespace mkserve::cuda {

[[noreturn]] inline void ThrowCudaError(cudaError_t status, const char* call, const char* file,
                                        int line) {
  throw Error(std::string("CUDA call failed: ") + call + " at " + file + ":" +
              std::to_string(line) + ": " + cudaGetErrorName(status) + " (" +
              cudaGetErrorString(status) + ")");
}

[[noreturn]] inline void ThrowCublasError(cublasStatus_t status, const char* call, const char* file,
                                          int line) {
  throw Error(std::string("cuBLAS call failed: ") + call + " at " + file + ":" +
              std::to_string(line) + ": " + cublasGetStatusName(status) + " (" +
              cublasGetStatusString(status) + ")");
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
