// Mix64: splitmix64's finaliser, a bijection on 64 bits with full avalanche. The one definition
// behind every counter-based random stream and hash (random weights on host and GPU, sampling
// draws, prefix-cache keys), so host and device agree bit for bit.
#pragma once

#include <cstdint>

#include "common/host_device.h"

namespace mkserve {

MKSERVE_HOST_DEVICE constexpr uint64_t Mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace mkserve
