// kSample: sampling inside the step. A row's team is arg[kArgTeamSize] CTAs on distinct SMs, each
// the last task of its list, that start once the whole LM head is done. Each member takes one
// slice of the row and runs the GPU sampler's SampleRow (backends/cuda/sampling/sample_row.cuh)
// with a GridTeam: where the sampler's own kernel meets through a cluster's shared memory, a
// GridTeam meets through the row's exchange in global memory (step_params.h): a member writes its
// slot (or adds its histogram bins), arrives on the meeting's counter and waits for the others.
// Integer sums and fixed orders keep the token the GpuSampler's for the same row and parameters,
// whatever the team size. A row the step does not sample gets only its argmax. Rank 0 also
// writes the row's token to picks_out (device memory), for a step that follows before the host
// has read this one.
#pragma once

#include "backends/cuda/sampling/sample_row.cuh"
#include "megakernel/device/sync.cuh"

namespace mkserve::megakernel {

namespace sampling = cuda::sampling;
static_assert(sampling::kMaxBins == kSampleBins, "the exchange holds the descent's bins");
static_assert(kMaxSampleTeam <= kWorkerThreads, "a worker thread reads each member's slot");

struct TeamScratch {
  uint32_t words[sampling::kMaxWarps];
  uint32_t result;
  sampling::ScanScratch scan;
};

struct SampleSmem {
  sampling::SampleScratch sample;
  TeamScratch team;
};

// The worker threads' sum (add) or maximum of `value`, in every worker thread.
template <bool kMax>
__device__ inline uint32_t WorkerReduce(uint32_t value, TeamScratch& t) {
  value = kMax ? __reduce_max_sync(0xffffffffu, value) : __reduce_add_sync(0xffffffffu, value);
  WorkerSync();  // the scratch may still be read by a previous call
  if (threadIdx.x % 32 == 0) t.words[threadIdx.x / 32] = value;
  WorkerSync();
  if (threadIdx.x == 0) {
    uint32_t r = t.words[0];
    for (int w = 1; w < kWorkerWarps; ++w) r = kMax ? max(r, t.words[w]) : r + t.words[w];
    t.result = r;
  }
  WorkerSync();
  return t.result;
}

struct GridTeam {
  static constexpr int kThreads = kWorkerThreads;
  static __device__ void Sync() { WorkerSync(); }

  int rank, size;
  const StepParams& p;
  SampleBarriers& barriers;
  SampleHistograms& histograms;
  SampleSlots& exchange;
  TeamScratch& t;
  int round = 0, merges = 0;
  bool abandoned = false;  // thread 0: a wait gave up (watchdog); the results no longer matter

  // Every member's writes before the meeting are visible to every member after it. A team makes
  // at most kSampleRounds meetings (step_params.h); past that a member reports an abort rather
  // than use a counter of another row.
  __device__ void Meet() {
    Sync();
    if (threadIdx.x == 0 && !abandoned) {
      if (round >= kSampleRounds) {
        atomicExch(p.aborted, 1u);
        abandoned = true;
      } else {
        uint32_t* arrivals = barriers.arrivals + round;
        FenceAcqRel();  // release this member's writes (every worker's, through the barrier)
        atomicAdd(arrivals, 1u);
        abandoned = !SpinUntilAt(p, arrivals, static_cast<uint32_t>(size));
      }
    }
    Sync();
    ++round;
  }

  // This member's slot of the meeting about to happen (thread 0 writes it).
  __device__ SampleSlot& MySlot() { return exchange.slots[min(round, kSampleRounds - 1)][rank]; }
  // Member m's slot of the meeting that just happened.
  __device__ SampleSlot SlotOf(int m) const {
    const SampleSlot* at = &exchange.slots[min(round - 1, kSampleRounds - 1)][m];
    return SampleSlot{__ldcg(&at->low), __ldcg(&at->high)};
  }

  __device__ void ArgmaxAcross(sampling::ArgmaxScratch& s, float* best, int32_t* best_id) {
    if (threadIdx.x == 0) {
      MySlot() = {__float_as_uint(s.cta_value), static_cast<uint32_t>(s.cta_id)};
    }
    Meet();
    float value = -INFINITY;
    int32_t id = INT_MAX;
    if (threadIdx.x < size) {
      const SampleSlot slot = SlotOf(threadIdx.x);
      value = __uint_as_float(static_cast<uint32_t>(slot.low));
      id = static_cast<int32_t>(slot.high);
    }
    sampling::CtaArgmax<GridTeam>(value, id, s);
    *best = value;
    *best_id = id;
  }

  // The members' sums in member order (fixed for a team size).
  __device__ double SumAcross(sampling::SumScratch& s) {
    if (threadIdx.x == 0) {
      MySlot() = {static_cast<unsigned long long>(__double_as_longlong(s.cta_sum)), 0};
    }
    Meet();
    double value = 0.0;
    if (threadIdx.x < size)
      value = __longlong_as_double(static_cast<long long>(SlotOf(threadIdx.x).low));
    return sampling::CtaSumDouble<GridTeam>(value, s);
  }

