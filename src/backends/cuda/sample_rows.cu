// The GPU sampler's kernel: one CTA per row runs engine/sampler.cpp's steps in its order. Top
// logprobs on the unchanged row, then the edits (penalties, bias, min_tokens masking) in place,
// then greedy argmax or temperature -> top-k -> top-p -> min-p -> the inverse-CDF draw with the
// host's uniform, each a radix descent (radix_descent.cuh) over the row in global memory.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/radix_descent.cuh"
#include "backends/cuda/sample_rows.h"

namespace mkserve::cuda {
namespace {

using sampling::Cut;
using sampling::Descent;
using sampling::Goal;
using sampling::kThreads;
using sampling::Members;

struct SampleScratch {
  sampling::DescentScratch descent;
  sampling::ArgmaxScratch argmax;
  double sums[sampling::kNumWarps];
  int32_t num_gathered;
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
__device__ Members<ValueFn, MemberFn> MakeMembers(const float* row, int32_t vocab, ValueFn value,
                                                  MemberFn member, float max) {
  return Members<ValueFn, MemberFn>{row, vocab, value, member, max};
}

// log Z of the unchanged row, and its top entries sorted (logit desc, id asc) into `out`.
__device__ double TopLogprobs(const float* row, int32_t vocab, int32_t k, SampleScratch& s,
                              SampleRowOutput& out) {
  float max;
  int32_t max_id;
  sampling::BlockArgmax(row, vocab, Identity{}, s.argmax, &max, &max_id);
  double sum = 0.0;
  sampling::ForEachInRow(row, vocab, [&](int32_t, float l) {
    sum += exp(static_cast<double>(l) - static_cast<double>(max));
  });
  const double log_z = static_cast<double>(max) + log(sampling::BlockSumDouble(sum, s.sums));
  const int32_t num_top = min(k, vocab);
  if (threadIdx.x == 0) s.num_gathered = 0;
  if (num_top > 0) {
    auto members = MakeMembers(row, vocab, Identity{}, Everyone{}, max);
    const Descent d = sampling::Descend<false>(
        members, Goal{Goal::kCount, static_cast<uint32_t>(num_top)}, s.descent);
    const Cut cut = sampling::CutOf(members, d, s.descent);
    sampling::ForEachInRow(row, vocab, [&](int32_t i, float l) {
      if (!cut.Holds(sampling::OrderKey(l), i)) return;
      const int32_t slot = atomicAdd(&s.num_gathered, 1);
      if (slot >= kGpuMaxTopLogprobs) return;  // defensive: the cut holds num_top entries
      s.gathered_ids[slot] = i;
      s.gathered_logits[slot] = l;
    });
  }
  __syncthreads();
  if (threadIdx.x == 0) {  // insertion sort of <= kGpuMaxTopLogprobs entries: order, not timing
    for (int32_t a = 0; a < num_top; ++a) {
      int32_t best = a;
      for (int32_t b = a + 1; b < num_top; ++b) {
        if (sampling::Better(s.gathered_logits[b], s.gathered_ids[b], s.gathered_logits[best],
                             s.gathered_ids[best])) {
          best = b;
        }
      }
      out.top_ids[a] = s.gathered_ids[best];
      out.top_logprobs[a] = static_cast<float>(s.gathered_logits[best] - log_z);
      s.gathered_ids[best] = s.gathered_ids[a];
      s.gathered_logits[best] = s.gathered_logits[a];
    }
    out.num_top = num_top;
  }
  return log_z;
}

// Penalties, bias and masking in the CPU sampler's order, one thread per edited token.
__device__ void ApplyEdits(float* row, const SampleRowParams& p, const LogitEdit* edits,
                           const float* bias_values, float* originals) {
  for (int32_t e = p.edit_begin + threadIdx.x; e < p.edit_end; e += kThreads) {
    const LogitEdit edit = edits[e];
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
  __syncthreads();  // the row's writes are visible to the whole block after this
}

// Temperature -> top-k -> top-p -> min-p -> draw; returns the token.
__device__ int32_t DrawToken(const float* row, int32_t vocab, const SampleRowParams& p,
                             SampleScratch& s) {
  const Scaled value{p.temperature};
  float max;
  int32_t max_id;
  sampling::BlockArgmax(row, vocab, value, s.argmax, &max, &max_id);
  if (max == -INFINITY) return max_id;  // everything masked: the lowest id
  InCutAboveMinP member{Cut{}, false, 0.0, 0.0, max};
  if (p.top_k > 0) {
    auto members = MakeMembers(row, vocab, value, member, max);
    const Descent d = sampling::Descend<false>(
        members, Goal{Goal::kCount, static_cast<uint32_t>(p.top_k)}, s.descent);
    if (d.found) member.cut = sampling::CutOf(members, d, s.descent);
  }
  if (p.top_p < 1.0f) {
    auto members = MakeMembers(row, vocab, value, member, max);
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
  auto members = MakeMembers(row, vocab, value, member, max);
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

__global__ void __launch_bounds__(kThreads, 1)
    SampleRowsKernel(float* logits, int64_t vocab, const SampleRowParams* params,
                     const LogitEdit* edits, const float* bias_values, float* originals,
                     SampleRowOutput* outputs) {
  __shared__ SampleScratch s;
  const SampleRowParams p = params[blockIdx.x];
  float* row = logits + p.logits_row * vocab;
  const int32_t n = static_cast<int32_t>(vocab);
  SampleRowOutput& out = outputs[blockIdx.x];
  double log_z = 0.0;
  if (p.num_logprobs >= 0) log_z = TopLogprobs(row, n, p.num_logprobs, s, out);
  __syncthreads();  // every read of the unchanged row is done
  ApplyEdits(row, p, edits, bias_values, originals);
  int32_t token;
  if (p.temperature <= 0.0f) {
    float max;
    sampling::BlockArgmax(row, n, Identity{}, s.argmax, &max, &token);
  } else {
    token = DrawToken(row, n, p, s);
  }
  if (threadIdx.x != 0) return;
  out.token_id = token;
  if (p.num_logprobs >= 0) {
    out.chosen_logprob = ChosenLogprob(row, p, edits, originals, token, log_z);
  } else {
    out.num_top = 0;
  }
}

}  // namespace

void LaunchSampleRows(float* logits, int64_t vocab, const SampleRowParams* params, int64_t num_rows,
                      const LogitEdit* edits, const float* bias_values, float* originals,
                      SampleRowOutput* outputs, cudaStream_t stream) {
  if (num_rows <= 0) return;
  SampleRowsKernel<<<static_cast<unsigned>(num_rows), kThreads, 0, stream>>>(
      logits, vocab, params, edits, bias_values, originals, outputs);
  MKSERVE_CUDA_CHECK_LAUNCH();
}

}  // namespace mkserve::cuda
