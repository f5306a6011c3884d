// After the fused QKV projection: RoPE (interleaved GPT-J pairs) on q and k where the layer uses
// it, q written out as bf16 for attention, k and v written into the paged cache at each token's
// slot (physical block * kBlockTokens + offset in block).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

namespace mkserve::cuda {

struct RopeKvArgs {
  const float* qkv = nullptr;          // [num_tokens][q_width + 2 * kv_width]
  const int32_t* positions = nullptr;  // [num_tokens]
  const int32_t* slots = nullptr;      // [num_tokens] in this layer's KV group
  __nv_bfloat16* q_out = nullptr;      // [num_tokens][q_width]
  __nv_bfloat16* cache = nullptr;      // this layer: [blocks][kBlockTokens][2][kv_heads][head_dim]
  int64_t num_tokens = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  bool use_rope = false;
  float rope_theta = 10000.0f;
};

void RopeAndWriteKv(const RopeKvArgs& args, cudaStream_t stream);

// The fused QKV projection qkv = x[num_tokens][k] . w[q_width + 2 kv_width][k]^T with
// RopeAndWriteKv as its epilogue (args.qkv unused): no fp32 QKV round trip, one launch fewer.
// The weight-streaming GEMV: meant for decode-sized batches. Same values as Linear followed by
// RopeAndWriteKv.
void QkvRopeKv(const __nv_bfloat16* x, int64_t k, const __nv_bfloat16* w, const RopeKvArgs& args,
               cudaStream_t stream);

// The rotation angle's inverse frequency for pair `pair` of a head of `head_dim` (host and device
// agree: float, as HF computes it).
__host__ __device__ inline float RopeInvFreq(float theta, int64_t pair, int64_t head_dim) {
  return 1.0f / powf(theta, static_cast<float>(2 * pair) / static_cast<float>(head_dim));
}

}  // namespace mkserve::cuda
