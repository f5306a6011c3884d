// Passes over one logits row for the GPU sampler. A row belongs to a team of CTAs (team.cuh: a
// cluster of the sampler's own kernel, or SMs of the decode megakernel); each CTA owns a
// contiguous slice, and partial results meet through the team's exchanges. Every combination
// uses a fixed order (threads, then team ranks) or integer sums, so a row's token depends on the
// row alone, never on the batch or the team size.
//
// Team (a template parameter throughout): kThreads (the CTA's threads that take part), Sync()
// (their barrier), rank / size, and the exchanges ArgmaxAcross, SumAcross, MergeBins,
// CountBelow, MaxAcross, GatherTop and Finish, each called by every thread of every member.
#pragma once

#include <climits>
#include <cmath>
#include <cstdint>

#include "backends/cuda/core/kernel_common.cuh"
#include "backends/cuda/sampling/sample_rows.h"

namespace mkserve::cuda::sampling {

inline constexpr int kMaxThreads = 512;  // the largest team CTA: sizes the warp scratch
inline constexpr int kMaxWarps = kMaxThreads / kWarpSize;
inline constexpr int kLoadsInFlight = 8;  // per thread per step

// Larger key = earlier in the sampling order. -0 maps onto +0: the CPU compares them equal.
__device__ inline uint32_t OrderKey(float x) {
  uint32_t bits = __float_as_uint(x);
  if (bits == 0x80000000u) bits = 0;
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

// A prefix of the order: every key above `key`, and ties on `key` with id <= last_id.
struct Cut {
  uint32_t key = 0;
  int32_t last_id = INT_MAX;
  __device__ bool Holds(uint32_t k, int32_t id) const {
    return k > key || (k == key && id <= last_id);
  }
  // The shorter of two prefixes of the same order: their intersection.
  __device__ Cut Narrower(const Cut& o) const {
    if (key != o.key) return key > o.key ? *this : o;
    return Cut{key, min(last_id, o.last_id)};
  }
};

// What a prefix holds: its size and its probability mass in units of 2^-kMassFractionBits.
struct Totals {
  uint32_t count = 0;
  unsigned long long mass = 0;
  __device__ Totals operator+(const Totals& o) const { return {count + o.count, mass + o.mass}; }
  __device__ Totals operator-(const Totals& o) const { return {count - o.count, mass - o.mass}; }
};

// This CTA's part of a row: ids [begin, end), in team-rank order.
struct Slice {
  float* row;
  int32_t vocab, begin, end;
};

__device__ inline Slice SliceOf(float* row, int32_t vocab, int rank, int size) {
  const int32_t per_cta = (vocab + size - 1) / size;
  const int32_t begin = min(vocab, rank * per_cta);
  return Slice{row, vocab, begin, min(vocab, begin + per_cta)};
}

// fn(id, logit) for every entry of the slice; the loads of one step are issued before any use.
template <class Team, typename Fn>
__device__ inline void ForEachInSlice(const Slice& slice, Fn&& fn) {
  constexpr int kThreads = Team::kThreads;
  for (int32_t base = slice.begin + threadIdx.x; base < slice.end;
       base += kThreads * kLoadsInFlight) {
    float values[kLoadsInFlight];
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u) {
      const int32_t i = base + u * kThreads;
      values[u] = i < slice.end ? slice.row[i] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u) {
      const int32_t i = base + u * kThreads;
      if (i < slice.end) fn(i, values[u]);
    }
  }
}

// Larger value first, then lower id; NaN never wins (as ArgmaxRows).
__device__ inline bool Better(float value, int32_t id, float best, int32_t best_id) {
  return value > best || (value == best && id < best_id);
}

struct ArgmaxScratch {
  float values[kMaxWarps];
  int32_t ids[kMaxWarps];
  float cta_value;
  int32_t cta_id;
};

// The best (value, id) of the CTA's threads, in every thread.
template <class Team>
__device__ inline void CtaArgmax(float& best, int32_t& best_id, ArgmaxScratch& s) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, best, offset);
    const int32_t other_id = __shfl_xor_sync(0xffffffffu, best_id, offset);
    if (Better(other, other_id, best, best_id)) best = other, best_id = other_id;
  }
  Team::Sync();  // the scratch may still be read by a previous call
  if (threadIdx.x % kWarpSize == 0) {
    s.values[threadIdx.x / kWarpSize] = best;
    s.ids[threadIdx.x / kWarpSize] = best_id;
  }
  Team::Sync();
  if (threadIdx.x == 0) {
    for (int w = 1; w < Team::kThreads / kWarpSize; ++w) {
      if (Better(s.values[w], s.ids[w], best, best_id)) best = s.values[w], best_id = s.ids[w];
    }
    s.cta_value = best;
    s.cta_id = best_id;
  }
  Team::Sync();
  best = s.cta_value;
  best_id = s.cta_id;
}

