#include "backends/cuda/prefill/moe_grouped.h"

#include <string>

#include "backends/cuda/prefill/grouped_gemm.h"
#include "common/error.h"

namespace mkserve::cuda {
namespace {

// Tensor-core grouped GEMMs reading the device offsets: no host round trip.
void ExpertsOnDevice(const MoeArgs& a, const MoeWorkspace& w, cudaStream_t stream) {
  GroupedGemmArgs gate_up;
  gate_up.a = a.x;
  gate_up.a_rows = w.token_of_slot;
  gate_up.w = a.gate_up;
  gate_up.offsets = w.offsets;
  gate_up.num_groups = a.num_experts;
  gate_up.max_rows = a.num_tokens * a.top_k;
  gate_up.k = a.hidden;
  gate_up.n = a.intermediate;
  gate_up.epilogue = GroupedEpilogue::kSiluMulBf16;
  gate_up.out = w.hidden;
  GroupedGemm(gate_up, stream);
  GroupedGemmArgs down = gate_up;
  down.a = w.hidden;
  down.a_rows = nullptr;
  down.w = a.down;
  down.k = a.intermediate;
  down.n = a.hidden;
  down.epilogue = GroupedEpilogue::kStoreF32;
  down.out = w.expert_out;
  GroupedGemm(down, stream);
}

}  // namespace

bool MoeGroupedSupports(int64_t hidden, int64_t intermediate) {
  return GroupedGemmSupports(hidden, intermediate) && GroupedGemmSupports(intermediate, hidden);
}

void MoeForwardGrouped(const MoeArgs& a, const MoeWorkspace& w, cudaStream_t stream) {
  if (!MoeGroupedSupports(a.hidden, a.intermediate)) {
    throw Error("MoeForwardGrouped: hidden " + std::to_string(a.hidden) + " and expert width " +
                std::to_string(a.intermediate) + " must be multiples of 32");
  }
  if (a.num_tokens <= 0) return;
  MoeBucket(a, w, stream);
  ExpertsOnDevice(a, w, stream);
  MoeCombine(a, w, stream);
}

}  // namespace mkserve::cuda
