// The persistent decode kernel: one CTA per SM, each walking its own task list (task_abi.h).
// Host entry points: launch one step, and zero what a step accumulates into.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <span>

#include "megakernel/device/step_params.h"

namespace mkserve::megakernel {

// Dynamic shared memory the kernel needs: the descriptor ring, the largest op scratch and the
// expert items' weight ring after the GEMM scratch.
size_t MegakernelSmemBytes();

// Number of CTAs the kernel runs with on the current device: one per SM. Throws mkserve::Error
// when one CTA per SM cannot be resident (then a persistent launch could deadlock).
int MegakernelGridSize();

// Launches one step (cooperative launch: all CTAs co-resident or a launch error). lists.num_sms
// must equal MegakernelGridSize().
void LaunchMegakernel(const StepParams& params, const TaskLists& lists, cudaStream_t stream);

// One region of 32-bit words to zero before a step.
struct ZeroRegion {
  void* data = nullptr;
  int64_t words = 0;
};

// Zeroes every region in one small kernel (at most kMaxZeroRegions).
inline constexpr int kMaxZeroRegions = 12;
void ZeroRegions(std::span<const ZeroRegion> regions, cudaStream_t stream);

}  // namespace mkserve::megakernel
