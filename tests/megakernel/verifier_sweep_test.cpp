// Every (batch, bucket) schedule the server can select for North Mini Code on a 132-SM GPU
// (H100 / H200) passes the verifier.
#include <gtest/gtest.h>

#include "megakernel/schedule/schedule_cache.h"
#include "megakernel/schedule/verifier.h"
#include "model/presets.h"

namespace mkserve::megakernel {
namespace {

ScheduleCache NorthCache(const SchedulePolicy& policy = SchedulePolicy::Default()) {
  // The server's default context limit is the model's max_position_embeddings.
  return ScheduleCache(NmcPreset(), kMaxBatch, DefaultBucketBounds(500000), 132, policy);
}

// Every check of every bucket of `batch`'s schedules, on each standard instance of the work.
void ExpectEveryBucketPasses(ScheduleCache& cache, int64_t batch) {
  for (size_t b = 0; b < cache.bucket_bounds().size(); ++b) {
    if (cache.RepresentativeBucket(batch, b) != b) continue;
    const Schedule& schedule = cache.Get(batch, b);
    const std::vector<RunTimeWork> work = StandardWork(cache.config(), batch, schedule.bucket);
    for (size_t i = 0; i < work.size(); ++i) {
      const VerifyReport report = VerifySchedule(cache.config(), schedule, work[i]);
      ASSERT_TRUE(report.ok()) << "batch " << batch << " bucket " << b << " instance " << i << ": "
                               << report.Summary();
    }
  }
}

// Every check, data checks included, for every batch and bucket, on each standard instance of
// the work (StandardWork: the ragged rows, every row at the longest context with routing spread
// wide, ...). Buckets that share a schedule are checked once, with the largest bucket's work
// (ScheduleCache::RepresentativeBucket). Sharded by batch so ctest spreads the ~200 s of
// checks (2-core build machine) over its jobs.
constexpr int64_t kBatchesPerShard = 8;
static_assert(kMaxBatch % kBatchesPerShard == 0, "the shards cover every batch size");

class VerifierSweepTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(VerifierSweepTest, EveryBucketOfTheseBatchesPassesEveryCheck) {
  ScheduleCache cache = NorthCache();
  const int64_t first = GetParam() * kBatchesPerShard + 1;
  for (int64_t batch = first; batch < first + kBatchesPerShard; ++batch) {
    ExpectEveryBucketPasses(cache, batch);
  }
}

INSTANTIATE_TEST_SUITE_P(BatchShards, VerifierSweepTest,
                         ::testing::Range<int64_t>(0, kMaxBatch / kBatchesPerShard));

// With sampling teams: the largest team (132 members for one row), a middling one and the
// smallest (two members a row at 64 rows), every bucket.
TEST(VerifierSweepSamplingTest, EveryBucketOfSomeBatchesPassesEveryCheck) {
  SchedulePolicy policy = SchedulePolicy::Default();
  policy.include_sampling = true;
  ScheduleCache cache = NorthCache(policy);
  for (int64_t batch : {1, 5, 64}) ExpectEveryBucketPasses(cache, batch);
}

}  // namespace
}  // namespace mkserve::megakernel
