// DeviceInfo: the limits of the GPU the backend runs on, read once from cudaGetDeviceProperties
// and passed down to what sizes grids, shared memory or splits by them.
#pragma once

#include <cstdint>
#include <string>

#include <driver_types.h>

namespace mkserve::cuda {

// Why the CUDA backend cannot run, from cudaGetDeviceCount's status and count, in words a user
// can act on (no driver, no device visible); empty when a device can be used. Without it the
// first symptom was a failed cudaMalloc reading "driver version is insufficient".
std::string GpuUnavailableReason(cudaError_t status, int device_count);

struct DeviceInfo {
  int device = 0;
  int num_sms = 0;
  int64_t shared_memory_per_block_optin = 0;  // the most one block may ask for
  int64_t shared_memory_per_sm = 0;

  // The current device's properties (throws mkserve::Error with GpuUnavailableReason without a
  // usable device).
  static DeviceInfo Query();
};

// The current device's DeviceInfo, queried on first use and kept for the process (the backend
// drives one device). For launch helpers deep inside kernels' host wrappers (the GEMV grid, the
// split-KV heuristics of kernels called without a backend); everything the backend itself sizes
// takes the DeviceInfo it holds.
const DeviceInfo& CurrentDeviceInfo();

}  // namespace mkserve::cuda
