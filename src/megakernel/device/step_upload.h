// StepUpload: what one decode step needs from the host (the rows' inputs, the layers' parameters,
// the queue counts, the attention items), laid out as sections of one buffer, filled in pinned
// host memory and sent in one asynchronous copy: a copy from pageable memory is staged by the
// driver on the calling thread before it returns, one per array.
//
// One step at a time: Begin, Reserve every section, Allocate, fill through Host (device addresses
// from Device may go into the data: they are fixed from Allocate on), Send. The pinned memory is
// reused, so a step's copy must have finished before the next Begin: the decoder keeps one
// upload per slot and begins a slot's next step only after its last one has finished.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backends/cuda/core/device_buffer.h"

namespace mkserve::megakernel {

class StepUpload {
 public:
  StepUpload() = default;
  ~StepUpload();
  StepUpload(const StepUpload&) = delete;
  StepUpload& operator=(const StepUpload&) = delete;

  void Begin() { size_ = 0; }
  // A section of `bytes`, 16-byte aligned; returns its offset.
  size_t Reserve(size_t bytes);
  // Grows the host and device memory to the sections reserved, waiting for `stream` first when
  // the device buffer it replaces may still be read.
  void Allocate(cudaStream_t stream);
  template <class T>
  T* Host(size_t offset) const {
    return reinterpret_cast<T*>(host_ + offset);
  }
  template <class T>
  T* Device(size_t offset) const {
    return reinterpret_cast<T*>(device_.data() + offset);
  }
  // Copies every section to the device on `stream`.
  void Send(cudaStream_t stream) const;

 private:
  size_t size_ = 0;
  size_t host_capacity_ = 0;
  uint8_t* host_ = nullptr;  // pinned
  cuda::DeviceBuffer<uint8_t> device_;
};

}  // namespace mkserve::megakernel
