// ScheduleCache: the schedules one server configuration selects from, keyed by (batch, context
// bucket). A schedule is built on the first step that needs it and reused for every later one.
// Neighbouring buckets whose tile shapes and sliding-window pages agree get the same task lists,
// so they share one schedule, built for the largest of them.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "megakernel/schedule/schedule.h"
#include "model/model_config.h"

namespace mkserve::megakernel {

class ScheduleCache {
 public:
  // bucket_bounds: increasing context upper bounds in tokens (e.g. DefaultBucketBounds).
  // Throws mkserve::Error for an empty or unsorted list, max_batch outside 1..kMaxBatch or
  // num_sms < 1.
  ScheduleCache(ModelConfig config, int64_t max_batch, std::vector<int64_t> bucket_bounds,
                int64_t num_sms, SchedulePolicy policy);

  // The bucket index serving a step whose longest row attends to `longest_context` tokens
  // (including the token being decoded). Throws when no bucket is long enough.
  size_t BucketIndexFor(int64_t longest_context) const;

  // The schedule for `batch` rows in bucket `bucket_index`, built now if it is not cached. A
  // schedule is verified (counters, order, queues, deadlock; ragged rows, every row on the same
  // experts) before it is cached; one that fails throws mkserve::Error with the verifier's report.
  // Not thread-safe: one engine thread selects schedules.
  const Schedule& Get(int64_t batch, size_t bucket_index);
  const Schedule& Select(int64_t batch, int64_t longest_context) {
    return Get(batch, BucketIndexFor(longest_context));
  }
  // Get for many (batch, bucket index) pairs at once, as a server's warm-up asks (a few hundred
  // schedules of 0.1-1 s each): the ones not cached yet are built and verified on up to `threads`
  // threads, none started after `deadline`. progress(built, to_build) is called after each, one
  // call at a time, from those threads. Throws Get's error for the first pair whose schedule
  // fails, keeping the others built. Returns how many it built. Bad pairs throw before any build.
  int64_t BuildMany(std::span<const std::pair<int64_t, size_t>> steps, int threads,
                    std::chrono::steady_clock::time_point deadline,
                    const std::function<void(int64_t built, int64_t to_build)>& progress = {});

  // The bucket whose schedule serves bucket_index for this batch (bucket_index or a larger one).
  size_t RepresentativeBucket(int64_t batch, size_t bucket_index) const;

  const ModelConfig& config() const { return config_; }
  int64_t max_batch() const { return max_batch_; }
  const std::vector<int64_t>& bucket_bounds() const { return bucket_bounds_; }
  ContextBucket bucket(size_t index) const;
  int64_t num_sms() const { return num_sms_; }
  const SchedulePolicy& policy() const { return policy_; }
  size_t num_built() const { return schedules_.size(); }

 private:
  // ChooseTileShapes' choice with the policy's tile overrides.
  TileShapes TilesFor(int64_t batch, const ContextBucket& context) const;
  // The representative bucket of a valid (batch, bucket index), remembered; throws for others.
  size_t Representative(int64_t batch, size_t bucket_index);
  // A new schedule for (batch, representative bucket), verified; throws Get's error. Touches no
  // member but the constant configuration, so BuildMany runs it on several threads.
  std::unique_ptr<Schedule> BuildVerified(int64_t batch, size_t representative) const;
  ModelConfig config_;
  int64_t max_batch_;
  std::vector<int64_t> bucket_bounds_;
  int64_t num_sms_;
  SchedulePolicy policy_;
  std::map<std::pair<int64_t, size_t>, std::unique_ptr<Schedule>> schedules_;  // by representative
  // (batch, bucket) -> its representative: found once, not on every step's Get.
  std::map<std::pair<int64_t, size_t>, size_t> representatives_;
};

}  // namespace mkserve::megakernel
