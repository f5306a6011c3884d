// The streaming-read bandwidth of this GPU (B_read of docs/speed-of-light.md): a read-only kernel
// with 16-byte loads over a buffer several times the L2, timed with CUDA events.
#pragma once

#include <cstdint>

namespace mkserve::cuda {

struct ReadBandwidth {
  double bytes_per_second = 0.0;  // median over the timed runs
  int64_t buffer_bytes = 0;
};

ReadBandwidth MeasureReadBandwidth(int64_t buffer_bytes, int timed_runs);

}  // namespace mkserve::cuda
