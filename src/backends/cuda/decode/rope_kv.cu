#include "backends/cuda/decode/rope_kv.h"

#include <string>

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/core/pdl_launch.h"
#include "backends/cuda/decode/gemv_tile.cuh"
#include "common/error.h"
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

// Element pair (e, e + 1) of token t's QKV row: rotated where RoPE applies, then q goes to
// q_out and k, v to the token's cache slot, as bf16.
__device__ inline void StorePair(const RopeKvArgs& a, int64_t t, int64_t e, float2 v) {
  const int64_t q_width = a.num_heads * a.head_dim;
  const int64_t kv_width = a.num_kv_heads * a.head_dim;
  const bool is_v = e >= q_width + kv_width;
  if (a.use_rope && !is_v) v = Rotate(v.x, v.y, a.positions[t], (e % a.head_dim) / 2, a);
  const __nv_bfloat162 packed = __floats2bfloat162_rn(v.x, v.y);
  __nv_bfloat16* dst =
      e < q_width ? a.q_out + t * q_width + e
                  : a.cache + static_cast<int64_t>(a.slots[t]) * 2 * kv_width + (e - q_width);
  *reinterpret_cast<__nv_bfloat162*>(dst) = packed;
}

// The QKV GEMV with StorePair as its epilogue: a warp's two rows are one element pair.
struct QkvRopeJob {
  const __nv_bfloat16* x;
  int64_t k;
  const __nv_bfloat16* w;
  RopeKvArgs a;

  __device__ bool Begin() const { return true; }
  __device__ bool Prefetchable() const { return true; }
  __device__ int64_t K() const { return k; }
  __device__ int64_t NumGroups() const {
    return (a.num_heads + 2 * a.num_kv_heads) * a.head_dim / 2;
  }
  __device__ int NumTokens() const { return static_cast<int>(a.num_tokens); }
  __device__ const __nv_bfloat16* ActivationRow(int t) const { return x + t * k; }
  __device__ const __nv_bfloat16* WeightRow(int64_t g, int r) const { return w + (2 * g + r) * k; }
  __device__ void Store(int64_t g, int t, const float (&v)[2]) const {
    StorePair(a, t, 2 * g, make_float2(v[0], v[1]));
  }
};

template <int kVecs>
void LaunchQkvRope(const QkvRopeJob& job, cudaStream_t stream) {
  const int64_t groups = (job.a.num_heads + 2 * job.a.num_kv_heads) * job.a.head_dim / 2;
  if (job.a.num_tokens == 1) {
    LaunchGemvJob<2, kVecs, 1>(job, groups, job.k, 1, stream);
  } else {
    LaunchGemvJob<2, kVecs, kGemvTokens>(job, groups, job.k, 1, stream);
  }
}

// One block per token; each thread handles pairs of elements across q, k and v.
__global__ void RopeKvKernel(RopeKvArgs a) {
  WaitForPrevious();
  AllowNext();
  const int64_t t = blockIdx.x;
  const int64_t q_width = a.num_heads * a.head_dim;
  const int64_t kv_width = a.num_kv_heads * a.head_dim;
  const float* row = a.qkv + t * (q_width + 2 * kv_width);
  const int64_t num_pairs = (q_width + 2 * kv_width) / 2;
  for (int64_t p = threadIdx.x; p < num_pairs; p += blockDim.x) {
    StorePair(a, t, 2 * p, make_float2(row[2 * p], row[2 * p + 1]));
  }
}

}  // namespace

void RopeAndWriteKv(const RopeKvArgs& args, cudaStream_t stream) {
  if (args.num_tokens <= 0) return;
  LaunchPdl(&RopeKvKernel, dim3(static_cast<unsigned>(args.num_tokens)), dim3(256), 0, stream,
            args);
}

void QkvRopeKv(const __nv_bfloat16* x, int64_t k, const __nv_bfloat16* w, const RopeKvArgs& args,
               cudaStream_t stream) {
  if (k <= 0 || k % kVecElements != 0 || args.head_dim % 2 != 0 || args.num_tokens > INT32_MAX) {
    throw Error("QkvRopeKv: unsupported shape k=" + std::to_string(k) + " head_dim " +
                std::to_string(args.head_dim) + " (k a multiple of 8, head_dim even)");
  }
  if (args.num_tokens <= 0) return;
  const QkvRopeJob job{x, k, w, args};
  if (k / kVecElements > 4 * kWarpSize) {
    LaunchQkvRope<8>(job, stream);
  } else {
    LaunchQkvRope<4>(job, stream);
  }
}

}  // namespace mkserve::cuda
