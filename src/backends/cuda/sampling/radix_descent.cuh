// Radix descent for the GPU sampler: the shortest prefix of a row's members, in (value desc, id
// asc) order, whose count or probability mass reaches a goal (top-k, top-p, the draw's inverse
// CDF, the top logprobs). Three histogram passes over the 32-bit order key (11, 11, 10 bits) find
// the key of the prefix's last member; ties on that key share one probability, so how many of
// them the prefix takes is arithmetic, and which ids they are is one ordered count over the row.
// Counts and masses are integers, so every histogram is exact and independent of thread timing.
// Each CTA of the row's team fills its slice's histogram; the team's MergeBins gives every CTA
// the sum of all ranks' bins, so all of them take the same decisions. A descent over the prefix
// the previous one found (the draw after top-p) takes its first level from that descent's kept
// level-0 bins instead of a pass over the row, the pass with an exp and two atomics an entry.
#pragma once

#include "backends/cuda/sampling/row_scan.cuh"
#include "backends/cuda/sampling/sample_rows.h"

namespace mkserve::cuda::sampling {

inline constexpr int kNumLevels = 3;
// Digit widths of the three levels, high bits first: 11 + 11 + 10 = the 32-bit key.
__host__ __device__ constexpr int LevelBits(int level) { return level < 2 ? 11 : 10; }
inline constexpr int kMaxBins = 1 << 11;
// Consecutive bins per thread; every thread scans the same number.
template <class Team>
inline constexpr int kBinsPerThread = kMaxBins / Team::kThreads;

// The prefix the descent looks for: the shortest non-empty one that reaches the goal.
struct Goal {
  enum Kind { kCount, kMassFraction, kMassAbove };
  Kind kind = kCount;
  uint32_t count = 0;     // kCount: holds `count` members
  double fraction = 0.0;  // kMassFraction: mass / all >= fraction (top-p)
  double uniform = 0.0;   // kMassAbove: uniform * all < mass (the draw)

