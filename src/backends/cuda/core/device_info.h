// DeviceInfo: the limits of the GPU the backend runs on, read once from cudaGetDeviceProperties
// and passed down to what sizes grids, shared memory or splits by them.
#pragma once

#include <cstdint>

namespace mkserve::cuda {

struct DeviceInfo {
  int device = 0;
  int num_sms = 0;
  int64_t shared_memory_per_block_optin = 0;  // the most one block may ask for
  int64_t shared_memory_per_sm = 0;

  // The current device's properties (throws mkserve::Error without a usable device).
  static DeviceInfo Query();
};

// The current device's DeviceInfo, queried on first use and kept for the process (the backend
// drives one device). For launch helpers deep inside kernels' host wrappers (the GEMV grid, the
// split-KV heuristics of kernels called without a backend); everything the backend itself sizes
// takes the DeviceInfo it holds.
const DeviceInfo& CurrentDeviceInfo();

}  // namespace mkserve::cuda
