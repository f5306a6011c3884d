// What a stream that runs forward passes is made of: the stream, at the priority its work needs
// (the decode steps highest, prompt chunks beside them lowest), and a cuBLAS handle bound to a
// fixed workspace of its own, so cuBLAS never allocates inside a CUDA graph capture. The callers
// own and destroy both.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/core/device_buffer.h"

namespace mkserve::cuda {

enum class StreamPriority { kHighest, kLowest };

// A non-blocking stream at the device's highest or lowest priority.
cudaStream_t CreateStream(StreamPriority priority);

// A cuBLAS handle using `workspace`, which this allocates.
cublasHandle_t CreateCublas(DeviceBuffer<uint8_t>& workspace);

}  // namespace mkserve::cuda