  __device__ bool Reached(const Totals& prefix, const Totals& all) const {
    if (prefix.count == 0) return false;
    if (kind == kCount) return prefix.count >= count;
    const double mass = static_cast<double>(prefix.mass);
    if (kind == kMassFraction) return mass / static_cast<double>(all.mass) >= fraction;
    return uniform * static_cast<double>(all.mass) < mass;
  }
};

struct DescentScratch {
  uint32_t counts[kMaxBins];  // this CTA's slice
  unsigned long long masses[kMaxBins];
  uint32_t total_counts[kMaxBins];  // the whole row
  unsigned long long total_masses[kMaxBins];
  uint32_t level0_counts[kMaxBins];  // the last descent's level-0 totals, for the next one
  unsigned long long level0_masses[kMaxBins];
  ScanScratch scan;
  int32_t found_digit;
  Totals found_above;
  int32_t located_id;  // this CTA's find, -1 if none
  uint32_t cta_count;  // this CTA's matches in LocateTiedId
};

struct Descent {
  bool found = false;       // false: even all members miss the goal
  uint32_t key = 0;         // order key of the prefix's last member
  uint32_t num_ties = 0;    // members with that key
  uint32_t ties_taken = 0;  // of which the prefix holds the lowest-id ones (1..num_ties)
  Totals prefix;            // what the prefix holds
  Totals all;               // what all members hold
  int32_t digit0 = -1;      // the level-0 digit of `key`
  Totals above0;            // what the level-0 bins above digit0 hold
};

// Row context for a descent: this CTA's slice, how a logit becomes the sampled value, and which
// entries are members (member(x, key, id)).
template <typename ValueFn, typename MemberFn>
struct Members {
  Slice slice;
  ValueFn value;
  MemberFn member;
  float max;  // the row's highest value: probabilities are exp(x - max)
};

// Adds `mass` to a bin's 64-bit sum in shared memory with 32-bit atomics. The 64-bit atomicAdd
// compiles to a compare-and-swap loop there (ATOMS.CAST.SPIN.64) that spins while lanes hit the
// same bin, as a row's level 0 does (few bins: the logits' exponents); this took a 64-row sampler
// kernel at temperature 0.7 from 0.77 to 0.56 ms on an H100. The low word's add returns the old
// word, and a wrap carries into the high word, whose add is skipped when it has nothing to add
// (masses below 2^32, most of a row). The sum is exact in any order: the wraps number
// floor(sum of the low words / 2^32).
__device__ inline void AddMass(unsigned long long& sum, unsigned long long mass) {
  uint32_t* words = reinterpret_cast<uint32_t*>(&sum);  // little-endian: low word first
  const uint32_t low = static_cast<uint32_t>(mass);
  const uint32_t old = atomicAdd(&words[0], low);
  const uint32_t high = static_cast<uint32_t>(mass >> 32) + (old + low < old ? 1u : 0u);
  if (high != 0) atomicAdd(&words[1], high);
}

template <bool kWithMass, class Team, typename ValueFn, typename MemberFn>
__device__ void FillHistogram(Team& team, const Members<ValueFn, MemberFn>& m, uint32_t prefix,
                              uint32_t mask, int shift, uint32_t digit_mask, DescentScratch& s) {
  static_assert(kMaxBins % Team::kThreads == 0, "every thread scans the same number of bins");
  Team::Sync();  // the bins may still be read by the previous level
  for (int b = threadIdx.x; b < kMaxBins; b += Team::kThreads) {
    s.counts[b] = 0;
    s.masses[b] = 0;
  }
  if (threadIdx.x == 0) s.found_digit = -1;
  Team::Sync();
  const double one = static_cast<double>(1ull << kMassFractionBits);
  ForEachInSlice<Team>(m.slice, [&](int32_t i, float l) {
    const float x = m.value(l);
    const uint32_t key = OrderKey(x);
    if ((key & mask) != prefix || !m.member(x, key, i)) return;
    const uint32_t digit = (key >> shift) & digit_mask;
    atomicAdd(&s.counts[digit], 1u);
    if (kWithMass) AddMass(s.masses[digit], FixedProbability(x, m.max, one));
  });
  team.MergeBins(s);  // total_counts / total_masses: every rank's bins summed
}

// Totals of every bin (every thread gets them).
template <class Team>
__device__ inline Totals SumBins(DescentScratch& s) {
  Totals mine, total;
  for (int j = 0; j < kBinsPerThread<Team>; ++j) {
    const int b = static_cast<int>(threadIdx.x) * kBinsPerThread<Team> + j;
    mine = mine + Totals{s.total_counts[b], s.total_masses[b]};
  }
  BlockExclusiveScan<Team>(mine, s.scan, &total);
  return total;
}

// The digit whose bin first makes `above` + the higher bins reach the goal; `above` becomes the
// totals before that bin. Bins are walked from the highest digit down, each thread taking
// kBinsPerThread consecutive ones.
template <class Team>
__device__ inline int32_t FindCrossing(DescentScratch& s, int num_bins, const Goal& goal,
                                       const Totals& all, Totals* above) {
  constexpr int kBins = kBinsPerThread<Team>;
  const int first = num_bins - 1 - static_cast<int>(threadIdx.x) * kBins;
  auto bin = [&](int j) {
    const int digit = first - j;
    return digit >= 0 ? Totals{s.total_counts[digit], s.total_masses[digit]} : Totals{};
  };
  Totals mine, total;
  for (int j = 0; j < kBins; ++j) mine = mine + bin(j);
  Totals before = *above + BlockExclusiveScan<Team>(mine, s.scan, &total);
  for (int j = 0; j < kBins; ++j) {
    const Totals after = before + bin(j);
    if (first - j >= 0 && !goal.Reached(before, all) && goal.Reached(after, all)) {
      s.found_digit = first - j;
      s.found_above = before;
    }
    before = after;
  }
  Team::Sync();
  *above = s.found_above;
  return s.found_digit;
}

// How many of `num_ties` equal members (each `tie`) the prefix after `above` must take.
__device__ inline uint32_t TiesTaken(const Goal& goal, const Totals& above, const Totals& all,
                                     uint32_t num_ties, Totals tie) {
  uint32_t low = 1, high = num_ties;  // the goal is reached at high
  while (low < high) {
    const uint32_t mid = low + (high - low) / 2;
    const Totals taken{mid, tie.mass * mid};
    if (goal.Reached(above + taken, all)) {
      high = mid;
    } else {
      low = mid + 1;
    }
  }
  return low;
}

// Level 0's totals without a pass: the members are those of `from` (the last descent over this
// scratch, with masses) cut to its prefix. Bins above the prefix's digit keep every member,
// bins below keep none, and the prefix's own bin keeps what the prefix holds past the higher
// bins. Every descent with masses keeps its level-0 histogram for the next one.
template <class Team>
__device__ inline void Level0Totals(const Descent* from, DescentScratch& s) {
  Team::Sync();  // the bins may still be read by the previous level
  for (int b = threadIdx.x; b < kMaxBins; b += Team::kThreads) {
    Totals t{s.total_counts[b], s.total_masses[b]};
    if (from != nullptr) {
      t = b > from->digit0    ? Totals{s.level0_counts[b], s.level0_masses[b]}
          : b == from->digit0 ? from->prefix - from->above0
                              : Totals{};
      s.total_counts[b] = t.count;
      s.total_masses[b] = t.mass;
    }
    s.level0_counts[b] = t.count;
    s.level0_masses[b] = t.mass;
  }
  if (threadIdx.x == 0) s.found_digit = -1;
  Team::Sync();
}

// `narrowed_from` (with masses only): null, or the last descent over `s` (with masses, found),
// whose prefix `m`'s members are (its members cut to it); then level 0 needs no pass.
template <bool kWithMass, class Team, typename ValueFn, typename MemberFn>
__device__ Descent Descend(Team& team, const Members<ValueFn, MemberFn>& m, const Goal& goal,
                           DescentScratch& s, const Descent* narrowed_from = nullptr) {
  const Descent* from = kWithMass ? narrowed_from : nullptr;
  Descent d;
  Totals above;
  uint32_t prefix = 0, mask = 0;
  int shift = 32, digit = 0;
  for (int level = 0; level < kNumLevels; ++level) {
    shift -= LevelBits(level);
    const uint32_t digit_mask = (1u << LevelBits(level)) - 1;
    if (level > 0 || from == nullptr) {
      FillHistogram<kWithMass>(team, m, prefix, mask, shift, digit_mask, s);
    }
    if (level == 0) {
      if (kWithMass) Level0Totals<Team>(from, s);  // a count-only descent keeps nothing
      d.all = SumBins<Team>(s);
      if (!goal.Reached(d.all, d.all)) return d;
    }
    digit = FindCrossing<Team>(s, 1 << LevelBits(level), goal, d.all, &above);
    if (digit < 0) return d;  // defensive: a monotone goal always crosses in some bin
    if (level == 0) {
      d.digit0 = digit;
      d.above0 = above;
    }
    prefix |= static_cast<uint32_t>(digit) << shift;
    mask |= digit_mask << shift;
  }
  d.found = true;
  d.key = prefix;
  d.num_ties = s.total_counts[digit];
  const Totals tie{1, s.total_masses[digit] / d.num_ties};  // equal keys: equal probabilities
  d.ties_taken = TiesTaken(goal, above, d.all, d.num_ties, tie);
  d.prefix = above + Totals{d.ties_taken, tie.mass * d.ties_taken};
  return d;
}

// The id of the `rank`-th (1-based) member with order key `key`, counting ids upwards: each
// thread counts its own contiguous run of ids, scans order the runs within the CTA and the CTAs
// within the team, and the thread holding the rank walks its run.
template <class Team, typename ValueFn, typename MemberFn>
__device__ int32_t LocateTiedId(Team& team, const Members<ValueFn, MemberFn>& m, uint32_t key,
                                uint32_t rank, DescentScratch& s) {
  constexpr int kThreads = Team::kThreads;
  const Slice& slice = m.slice;
  const int32_t per_thread = (slice.end - slice.begin + kThreads - 1) / kThreads;
  const int32_t begin =
      min(slice.end, slice.begin + static_cast<int32_t>(threadIdx.x) * per_thread);
  const int32_t end = min(slice.end, begin + per_thread);
  auto matches = [&](int32_t i) {
    const float x = m.value(slice.row[i]);
    return OrderKey(x) == key && m.member(x, key, i);
  };
  uint32_t count = 0;
  for (int32_t i = begin; i < end; ++i) count += matches(i) ? 1 : 0;
  Team::Sync();  // every thread has read the previous call's answer
  if (threadIdx.x == 0) s.located_id = -1;
  Totals cta;
  uint32_t before = BlockExclusiveScan<Team>({count, 0}, s.scan, &cta).count;
  if (threadIdx.x == 0) s.cta_count = cta.count;
  before += team.CountBelow(s.cta_count);  // the lower ranks' matches
  if (before < rank && rank <= before + count) {
    uint32_t seen = before;
    for (int32_t i = begin; i < end; ++i) {
      if (matches(i) && ++seen == rank) {
        s.located_id = i;
        break;
      }
    }
  }
  return team.MaxAcross(s.located_id);
}

// The prefix as a Cut: ties past the last taken one are left out only when some are.
template <class Team, typename ValueFn, typename MemberFn>
__device__ Cut CutOf(Team& team, const Members<ValueFn, MemberFn>& m, const Descent& d,
                     DescentScratch& s) {
  if (d.ties_taken == d.num_ties) return Cut{d.key, INT_MAX};
  return Cut{d.key, LocateTiedId(team, m, d.key, d.ties_taken, s)};
}

}  // namespace mkserve::cuda::sampling
