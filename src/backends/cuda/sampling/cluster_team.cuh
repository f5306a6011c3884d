// The sampler kernel's team: the kClusterSize CTAs of one thread block cluster, one row, meeting
// through distributed shared memory. Every exchange reads all ranks in rank order and syncs the
// cluster before (the ranks' values are written) and after (no rank overwrites a value another
// may still read).
#pragma once

#include <cooperative_groups.h>

#include "backends/cuda/sampling/radix_descent.cuh"

namespace mkserve::cuda::sampling {

namespace cg = cooperative_groups;

inline constexpr int kClusterSize = 8;  // portable cluster size: CTAs (SMs) per row

struct ClusterTeam {
  static constexpr int kThreads = 512;  // 128 registers a thread: no spills in the passes
  static __device__ void Sync() { __syncthreads(); }

  int rank = static_cast<int>(cg::this_cluster().block_rank());
  int size = kClusterSize;

  __device__ void ArgmaxAcross(ArgmaxScratch& s, float* best, int32_t* best_id) {
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    *best = -INFINITY;
    *best_id = INT_MAX;
    for (int r = 0; r < kClusterSize; ++r) {
      const ArgmaxScratch* other = cluster.map_shared_rank(&s, r);
      if (Better(other->cta_value, other->cta_id, *best, *best_id)) {
        *best = other->cta_value;
        *best_id = other->cta_id;
      }
    }
    cluster.sync();
  }

  __device__ double SumAcross(SumScratch& s) {
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    double total = 0.0;
    for (int r = 0; r < kClusterSize; ++r) total += cluster.map_shared_rank(&s, r)->cta_sum;
    cluster.sync();
    return total;
  }

  // total_counts / total_masses = every rank's counts / masses (integers: any order is exact).
  __device__ void MergeBins(DescentScratch& s) {
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    for (int b = threadIdx.x; b < kMaxBins; b += kThreads) {
      uint32_t count = 0;
      unsigned long long mass = 0;
#pragma unroll
      for (int r = 0; r < kClusterSize; ++r) {
        count += cluster.map_shared_rank(s.counts, r)[b];
        mass += cluster.map_shared_rank(s.masses, r)[b];
      }
      s.total_counts[b] = count;
      s.total_masses[b] = mass;
    }
    cluster.sync();
  }

  // The sum of `mine` over the lower ranks (thread 0 wrote it). The value stays readable until
  // the next exchange syncs the cluster again.
  __device__ uint32_t CountBelow(uint32_t& mine) {
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    uint32_t below = 0;
    for (int r = 0; r < rank; ++r) below += *cluster.map_shared_rank(&mine, r);
    return below;
  }

  __device__ int32_t MaxAcross(int32_t& mine) {
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    int32_t value = INT_MIN;
    for (int r = 0; r < kClusterSize; ++r) value = max(value, *cluster.map_shared_rank(&mine, r));
    cluster.sync();
    return value;
  }

  // Rank 0's thread 0 gets every rank's entries in rank order, at most `limit`, in `all`.
  __device__ void GatherTop(TopEntries& mine, int32_t limit, TopEntries& all) {
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    if (threadIdx.x == 0 && rank == 0) {
      int32_t n = 0;
      for (int r = 0; r < kClusterSize; ++r) {
        const TopEntries* other = cluster.map_shared_rank(&mine, r);
        for (int32_t i = 0; i < min(other->num, kGpuMaxTopLogprobs) && n < limit; ++i) {
          all.ids[n] = other->ids[i];
          all.logits[n++] = other->logits[i];
        }
      }
      all.num = n;
    }
    cluster.sync();  // rank 0 has read every rank's entries
  }

  // No CTA leaves while another may still read its shared memory.
  __device__ void Finish() { cg::this_cluster().sync(); }
};

}  // namespace mkserve::cuda::sampling
