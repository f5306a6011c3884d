#include "backends/cuda/rope_kv.h"

#include "backends/cuda/cuda_check.h"
#include "engine/kv_layout.h"

namespace mkserve::cuda {
namespace {

// (x0, x1) -> (x0 cos - x1 sin, x1 cos + x0 sin): HF's rotate_half on interleaved pairs.
__device__ inline float2 Rotate(float x0, float x1, int32_t position, int64_t pair,
                                const RopeKvArgs& a) {
  const float angle = static_cast<float>(position) * RopeInvFreq(a.rope_theta, pair, a.head_dim);
  float sin_a, cos_a;
  sincosf(angle, &sin_a, &cos_a);
  return make_float2(x0 * cos_a - x1 * sin_a, x1 * cos_a + x0 * sin_a);
}

// One block per token; each thread handles pairs of elements across q, k and v.
__global__ void RopeKvKernel(RopeKvArgs a) {
  const int64_t t = blockIdx.x;
  const int64_t q_width = a.num_heads * a.head_dim;
  const int64_t kv_width = a.num_kv_heads * a.head_dim;
  const float* row = a.qkv + t * (q_width + 2 * kv_width);
  const int32_t position = a.positions[t];
  __nv_bfloat16* kv_dst = a.cache + static_cast<int64_t>(a.slots[t]) * 2 * kv_width;
  const int64_t num_pairs = (q_width + 2 * kv_width) / 2;
  for (int64_t p = threadIdx.x; p < num_pairs; p += blockDim.x) {
    const int64_t e = 2 * p;
    float2 v = make_float2(row[e], row[e + 1]);
    const bool is_v = e >= q_width + kv_width;
    if (a.use_rope && !is_v) v = Rotate(v.x, v.y, position, (e % a.head_dim) / 2, a);
    __nv_bfloat162 packed = __floats2bfloat162_rn(v.x, v.y);
    __nv_bfloat16* dst = e < q_width ? a.q_out + t * q_width + e : kv_dst + (e - q_width);
    *reinterpret_cast<__nv_bfloat162*>(dst) = packed;
  }
}

}  // namespace

void RopeAndWriteKv(const RopeKvArgs& args, cudaStream_t stream) {
  if (args.num_tokens <= 0) return;
  RopeKvKernel<<<static_cast<unsigned>(args.num_tokens), 256, 0, stream>>>(args);
  MKSERVE_CUDA_CHECK_LAUNCH();
}

}  // namespace mkserve::cuda