  // Each member adds its nonzero bins into the meeting's histogram, then reads the sums.
  __device__ void MergeBins(sampling::DescentScratch& s) {
    const int h = min(merges, kSampleHistograms - 1);
    if (merges++ >= kSampleHistograms && threadIdx.x == 0) {
      atomicExch(p.aborted, 1u);  // cannot happen: a descent merges 3 times, a row 15 at most
    }
    Sync();  // the CTA's bins are complete
    for (int b = threadIdx.x; b < sampling::kMaxBins; b += kThreads) {
      if (s.counts[b] != 0) atomicAdd(&histograms.counts[h][b], s.counts[b]);
      if (s.masses[b] != 0) atomicAdd(&histograms.masses[h][b], s.masses[b]);
    }
    Meet();
    for (int b = threadIdx.x; b < sampling::kMaxBins; b += kThreads) {
      s.total_counts[b] = __ldcg(&histograms.counts[h][b]);
      s.total_masses[b] = __ldcg(&histograms.masses[h][b]);
    }
    Sync();
  }

  __device__ uint32_t CountBelow(uint32_t& mine) {
    Sync();
    if (threadIdx.x == 0) MySlot() = {mine, 0};
    Meet();
    const uint32_t count = threadIdx.x < rank ? static_cast<uint32_t>(SlotOf(threadIdx.x).low) : 0u;
    return WorkerReduce<false>(count, t);
  }

  __device__ int32_t MaxAcross(int32_t& mine) {
    Sync();  // `mine` may have been written by any worker
    if (threadIdx.x == 0) MySlot() = {static_cast<uint32_t>(mine), 0};
    Meet();
    // Ids and -1 (none): as unsigned after adding 1, the maximum is the same.
    const uint32_t value =
        threadIdx.x < size ? static_cast<uint32_t>(SlotOf(threadIdx.x).low) + 1u : 0u;
    return static_cast<int32_t>(WorkerReduce<true>(value, t)) - 1;
  }

  // Rank 0 gets every member's entries in member order, at most `limit`, in `all`.
  __device__ void GatherTop(cuda::TopEntries& mine, int32_t limit, cuda::TopEntries& all) {
    Sync();  // `mine` is complete
    cuda::TopEntries& out = exchange.top[rank];
    const int32_t num = min(mine.num, cuda::kGpuMaxTopLogprobs);
    if (threadIdx.x == 0) out.num = num;
    if (threadIdx.x < num) {
      out.ids[threadIdx.x] = mine.ids[threadIdx.x];
      out.logits[threadIdx.x] = mine.logits[threadIdx.x];
    }
    Meet();
    if (rank != 0) return;
    const cuda::TopEntries& in = exchange.top[min(static_cast<int>(threadIdx.x), size - 1)];
    const uint32_t count =
        threadIdx.x < size ? static_cast<uint32_t>(min(__ldcg(&in.num), cuda::kGpuMaxTopLogprobs))
                           : 0u;
    sampling::Totals total;
    const uint32_t before =
        sampling::BlockExclusiveScan<GridTeam>({count, 0}, t.scan, &total).count;
    for (uint32_t i = 0; i < count && before + i < static_cast<uint32_t>(limit); ++i) {
      all.ids[before + i] = __ldcg(&in.ids[i]);
      all.logits[before + i] = __ldcg(&in.logits[i]);
    }
    if (threadIdx.x == 0) {
      all.num = static_cast<int32_t>(min(total.count, static_cast<uint32_t>(max(limit, 0))));
    }
    Sync();
  }

  __device__ void Finish() {}  // nothing of a member's shared memory is read by another
};

// One member of row d.row_begin's team.
__device__ __noinline__ void OpSample(const StepParams& p, const TaskDescriptor& d, SampleSmem& s) {
  const int row = static_cast<int>(d.row_begin);
  float* logits = p.logits + static_cast<int64_t>(row) * p.vocab;
  GridTeam team{static_cast<int>(d.arg[kArgTeamRank]),
                static_cast<int>(d.arg[kArgTeamSize]),
                p,
                p.sample_barriers[row],
                p.sample_histograms[row],
                p.sample_slots[row],
                s.team};
  const int32_t request = p.sample_request != nullptr ? p.sample_request[row] : -1;
  if (request < 0) {
    const sampling::Slice slice = sampling::SliceOf(logits, p.vocab, team.rank, team.size);
    float max;
    int32_t id;
    sampling::RowArgmax(team, slice, sampling::Identity{}, s.sample.argmax, &max, &id);
    if (threadIdx.x == 0 && team.rank == 0) p.argmax_out[row] = p.picks_out[row] = id;
    return;
  }
  const cuda::SampleRowParams params = p.staged.rows[request];
  const int32_t token =
      sampling::SampleRow(team, logits, p.vocab, params, request, p.staged, s.sample);
  if (threadIdx.x == 0 && team.rank == 0) p.picks_out[row] = token;
}

}  // namespace mkserve::megakernel
