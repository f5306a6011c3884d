// Mixture-of-experts FFN over only the experts that received tokens:
//   1. bucket: count assignments per expert, offsets, the list of experts with tokens, scatter
//      (token, assignment) into expert order (one block for decode-sized batches); later grids
//      cover only min(E, T * k) experts
//   2. gate/up: per expert with tokens, h = silu(gate x) * up x   (bf16, one row per assignment)
//   3. down: per expert with tokens, y = down h                    (fp32, one row per assignment)
//   4. combine: out[t] = sum_j weight[t][j] * y[assignment(t, j)] (+ shared expert, averaged or
//      summed). Each assignment's result is independent of its bucket order, so the output is
//      deterministic even though the scatter uses atomics.
// Plus SiluMul for dense SwiGLU layers and the shared expert.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "model/model_config.h"

namespace mkserve::cuda {

// Int32 elements a MoeWorkspace's index arrays take.
inline int64_t MoeIndexElements(int64_t num_experts, int64_t num_assignments) {
  return 4 * num_experts + 2 + 2 * num_assignments;
}

// Device buffers, sized for max tokens * top_k assignments.
struct MoeWorkspace {
  int32_t* counts = nullptr;              // [num_experts]
  int32_t* offsets = nullptr;             // [num_experts + 1]
  int32_t* cursors = nullptr;             // [num_experts]
  int32_t* active_experts = nullptr;      // [num_experts + 1]: ids with tokens, then the count
  int32_t* token_of_slot = nullptr;       // [assignments] token of each expert-ordered slot
  int32_t* slot_of_assignment = nullptr;  // [assignments] t * top_k + j -> slot
  __nv_bfloat16* hidden = nullptr;        // [assignments][intermediate]
  float* expert_out = nullptr;            // [assignments][hidden]
};

// A workspace whose index arrays (counts .. slot_of_assignment) are carved, in that order, out of
// `index` (MoeIndexElements(num_experts, num_assignments) int32s); the other pointers are null.
inline MoeWorkspace MoeIndexViews(int32_t* index, int64_t num_experts, int64_t num_assignments) {
  MoeWorkspace ws;
  ws.counts = index;                                           // [E]
  ws.offsets = ws.counts + num_experts;                        // [E + 1]
  ws.cursors = ws.offsets + num_experts + 1;                   // [E]
  ws.active_experts = ws.cursors + num_experts;                // [E + 1]
  ws.token_of_slot = ws.active_experts + num_experts + 1;      // [A]
  ws.slot_of_assignment = ws.token_of_slot + num_assignments;  // [A]
  return ws;
}

struct MoeArgs {
  const __nv_bfloat16* x = nullptr;        // [num_tokens][hidden] normed input
  const int32_t* expert_ids = nullptr;     // [num_tokens][top_k]
  const float* weights = nullptr;          // [num_tokens][top_k]
  const __nv_bfloat16* gate_up = nullptr;  // per expert ExpertGateUpPanels (weight_layout.h)
  const __nv_bfloat16* down = nullptr;     // per expert ExpertDownPanels
  const float* shared_out = nullptr;       // [num_tokens][hidden] or null
  SharedExpertCombination shared_combination = SharedExpertCombination::kAverage;
  int64_t num_tokens = 0;
  int64_t hidden = 0;
  int64_t intermediate = 0;
  int64_t num_experts = 0;
  int64_t top_k = 0;
  float* out = nullptr;  // [num_tokens][hidden]
};

void MoeForward(const MoeArgs& args, const MoeWorkspace& workspace, cudaStream_t stream);

// MoeForward without the combine: workspace.expert_out and slot_of_assignment hold the expert
// rows, and the caller folds the weighted sum into its next kernel (decode: AddNorm).
// already_bucketed: the fused router (RouterLogitsTopK with a workspace) bucketed the ids.
void MoeExperts(const MoeArgs& args, const MoeWorkspace& workspace, cudaStream_t stream,
                bool already_bucketed = false);

// The first and last phases on their own (the grouped path in moe_grouped.h reuses them).
void MoeBucket(const MoeArgs& args, const MoeWorkspace& workspace, cudaStream_t stream);
void MoeCombine(const MoeArgs& args, const MoeWorkspace& workspace, cudaStream_t stream);

// out[t][i] = silu(gate_up[t][i]) * gate_up[t][intermediate + i], bf16.
void SiluMul(const float* gate_up, int64_t num_tokens, int64_t intermediate, __nv_bfloat16* out,
             cudaStream_t stream);

}  // namespace mkserve::cuda
