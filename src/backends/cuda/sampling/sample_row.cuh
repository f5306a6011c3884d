// One row of the GPU sampler, run by every CTA of the row's team (team.cuh): engine/sampler.cpp's
// steps in its order. Top logprobs on the unchanged row, then the edits (penalties, bias,
// min_tokens masking) and the allowed-token mask in place, then greedy argmax or temperature ->
// top-k -> top-p -> min-p -> the inverse-CDF draw with the host's uniform, each a radix descent
// (radix_descent.cuh) over the row in global memory. Each CTA reads and writes only its own slice
// of the row. The sampler's kernel (sample_rows.cu) and the decode megakernel's kSample both run
// SampleRow, so their tokens agree by construction.
#pragma once

#include "backends/cuda/sampling/allowed_tokens.cuh"
#include "backends/cuda/sampling/radix_descent.cuh"
#include "backends/cuda/sampling/sample_rows.h"

namespace mkserve::cuda::sampling {

struct SampleScratch {
  DescentScratch descent;
  ArgmaxScratch argmax;
  SumScratch sums;
  TopEntries gathered;  // this CTA's share of the top logprobs
  TopEntries all;       // rank 0: every rank's, before sorting
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

// log Z of the unchanged row, and its top entries into `out` (by rank 0), sorted (logit desc, id
// asc) by a selection sort of <= kGpuMaxTopLogprobs entries, so the order never depends on
// timing.
template <class Team>
__device__ double TopLogprobs(Team& team, const Slice& slice, int32_t k, SampleScratch& s,
                              SampleRowOutput& out) {
  float max;
  int32_t max_id;
  RowArgmax(team, slice, Identity{}, s.argmax, &max, &max_id);
  double sum = 0.0;
  ForEachInSlice<Team>(slice, [&](int32_t, float l) {
    sum += exp(static_cast<double>(l) - static_cast<double>(max));
  });
  const double log_z = static_cast<double>(max) + log(RowSumDouble(team, sum, s.sums));
  const int32_t num_top = min(k, slice.vocab);
  if (threadIdx.x == 0) s.gathered.num = 0;
  if (num_top > 0) {
    auto members = MakeMembers(slice, Identity{}, Everyone{}, max);
    const Descent d = Descend<false>(team, members,
                                     Goal{Goal::kCount, static_cast<uint32_t>(num_top)}, s.descent);
    const Cut cut = CutOf(team, members, d, s.descent);
    ForEachInSlice<Team>(slice, [&](int32_t i, float l) {
      if (!cut.Holds(OrderKey(l), i)) return;
      const int32_t slot = atomicAdd(&s.gathered.num, 1);
      if (slot >= kGpuMaxTopLogprobs) return;  // defensive: the cut holds num_top entries
      s.gathered.ids[slot] = i;
      s.gathered.logits[slot] = l;
    });
  }
  team.GatherTop(s.gathered, num_top, s.all);
  if (threadIdx.x == 0 && team.rank == 0) {
    const int32_t n = s.all.num;
    for (int32_t a = 0; a < n; ++a) {
      int32_t best = a;
      for (int32_t b = a + 1; b < n; ++b) {
        if (Better(s.all.logits[b], s.all.ids[b], s.all.logits[best], s.all.ids[best])) best = b;
      }
      out.top_ids[a] = s.all.ids[best];
      out.top_logprobs[a] = static_cast<float>(s.all.logits[best] - log_z);
      s.all.ids[best] = s.all.ids[a];
      s.all.logits[best] = s.all.logits[a];
    }
    out.num_top = n;
  }
  return log_z;
}

// Penalties, bias and masking in the CPU sampler's order, one thread per edited token; each CTA
// edits the tokens of its own slice.
template <class Team>
__device__ void ApplyEdits(const Slice& slice, const SampleRowParams& p, const LogitEdit* edits,
                           const float* bias_values, float* originals) {
  float* row = slice.row;
  for (int32_t e = p.edit_begin + threadIdx.x; e < p.edit_end; e += Team::kThreads) {
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
  Team::Sync();  // the slice's writes are visible to the whole CTA after this
}

// Temperature -> top-k -> top-p -> min-p -> draw; returns the token. The draw's members are the
// top-p prefix, so its descent starts from top-p's level-0 bins (`narrowed`, radix_descent.cuh)
// instead of a pass with an exp an entry; top-k counts only (its members then cost top-p no
// exp), and min-p's floor changes the members, so a draw after it makes its own pass.
template <class Team>
__device__ int32_t DrawToken(Team& team, const Slice& slice, const SampleRowParams& p,
                             SampleScratch& s) {
  const Scaled value{p.temperature};
  float max;
  int32_t max_id;
  RowArgmax(team, slice, value, s.argmax, &max, &max_id);
  if (max == -INFINITY) return max_id;  // everything masked: the lowest id
  InCutAboveMinP member{Cut{}, false, 0.0, 0.0, max};
  if (p.top_k > 0) {
    auto members = MakeMembers(slice, value, member, max);
    const Descent d = Descend<false>(team, members,
                                     Goal{Goal::kCount, static_cast<uint32_t>(p.top_k)}, s.descent);
    if (d.found) member.cut = CutOf(team, members, d, s.descent);
  }
  Descent top_p;
  const Descent* narrowed = nullptr;  // the descent whose prefix the members are now
  if (p.top_p < 1.0f) {
    auto members = MakeMembers(slice, value, member, max);
    Goal goal{Goal::kMassFraction};
    goal.fraction = static_cast<double>(p.top_p);
    top_p = Descend<true>(team, members, goal, s.descent);
    // CutOf takes every tie past the top-k cut's key when top-p takes all tied members.
    if (top_p.found) {
      member.cut = member.cut.Narrower(CutOf(team, members, top_p, s.descent));
      narrowed = &top_p;
    }
  }
  if (p.min_p > 0.0f) {
    member.use_min_p = true;
    member.floor = static_cast<double>(p.min_p);
    member.log_floor = log(member.floor);
    narrowed = nullptr;
  }
  auto members = MakeMembers(slice, value, member, max);
  Goal goal{Goal::kMassAbove};
  goal.uniform = p.uniform;
  Descent d = Descend<true>(team, members, goal, s.descent, narrowed);
  if (d.all.count == 0) return max_id;  // min-p above 1 keeps only the first token
  if (!d.found) {  // rounding put u * mass at the very end: the last kept token
    d = Descend<false>(team, members, Goal{Goal::kCount, d.all.count}, s.descent);
    if (!d.found) return max_id;
  }
  return LocateTiedId(team, members, d.key, d.ties_taken, s.descent);
}

// The chosen token's logprob from its logit before the edits (edits are sorted by token id).
__device__ inline float ChosenLogprob(const float* row, const SampleRowParams& p,
                                      const LogitEdit* edits, const float* originals, int32_t token,
                                      double log_z) {
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

// Samples `row` (vocab logits, changed in place) as staged request `request` (parameters `p`)
// into its output, as this CTA's part of the team. Rank 0 writes the token and the top logprobs;
// the CTA whose slice holds the token writes its logprob. Returns the token (in thread 0).
template <class Team>
__device__ int32_t SampleRow(Team& team, float* row, int32_t vocab, const SampleRowParams& p,
                             int64_t request, const StagedSamples& in, SampleScratch& s) {
  SampleRowOutput& out = in.outputs[request];
  const Slice slice = SliceOf(row, vocab, team.rank, team.size);
  double log_z = 0.0;
  if (p.num_logprobs >= 0) log_z = TopLogprobs(team, slice, p.num_logprobs, s, out);
  ApplyEdits<Team>(slice, p, in.edits, in.bias_values, in.originals);
  ApplyAllowedTokens<Team>(slice, p, in.allowed_masks);
  int32_t token;
  if (p.temperature <= 0.0f) {
    float max;
    RowArgmax(team, slice, Identity{}, s.argmax, &max, &token);
  } else {
    token = DrawToken(team, slice, p, s);
  }
  if (threadIdx.x == 0) {
    if (team.rank == 0) {
      out.token_id = token;
      if (p.num_logprobs < 0) out.num_top = 0;
    }
    // The token's own CTA holds its logit before the edits.
    if (p.num_logprobs >= 0 && token >= slice.begin && token < slice.end) {
      out.chosen_logprob = ChosenLogprob(slice.row, p, in.edits, in.originals, token, log_z);
    }
  }
  team.Finish();
  return token;
}

}  // namespace mkserve::cuda::sampling
