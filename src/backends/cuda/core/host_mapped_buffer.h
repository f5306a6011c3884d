// HostMappedBuffer: pinned host memory that kernels reach through its device mapping, for the
// few words host and kernels hand each other with no copy: what a step hands back (sampled
// tokens, the sampler's per-row results; the host reads them after the stream's sync) and the
// watchdog's abort flag (the host writes it, stuck waits poll it). A device-to-host copy into
// pageable memory and its wait took 15-20 us of a batch-1 decode step's host time on one lent
// H200 (8 on another); the sync alone takes 1-3 (docs/performance.md, "Host time of a decode
// step"). Every device access crosses PCIe, and many SMs' reads queue behind each other (about
// 1 us each): for words a kernel writes, or reads rarely.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "backends/cuda/core/cuda_check.h"

namespace mkserve::cuda {

template <typename T>
class HostMappedBuffer {
 public:
  HostMappedBuffer() = default;
  explicit HostMappedBuffer(int64_t count) : count_(count) {
    if (count <= 0) return;
    MKSERVE_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&host_),
                                     static_cast<size_t>(count) * sizeof(T), cudaHostAllocMapped));
    MKSERVE_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_), host_, 0));
  }
  HostMappedBuffer(HostMappedBuffer&& other) noexcept { *this = std::move(other); }
  HostMappedBuffer& operator=(HostMappedBuffer&& other) noexcept {
    if (this != &other) {
      Release();
      host_ = std::exchange(other.host_, nullptr);
      device_ = std::exchange(other.device_, nullptr);
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }
  HostMappedBuffer(const HostMappedBuffer&) = delete;
  HostMappedBuffer& operator=(const HostMappedBuffer&) = delete;
  ~HostMappedBuffer() { Release(); }

  T* device() const { return device_; }  // for kernels
  T* host() const { return host_; }      // for the host, after the writing stream's sync
  int64_t count() const { return count_; }

 private:
  void Release() {
    if (host_ != nullptr) cudaFreeHost(host_);  // no throw from a destructor path
    host_ = device_ = nullptr;
  }
  T* host_ = nullptr;
  T* device_ = nullptr;
  int64_t count_ = 0;
};

}  // namespace mkserve::cuda
