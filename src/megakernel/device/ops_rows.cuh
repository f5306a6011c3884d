// Per-row ops: kEmbed (residual = embedding row, then layer 0's input norm), kJoin (residual +=
// attn_out + ffn_out, then the next norm) and kMoeCombine (ffn_out = the row's weighted expert
// outputs). RMSNorm in fp32 as the layered AddNorm computes it. The join zeroes the attn_out and
// ffn_out rows it consumed, so the next layer's split-K adds start from zero again.
#pragma once

#include "megakernel/device/sync.cuh"

namespace mkserve::megakernel {

struct RowScratch {
  float warp_sums[kWorkerWarps];
};

__device__ inline float WorkerSum(float v, RowScratch& s) {
  v = cuda::WarpSum(v);
  WorkerSync();  // a previous call may still read warp_sums
  if (threadIdx.x % 32 == 0) s.warp_sums[threadIdx.x / 32] = v;
  WorkerSync();
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kWorkerWarps; ++w) total += s.warp_sums[w];
  return total;
}

// x_norm[row] = RMSNorm(residual[row]) * gamma, bf16 and fp32 (the router's input).
__device__ inline void NormRow(const StepParams& p, int row, const bf16* gamma, RowScratch& s) {
  const float* x = p.residual + static_cast<int64_t>(row) * p.hidden;
  float squares = 0.0f;
  for (int i = threadIdx.x; i < p.hidden; i += kWorkerThreads) {
    const float v = x[i];  // this thread wrote it
    squares += v * v;
  }
  const float inv = rsqrtf(WorkerSum(squares, s) / static_cast<float>(p.hidden) + p.norm_eps);
  bf16* y = p.x_norm + static_cast<int64_t>(row) * p.hidden;
  float* y32 = p.x_norm_f32 + static_cast<int64_t>(row) * p.hidden;
  for (int i = threadIdx.x; i < p.hidden; i += kWorkerThreads) {
    const float value = x[i] * inv * __bfloat162float(gamma[i]);
    y[i] = __float2bfloat16(value);
    y32[i] = value;
  }
}

__device__ inline void OpEmbed(const StepParams& p, const TaskDescriptor& d, RowScratch& s) {
  for (int row = d.row_begin; row < static_cast<int>(d.row_end); ++row) {
    const bf16* e = p.embed + static_cast<int64_t>(p.token_ids[row]) * p.hidden;
    float* x = p.residual + static_cast<int64_t>(row) * p.hidden;
    for (int i = threadIdx.x; i < p.hidden; i += kWorkerThreads) x[i] = __bfloat162float(e[i]);
    NormRow(p, row, p.layers[0].input_norm, s);
  }
}

__device__ inline void OpJoin(const StepParams& p, const TaskDescriptor& d, RowScratch& s) {
  const bf16* gamma =
      (d.flags & kFlagFinalNorm) != 0 ? p.final_norm : p.layers[d.layer + 1].input_norm;
  for (int row = d.row_begin; row < static_cast<int>(d.row_end); ++row) {
    const int64_t base = static_cast<int64_t>(row) * p.hidden;
    for (int i = threadIdx.x; i < p.hidden; i += kWorkerThreads) {
      // The residual row was last written by whichever SM ran the previous join of this row.
      float v = LoadCgF(p.residual + base + i);
      v += LoadCgF(p.attn_out + base + i);
      v += LoadCgF(p.ffn_out + base + i);
      p.residual[base + i] = v;
      p.attn_out[base + i] = 0.0f;
      p.ffn_out[base + i] = 0.0f;
    }
    NormRow(p, row, gamma, s);
  }
}

// Bucket position of the row's j-th expert (kTopK's slot, kMoeFinalize's offsets).
__device__ inline int BucketPosition(const StepParams& p, int row, int j) {
  const int a = row * p.top_k + j;
  return LoadCgI(p.bucket_offsets + LoadCgI(p.topk_ids + a)) + LoadCgI(p.topk_slot + a);
}

__device__ inline void OpMoeCombine(const StepParams& p, const TaskDescriptor& d) {
  constexpr int kMaxTopK = 16;
  for (int row = d.row_begin; row < static_cast<int>(d.row_end); ++row) {
    int position[kMaxTopK];
    float weight[kMaxTopK];
    for (int j = 0; j < p.top_k; ++j) {
      position[j] = BucketPosition(p, row, j);
      weight[j] = LoadCgF(p.topk_weights + row * p.top_k + j);
    }
    for (int n = threadIdx.x; n < p.hidden; n += kWorkerThreads) {
      float sum = 0.0f;
      for (int j = 0; j < p.top_k; ++j) {
        sum = fmaf(weight[j], LoadCgF(p.moe_out + static_cast<int64_t>(position[j]) * p.hidden + n),
                   sum);
      }
      p.ffn_out[static_cast<int64_t>(row) * p.hidden + n] = sum;
    }
  }
}

}  // namespace mkserve::megakernel
