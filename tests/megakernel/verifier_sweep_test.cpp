// Every (batch, bucket) schedule the server can select for North Mini Code on a 132-SM GPU
// (H100 / H200) passes the verifier.
#include <gtest/gtest.h>

#include "megakernel/schedule/schedule_cache.h"
#include "megakernel/schedule/verifier.h"
#include "model/presets.h"

namespace mkserve::megakernel {
namespace {

ScheduleCache NorthCache() {
  // The server's default context limit is the model's max_position_embeddings.
  return ScheduleCache(NmcPreset(), kMaxBatch, DefaultBucketBounds(500000), 132,
                       SchedulePolicy::Default());
}

// Counters, order, queues and deadlock for every batch and bucket. Buckets that share a
// schedule are checked once, with the largest bucket's work. ScheduleCache::Get verifies every
// schedule it builds with the ragged instance (rows of every length up to the bucket, every row
// on the same experts) and throws if it fails; the largest bucket is also checked with the
// instance that has the most items (every row at the longest context, routing spread wide).
TEST(VerifierSweepTest, EveryBatchAndBucketOfNorthSynchronises) {
  ScheduleCache cache = NorthCache();
  const size_t buckets = cache.bucket_bounds().size();
  for (int64_t batch = 1; batch <= kMaxBatch; ++batch) {
    for (size_t b = 0; b < buckets; ++b) {
      if (cache.RepresentativeBucket(batch, b) != b) continue;
      const Schedule& schedule = cache.Get(batch, b);
      if (b + 1 != buckets) continue;
      const RunTimeWork most = StandardWork(cache.config(), batch, schedule.bucket)[0];
      const VerifyReport report =
          VerifySchedule(cache.config(), schedule, most, VerifyChecks::kSynchronisation);
      ASSERT_TRUE(report.ok()) << "batch " << batch << ": " << report.Summary();
    }
  }
}

// Everything, data checks included, on a spread of batch sizes, buckets and instances (the data
// checks cost several times the synchronisation checks, so they are sampled).
TEST(VerifierSweepTest, SampledBatchesOfNorthPassTheDataChecks) {
  ScheduleCache cache = NorthCache();
  struct Sample {
    int64_t batch;
    int64_t context;
    std::vector<size_t> instances;
  };
  const std::vector<Sample> samples = {
      {1, 8192, {0, 1, 2}}, {1, 500000, {0, 2}}, {2, 2048, {1, 2}}, {9, 8192, {1, 2}},
      {32, 8192, {1}},      {33, 8192, {0, 1}},  {64, 8192, {1, 2}}};
  for (const Sample& sample : samples) {
    const Schedule& schedule = cache.Select(sample.batch, sample.context);
    const auto work = StandardWork(cache.config(), sample.batch, schedule.bucket);
    for (size_t i : sample.instances) {
      const VerifyReport report = VerifySchedule(cache.config(), schedule, work[i]);
      ASSERT_TRUE(report.ok()) << "batch " << sample.batch << " context " << sample.context
                               << " instance " << i << ": " << report.Summary();
    }
  }
}

}  // namespace
}  // namespace mkserve::megakernel
