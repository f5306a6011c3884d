#include "backends/cuda/prefill/moe_grouped.h"

#include <string>
#include <vector>

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/decode/embedding.h"
#include "backends/cuda/decode/linear.h"
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

// One cuBLAS GEMM per active expert; the offsets come back to the host first.
void ExpertsWithCublas(const MoeArgs& a, const MoeWorkspace& w, cublasHandle_t cublas,
                       cudaStream_t stream) {
  if (w.gathered_x == nullptr || w.gate_up == nullptr) {
    throw Error("MoeForwardGrouped: the workspace has no grouped-path buffers");
  }
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  MKSERVE_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone) {
    throw Error("MoeForwardGrouped: this expert shape cannot run inside a CUDA graph capture");
  }
  const int64_t assignments = a.num_tokens * a.top_k, width = a.intermediate;
  GatherRows(a.x, w.token_of_slot, assignments, a.hidden, w.gathered_x, stream);
  std::vector<int32_t> offsets(a.num_experts + 1);
  MKSERVE_CUDA_CHECK(cudaMemcpyAsync(offsets.data(), w.offsets, offsets.size() * sizeof(int32_t),
                                     cudaMemcpyDeviceToHost, stream));
  MKSERVE_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (int64_t e = 0; e < a.num_experts; ++e) {
    const int64_t first = offsets[e], count = offsets[e + 1] - offsets[e];
    if (count == 0) continue;
    GemmCublas(cublas, w.gathered_x + first * a.hidden, count, a.hidden,
               a.gate_up + e * 2 * width * a.hidden, 2 * width, 1.0f, w.gate_up + first * 2 * width,
               stream);
  }
  SiluMul(w.gate_up, assignments, width, w.hidden, stream);
  for (int64_t e = 0; e < a.num_experts; ++e) {
    const int64_t first = offsets[e], count = offsets[e + 1] - offsets[e];
    if (count == 0) continue;
    GemmCublas(cublas, w.hidden + first * width, count, width, a.down + e * a.hidden * width,
               a.hidden, 1.0f, w.expert_out + first * a.hidden, stream);
  }
}

}  // namespace

void MoeForwardGrouped(const MoeArgs& a, const MoeWorkspace& w, cublasHandle_t cublas,
                       cudaStream_t stream) {
  if (a.num_tokens <= 0) return;
  MoeBucket(a, w, stream);
  if (GroupedGemmSupports(a.hidden, a.intermediate) &&
      GroupedGemmSupports(a.intermediate, a.hidden)) {
    ExpertsOnDevice(a, w, stream);
  } else {
    ExpertsWithCublas(a, w, cublas, stream);
  }
  MoeCombine(a, w, stream);
}

}  // namespace mkserve::cuda
