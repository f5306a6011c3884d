// The megakernel's decode measurement for `mkserve bench`: the same batch, context, random KV
// cache and byte model as the layered path's BenchDecode, so the two points sit side by side.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/tools/decode_bench.h"
#include "megakernel/device/megakernel_decoder.h"

namespace mkserve::megakernel {

struct MegakernelPoint {
  cuda::DecodePoint decode;  // path "megakernel"; step_ms = median wall time of Run + argmax
  double kernel_ms = 0.0;    // median GPU time of the zeroing kernel and the megakernel
};

// Greedy decode steps of `batch` rows at `context_tokens` over the backend's weights and KV pool.
// distinct_experts: experts per MoE layer for the byte model (the layered point's count, since
// both paths route the same rows the same way).
MegakernelPoint BenchMegakernelDecode(cuda::CudaBackend& backend, MegakernelDecoder& decoder,
                                      int64_t batch, int64_t context_tokens, int warmup_steps,
                                      int timed_steps, double read_bytes_per_second,
                                      int64_t distinct_experts);

// Where a recorded step's time went (decoder with record_timeline, after a Run): per opcode the
// task count, mean task, mean wait for its inputs and longest task; for layer `layer`, each
// opcode's first start and last end relative to the previous layer's last join. A short text table.
std::string TimelineBreakdown(const Schedule& schedule, std::span<const TaskTimestamp> records,
                              int64_t layer);

}  // namespace mkserve::megakernel
