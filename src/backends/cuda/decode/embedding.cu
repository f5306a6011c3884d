#include "backends/cuda/decode/embedding.h"

#include "backends/cuda/core/cuda_check.h"

namespace mkserve::cuda {
namespace {

__global__ void EmbedKernel(const int32_t* token_ids, const __nv_bfloat16* table, float* out,
                            int64_t hidden) {
  const __nv_bfloat16* row = table + static_cast<int64_t>(token_ids[blockIdx.x]) * hidden;
  float* dst = out + blockIdx.x * hidden;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) dst[i] = __bfloat162float(row[i]);
}

__global__ void GatherKernel(const __nv_bfloat16* src, const int32_t* rows, int64_t width,
                             __nv_bfloat16* dst) {
  const __nv_bfloat16* row = src + static_cast<int64_t>(rows[blockIdx.x]) * width;
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) dst[blockIdx.x * width + i] = row[i];
}

}  // namespace

void GatherRows(const __nv_bfloat16* src, const int32_t* rows, int64_t num_rows, int64_t width,
                __nv_bfloat16* dst, cudaStream_t stream) {
  if (num_rows <= 0) return;
  GatherKernel<<<static_cast<unsigned>(num_rows), 256, 0, stream>>>(src, rows, width, dst);
  MKSERVE_CUDA_CHECK_LAUNCH();
}

void EmbedTokens(const int32_t* token_ids, const __nv_bfloat16* table, float* out,
                 int64_t num_tokens, int64_t hidden, cudaStream_t stream) {
  if (num_tokens <= 0) return;
  EmbedKernel<<<static_cast<unsigned>(num_tokens), 256, 0, stream>>>(token_ids, table, out, hidden);
  MKSERVE_CUDA_CHECK_LAUNCH();
}

}  // namespace mkserve::cuda