// The row's highest value(logit) and its lowest id, in every thread of the team. An all -inf
// row gives id 0, as the CPU sampler.
template <class Team, typename ValueFn>
__device__ inline void RowArgmax(Team& team, const Slice& slice, ValueFn value, ArgmaxScratch& s,
                                 float* max_value, int32_t* max_id) {
  float best = -INFINITY;
  int32_t best_id = INT_MAX;
  ForEachInSlice<Team>(slice, [&](int32_t i, float l) {
    const float x = value(l);
    if (Better(x, i, best, best_id)) best = x, best_id = i;
  });
  CtaArgmax<Team>(best, best_id, s);
  team.ArgmaxAcross(s, &best, &best_id);
  *max_value = best;
  *max_id = best_id == INT_MAX ? 0 : best_id;
}

struct SumScratch {
  double warp_sums[kMaxWarps];
  double cta_sum;
};

// Sum over the CTA's threads: lanes, then warps, each in a fixed order; every thread gets it.
template <class Team>
__device__ inline double CtaSumDouble(double value, SumScratch& s) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  }
  Team::Sync();
  if (threadIdx.x % kWarpSize == 0) s.warp_sums[threadIdx.x / kWarpSize] = value;
  Team::Sync();
  if (threadIdx.x == 0) {
    double cta = 0.0;
    for (int w = 0; w < Team::kThreads / kWarpSize; ++w) cta += s.warp_sums[w];
    s.cta_sum = cta;
  }
  Team::Sync();
  return s.cta_sum;
}

// Sum over the team: threads, warps, then ranks, each in a fixed order.
template <class Team>
__device__ inline double RowSumDouble(Team& team, double value, SumScratch& s) {
  CtaSumDouble<Team>(value, s);
  return team.SumAcross(s);
}

struct ScanScratch {
  Totals warp_totals[kMaxWarps];
};

// Exclusive prefix of `value` over the CTA's threads in thread order; `total` gets the CTA's sum.
// Integer sums, so the result does not depend on the order of additions.
template <class Team>
__device__ inline Totals BlockExclusiveScan(Totals value, ScanScratch& s, Totals* total) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  Totals inclusive = value;
  for (int offset = 1; offset < kWarpSize; offset *= 2) {
    const uint32_t count = __shfl_up_sync(0xffffffffu, inclusive.count, offset);
    const unsigned long long mass = __shfl_up_sync(0xffffffffu, inclusive.mass, offset);
    if (lane >= offset) inclusive = inclusive + Totals{count, mass};
  }
  Team::Sync();  // the scratch may still be read by a previous call
  if (lane == kWarpSize - 1) s.warp_totals[warp] = inclusive;
  Team::Sync();
  Totals before{}, sum{};
  for (int w = 0; w < Team::kThreads / kWarpSize; ++w) {
    if (w == warp) before = sum;
    sum = sum + s.warp_totals[w];
  }
  *total = sum;
  return before + inclusive - value;
}

// exp(x - max) in units of 2^-kMassFractionBits, from the double exp the CPU sampler uses. Below
// exp(-32) * 2^44 < 0.5 it rounds to 0, so the exp is skipped there (exactly the same result).
__device__ inline unsigned long long FixedProbability(float x, float max, double one) {
  const double d = static_cast<double>(x) - static_cast<double>(max);
  if (d < -32.0) return 0;
  return __double2ull_rn(exp(d) * one);
}

}  // namespace mkserve::cuda::sampling
