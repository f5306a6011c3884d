// The persistent decode kernel: one CTA per SM, each walking its own task list (task_abi.h).
// Host entry points: launch one step, and zero what a step accumulates into.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <span>

#include "megakernel/device/step_params.h"
#include "megakernel/schedule/tile_shapes.h"

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

// The rows' tokens a step takes from the step before it, which picked them on the device and
// has not handed them to the host yet: row r's token becomes picks[pick_row[r]] (that step's
// StepParams::picks_out), or stays where pick_row[r] is -1.
struct TokenGather {
  int32_t* tokens = nullptr;  // the step's token ids on the device
  const int32_t* picks = nullptr;
  int32_t rows = 0;
  int32_t pick_row[kMaxBatch];
};

// Before a step, in one small kernel: zeroes every region (at most kMaxZeroRegions) and, with
// `gather`, takes its tokens from the step before.
inline constexpr int kMaxZeroRegions = 12;
void PrepareStep(std::span<const ZeroRegion> regions, const TokenGather* gather,
                 cudaStream_t stream);

}  // namespace mkserve::megakernel
