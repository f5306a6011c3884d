// The MoE forward for large token counts (prefill chunks): the same bucketing as MoeForward, then
// two grouped GEMMs on tensor cores over the expert-sorted assignment rows (grouped_gemm.h):
// gate/up with SiLU*up fused into the epilogue (x rows gathered on load), and down; then the same
// deterministic weighted combine. The bucket offsets stay on the device, so the layer needs no
// host sync and can run inside a CUDA graph. The experts' weights are in panels, which cuBLAS
// cannot read: shapes the grouped GEMM does not take (hidden or expert width not a multiple of
// 32) run the decode GEMV (MoeExperts) at every token count instead.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/decode/moe.h"

namespace mkserve::cuda {

// The default of CudaBackendOptions::grouped_moe_min_tokens: decode batches of 16 rows and more
// take the grouped GEMMs too. H200, North, 1K context, `mkserve bench --grouped-moe-min-tokens`:
// batch 64 steps 29.8 ms against 42.1 through the GEMV (distinct tokens, 127 experts per layer)
// and 14.5 against 93.6 when every row routes alike (one token for all rows, 64 experts); batch
// 32 26.4 against 29.0; batch 16 is even (20.9 both). The GEMV re-streams an expert for every 8
// of its tokens on CUDA cores; the grouped GEMM streams it once into tensor cores.
inline constexpr int64_t kGroupedMoeMinTokens = 16;

bool MoeGroupedSupports(int64_t hidden, int64_t intermediate);

// Throws mkserve::Error when !MoeGroupedSupports.
void MoeForwardGrouped(const MoeArgs& args, const MoeWorkspace& workspace, cudaStream_t stream);

}  // namespace mkserve::cuda
