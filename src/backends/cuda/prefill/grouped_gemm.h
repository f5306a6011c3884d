// Grouped GEMM on tensor cores for the MoE prefill: rows sorted by group (expert), group g owning
// sorted rows offsets[g]..offsets[g+1]-1, each group multiplied by its own weight matrix,
// out[r] = a[r] . w[g]^T. The offsets stay on the device: a fixed grid of 128-row tiles covers
// every possible split and each CTA finds its group from the offsets, so nothing is read back
// to the host (no sync, capturable in a CUDA graph). Each output element is computed by one CTA
// in a fixed order: deterministic.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace mkserve::cuda {

enum class GroupedEpilogue {
  kStoreF32,     // w[g] is [n][k]; out fp32 [rows][n]
  kSiluMulBf16,  // w[g] is [2n][k], gate rows then up rows; out bf16 silu(gate) * up [rows][n]
};

struct GroupedGemmArgs {
  const __nv_bfloat16* a = nullptr;  // [.][k] bf16
  const int32_t* a_rows = nullptr;   // null: sorted row r reads a[r]; else a[a_rows[r]] (gather)
  const __nv_bfloat16* w = nullptr;  // per group [n][k] or [2n][k] in panels (weight_panels.h):
                                     // AdjacentRows(n, k), or GateUp(n, k) for kSiluMulBf16
  const int32_t* offsets = nullptr;  // device [num_groups + 1], non-decreasing from 0
  int64_t num_groups = 0;
  int64_t max_rows = 0;  // upper bound of offsets[num_groups]: sizes the grid
  int64_t k = 0;
  int64_t n = 0;
  GroupedEpilogue epilogue = GroupedEpilogue::kStoreF32;
  void* out = nullptr;  // float or bf16 per the epilogue, [sorted rows][n]
};

// k a multiple of 32, n a multiple of 8.
bool GroupedGemmSupports(int64_t k, int64_t n);

// Throws mkserve::Error on an unsupported shape.
void GroupedGemm(const GroupedGemmArgs& args, cudaStream_t stream);

}  // namespace mkserve::cuda
