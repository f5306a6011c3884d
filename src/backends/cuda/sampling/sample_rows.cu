// The GPU sampler's kernel: one cluster of CTAs per row (ClusterTeam) runs SampleRow
// (sample_row.cuh), engine/sampler.cpp's steps in its order over the row in global memory.
#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/sampling/cluster_team.cuh"
#include "backends/cuda/sampling/sample_row.cuh"
#include "backends/cuda/sampling/sample_rows.h"

namespace mkserve::cuda {
namespace {

using sampling::ClusterTeam;

__global__ void __cluster_dims__(sampling::kClusterSize, 1, 1)
    __launch_bounds__(ClusterTeam::kThreads, 1)
        SampleRowsKernel(float* logits, int64_t vocab, const StagedSamples staged) {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  auto& s = *reinterpret_cast<sampling::SampleScratch*>(shared_bytes);
  const int64_t request = blockIdx.x / sampling::kClusterSize;
  const SampleRowParams p = staged.rows[request];
  ClusterTeam team;
  sampling::SampleRow(team, logits + p.logits_row * vocab, static_cast<int32_t>(vocab), p, request,
                      staged, s);
}

}  // namespace

void LaunchSampleRows(float* logits, int64_t vocab, const StagedSamples& staged,
                      cudaStream_t stream) {
  if (staged.count <= 0) return;
  constexpr int kSharedBytes = sizeof(sampling::SampleScratch);  // over the 48 KiB default
  static const cudaError_t opt_in = cudaFuncSetAttribute(
      SampleRowsKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes);
  MKSERVE_CUDA_CHECK(opt_in);
  const auto num_ctas = static_cast<unsigned>(staged.count * sampling::kClusterSize);
  SampleRowsKernel<<<num_ctas, ClusterTeam::kThreads, kSharedBytes, stream>>>(logits, vocab,
                                                                              staged);
  MKSERVE_CUDA_CHECK_LAUNCH();
}

}  // namespace mkserve::cuda
