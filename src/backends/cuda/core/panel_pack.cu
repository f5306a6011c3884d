#include "backends/cuda/core/panel_pack.h"

#include <algorithm>

#include "backends/cuda/core/cuda_check.h"

namespace mkserve::cuda {
namespace {

// One thread per destination element: its (panel, chunk, slot, element) names the source.
__global__ void PackPanelsKernel(const __nv_bfloat16* src, PanelMatrix m, int64_t total,
                                 __nv_bfloat16* dst) {
  const int64_t pairs_per_panel = kPanelRows / 2, gate_rows = m.rows / 2;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += stride) {
    const int64_t matrix = i / m.Elements(), at = i % m.Elements();
    const int64_t panel = at / m.PanelElements(),
                  chunk = at % m.PanelElements() / kPanelChunkElements;
    const int64_t slot = at % kPanelChunkElements / kPanelChunk, e = at % kPanelChunk;
    const int64_t pair = panel * pairs_per_panel + slot % pairs_per_panel,
                  half = slot / pairs_per_panel;
    const int64_t row = m.pairs == PanelPairs::kGateUp
                            ? (pair < gate_rows ? half * gate_rows + pair : m.rows)
                            : 2 * pair + half;
    const int64_t k = chunk * kPanelChunk + e;
    dst[i] =
        row < m.rows && k < m.k ? src[(matrix * m.rows + row) * m.k + k] : __float2bfloat16(0.0f);
  }
}

}  // namespace

void PackPanels(const __nv_bfloat16* src, const PanelMatrix& m, int64_t count, __nv_bfloat16* dst,
                cudaStream_t stream) {
  const int64_t total = count * m.Elements();
  if (total <= 0) return;
  constexpr int kThreads = 256;
  constexpr int64_t kMaxBlocks = 65536;
  const int64_t blocks = std::min<int64_t>((total + kThreads - 1) / kThreads, kMaxBlocks);
  PackPanelsKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(src, m, total, dst);
  MKSERVE_CUDA_CHECK_LAUNCH();
}

}  // namespace mkserve::cuda
