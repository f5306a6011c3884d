// The GPU sampler's kernel: one cluster of CTAs per row runs engine/sampler.cpp's steps in its
// order. Top logprobs on the unchanged row, then the edits (penalties, bias, min_tokens masking)
// in place, then greedy argmax or temperature -> top-k -> top-p -> min-p -> the inverse-CDF draw
// with the host's uniform, each a radix descent (radix_descent.cuh) over the row in global
// memory. Each CTA reads and writes only its own slice of the row.
#include <cooperative_groups.h>

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/sampling/allowed_tokens.cuh"
#include "backends/cuda/sampling/radix_descent.cuh"
#include "backends/cuda/sampling/sample_rows.h"

namespace mkserve::cuda {
namespace {

namespace cg = cooperative_groups;
using sampling::Cut;
using sampling::Descent;
using sampling::Goal;
using sampling::kThreads;
using sampling::Members;
using sampling::Slice;

struct SampleScratch {
  sampling::DescentScratch descent;
  sampling::ArgmaxScratch argmax;
  sampling::SumScratch sums;
  int32_t num_gathered;  // this CTA's share of the top logprobs
  int32_t gathered_ids[kGpuMaxTopLogprobs];
  float gathered_logits[kGpuMaxTopLogprobs];
};

struct Identity {
  __device__ float operator()(float l) const { return l; }
};

// The CPU sampler divides every logit by the temperature before anything else.
struct Scaled {
  float temperature;
  __device__ float operator()(float l) const { return __fdiv_rn(l, temperature); }
};

struct Everyone {
  __device__ bool operator()(float, uint32_t, int32_t) const { return true; }
};

// Members of a prefix cut and, when min-p is on, with exp(x - max) >= min_p (p_max is 1). The
// exact double exp runs only near the boundary; elsewhere the log decides with a wide margin.
struct InCutAboveMinP {
  Cut cut;
  bool use_min_p;
  double floor, log_floor;
  float max;
  __device__ bool operator()(float x, uint32_t key, int32_t id) const {
    if (!cut.Holds(key, id)) return false;
    if (!use_min_p) return true;
    constexpr double kMargin = 1e-6;
    const double d = static_cast<double>(x) - static_cast<double>(max);
    if (d > log_floor + kMargin) return true;
    if (d < log_floor - kMargin) return false;
    return exp(d) >= floor;
  }
};

template <typename ValueFn, typename MemberFn>
__device__ Members<ValueFn, MemberFn> MakeMembers(const Slice& slice, ValueFn value,
                                                  MemberFn member, float max) {
  return Members<ValueFn, MemberFn>{slice, value, member, max};
}

// Cluster rank 0 merges every rank's gathered top entries and writes them sorted (logit desc,
// id asc): a selection sort of <= kGpuMaxTopLogprobs entries, so the order never depends on
// timing.
__device__ void WriteTopLogprobs(int32_t num_top, double log_z, SampleScratch& s,
                                 SampleRowOutput& out) {
  int32_t ids[kGpuMaxTopLogprobs];
  float logits[kGpuMaxTopLogprobs];
  int32_t n = 0;
  cg::cluster_group cluster = cg::this_cluster();
  for (int r = 0; r < sampling::kClusterSize; ++r) {
    const SampleScratch* other = cluster.map_shared_rank(&s, r);
    for (int32_t i = 0; i < min(other->num_gathered, kGpuMaxTopLogprobs) && n < num_top; ++i) {
      ids[n] = other->gathered_ids[i];
      logits[n++] = other->gathered_logits[i];
    }
  }
  for (int32_t a = 0; a < n; ++a) {
    int32_t best = a;
    for (int32_t b = a + 1; b < n; ++b) {
      if (sampling::Better(logits[b], ids[b], logits[best], ids[best])) best = b;
    }
    out.top_ids[a] = ids[best];
    out.top_logprobs[a] = static_cast<float>(logits[best] - log_z);
    ids[best] = ids[a];
    logits[best] = logits[a];
  }
  out.num_top = n;
}

// log Z of the unchanged row, and its top entries into `out` (by cluster rank 0).
__device__ double TopLogprobs(const Slice& slice, int32_t k, SampleScratch& s,
                              SampleRowOutput& out) {
  float max;
  int32_t max_id;
  sampling::ClusterArgmax(slice, Identity{}, s.argmax, &max, &max_id);
  double sum = 0.0;
  sampling::ForEachInSlice(slice, [&](int32_t, float l) {
    sum += exp(static_cast<double>(l) - static_cast<double>(max));
  });
  const double log_z = static_cast<double>(max) + log(sampling::ClusterSumDouble(sum, s.sums));
  const int32_t num_top = min(k, slice.vocab);
  if (threadIdx.x == 0) s.num_gathered = 0;
  if (num_top > 0) {
    auto members = MakeMembers(slice, Identity{}, Everyone{}, max);
    const Descent d = sampling::Descend<false>(
        members, Goal{Goal::kCount, static_cast<uint32_t>(num_top)}, s.descent);
    const Cut cut = sampling::CutOf(members, d, s.descent);
    sampling::ForEachInSlice(slice, [&](int32_t i, float l) {
      if (!cut.Holds(sampling::OrderKey(l), i)) return;
      const int32_t slot = atomicAdd(&s.num_gathered, 1);
      if (slot >= kGpuMaxTopLogprobs) return;  // defensive: the cut holds num_top entries
      s.gathered_ids[slot] = i;
      s.gathered_logits[slot] = l;
    });
  }
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();
  if (threadIdx.x == 0 && cluster.block_rank() == 0) WriteTopLogprobs(num_top, log_z, s, out);
  cluster.sync();  // rank 0 has read every rank's entries
  return log_z;
}

// Penalties, bias and masking in the CPU sampler's order, one thread per edited token; each CTA
// edits the tokens of its own slice.
__device__ void ApplyEdits(const Slice& slice, const SampleRowParams& p, const LogitEdit* edits,
                           const float* bias_values, float* originals) {
  float* row = slice.row;
  for (int32_t e = p.edit_begin + threadIdx.x; e < p.edit_end; e += kThreads) {
    const LogitEdit edit = edits[e];
    if (edit.token_id < slice.begin || edit.token_id >= slice.end) continue;
    float v = row[edit.token_id];
    originals[e] = v;
    if (edit.flags & kEditRepeated) {
      v = v > 0 ? __fdiv_rn(v, p.repetition_penalty) : __fmul_rn(v, p.repetition_penalty);
    }
    if (edit.output_count > 0 && (p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f)) {
      const float count = static_cast<float>(edit.output_count);
      v = __fsub_rn(v, __fadd_rn(__fmul_rn(p.frequency_penalty, count), p.presence_penalty));
    }
    for (int32_t b = edit.bias_begin; b < edit.bias_end; ++b) v = __fadd_rn(v, bias_values[b]);
    if (edit.flags & kEditSuppressed) v = -INFINITY;
    row[edit.token_id] = v;
  }
  __syncthreads();  // the slice's writes are visible to the whole CTA after this
}

// Temperature -> top-k -> top-p -> min-p -> draw; returns the token.
__device__ int32_t DrawToken(const Slice& slice, const SampleRowParams& p, SampleScratch& s) {
  const Scaled value{p.temperature};
  float max;
  int32_t max_id;
  sampling::ClusterArgmax(slice, value, s.argmax, &max, &max_id);
  if (max == -INFINITY) return max_id;  // everything masked: the lowest id
  InCutAboveMinP member{Cut{}, false, 0.0, 0.0, max};
  if (p.top_k > 0) {
    auto members = MakeMembers(slice, value, member, max);
    const Descent d = sampling::Descend<false>(
        members, Goal{Goal::kCount, static_cast<uint32_t>(p.top_k)}, s.descent);
    if (d.found) member.cut = sampling::CutOf(members, d, s.descent);
  }
  if (p.top_p < 1.0f) {
    auto members = MakeMembers(slice, value, member, max);
    Goal goal{Goal::kMassFraction};
    goal.fraction = static_cast<double>(p.top_p);
    const Descent d = sampling::Descend<true>(members, goal, s.descent);
    // CutOf takes every tie past the top-k cut's key when top-p takes all tied members.
    if (d.found) member.cut = member.cut.Narrower(sampling::CutOf(members, d, s.descent));
  }
  if (p.min_p > 0.0f) {
    member.use_min_p = true;
    member.floor = static_cast<double>(p.min_p);
    member.log_floor = log(member.floor);
  }
  auto members = MakeMembers(slice, value, member, max);
  Goal goal{Goal::kMassAbove};
  goal.uniform = p.uniform;
  Descent d = sampling::Descend<true>(members, goal, s.descent);
  if (d.all.count == 0) return max_id;  // min-p above 1 keeps only the first token
  if (!d.found) {  // rounding put u * mass at the very end: the last kept token
    d = sampling::Descend<false>(members, Goal{Goal::kCount, d.all.count}, s.descent);
    if (!d.found) return max_id;
  }
  return sampling::LocateTiedId(members, d.key, d.ties_taken, s.descent);
}

// The chosen token's logprob from its logit before the edits (edits are sorted by token id).
__device__ float ChosenLogprob(const float* row, const SampleRowParams& p, const LogitEdit* edits,
                               const float* originals, int32_t token, double log_z) {
  int32_t low = p.edit_begin, high = p.edit_end;
  while (low < high) {
    const int32_t mid = low + (high - low) / 2;
    if (edits[mid].token_id < token) {
      low = mid + 1;
    } else {
      high = mid;
    }
  }
  const bool edited = low < p.edit_end && edits[low].token_id == token;
  const float logit = edited ? originals[low] : row[token];
  return static_cast<float>(logit - log_z);
}

__global__ void __cluster_dims__(sampling::kClusterSize, 1, 1) __launch_bounds__(kThreads, 1)
    SampleRowsKernel(float* logits, int64_t vocab, const SampleRowParams* params,
                     const LogitEdit* edits, const float* bias_values, float* originals,
                     const uint32_t* allowed_masks, SampleRowOutput* outputs) {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  SampleScratch& s = *reinterpret_cast<SampleScratch*>(shared_bytes);
  const int64_t request = blockIdx.x / sampling::kClusterSize;
  const SampleRowParams p = params[request];
  const Slice slice = sampling::SliceOf(logits + p.logits_row * vocab, static_cast<int32_t>(vocab));
  SampleRowOutput& out = outputs[request];
  double log_z = 0.0;
  if (p.num_logprobs >= 0) log_z = TopLogprobs(slice, p.num_logprobs, s, out);
  ApplyEdits(slice, p, edits, bias_values, originals);
  ApplyAllowedTokens(slice, p, allowed_masks);
  int32_t token;
  if (p.temperature <= 0.0f) {
    float max;
    sampling::ClusterArgmax(slice, Identity{}, s.argmax, &max, &token);
  } else {
    token = DrawToken(slice, p, s);
  }
  cg::cluster_group cluster = cg::this_cluster();
  if (threadIdx.x == 0) {
    if (cluster.block_rank() == 0) {
      out.token_id = token;
      if (p.num_logprobs < 0) out.num_top = 0;
    }
    // The token's own CTA holds its logit before the edits.
    if (p.num_logprobs >= 0 && token >= slice.begin && token < slice.end) {
      out.chosen_logprob = ChosenLogprob(slice.row, p, edits, originals, token, log_z);
    }
  }
  cluster.sync();  // no CTA leaves while another may still read its shared memory
}

}  // namespace

void LaunchSampleRows(float* logits, int64_t vocab, const SampleRowParams* params, int64_t num_rows,
                      const LogitEdit* edits, const float* bias_values, float* originals,
                      const uint32_t* allowed_masks, SampleRowOutput* outputs,
                      cudaStream_t stream) {
  if (num_rows <= 0) return;
  constexpr int kSharedBytes = sizeof(SampleScratch);  // over the 48 KiB default: opt in once
  static const cudaError_t opt_in = cudaFuncSetAttribute(
      SampleRowsKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes);
  MKSERVE_CUDA_CHECK(opt_in);
  const auto num_ctas = static_cast<unsigned>(num_rows * sampling::kClusterSize);
  SampleRowsKernel<<<num_ctas, kThreads, kSharedBytes, stream>>>(
      logits, vocab, params, edits, bias_values, originals, allowed_masks, outputs);
  MKSERVE_CUDA_CHECK_LAUNCH();
}

}  // namespace mkserve::cuda
