#include "megakernel/schedule/schedule_cache.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>

#include "common/error.h"
#include "megakernel/schedule/schedule_builder.h"
#include "megakernel/schedule/verifier.h"

namespace mkserve::megakernel {

ScheduleCache::ScheduleCache(ModelConfig config, int64_t max_batch,
                             std::vector<int64_t> bucket_bounds, int64_t num_sms,
                             SchedulePolicy policy)
    : config_(std::move(config)),
      max_batch_(max_batch),
      bucket_bounds_(std::move(bucket_bounds)),
      num_sms_(num_sms),
      policy_(std::move(policy)) {
  if (max_batch_ < 1 || max_batch_ > kMaxBatch) {
    throw Error("megakernel max batch must be 1.." + std::to_string(kMaxBatch) + ", got " +
                std::to_string(max_batch_));
  }
  if (num_sms_ < 1) throw Error("num_sms must be at least 1, got " + std::to_string(num_sms_));
  if (bucket_bounds_.empty() || bucket_bounds_.front() < 1 ||
      !std::is_sorted(bucket_bounds_.begin(), bucket_bounds_.end(),
                      [](int64_t a, int64_t b) { return a <= b; })) {
    throw Error(
        "megakernel context buckets must be a non-empty, strictly increasing list of "
        "positive token counts");
  }
  policy_.Validate();
}

size_t ScheduleCache::BucketIndexFor(int64_t longest_context) const {
  auto it = std::lower_bound(bucket_bounds_.begin(), bucket_bounds_.end(), longest_context);
  if (longest_context < 1 || it == bucket_bounds_.end()) {
    throw Error("no megakernel schedule for a context of " + std::to_string(longest_context) +
                " tokens (buckets go up to " + std::to_string(bucket_bounds_.back()) + ")");
  }
  return static_cast<size_t>(it - bucket_bounds_.begin());
}

TileShapes ScheduleCache::TilesFor(int64_t batch, const ContextBucket& context) const {
  return WithTileOverrides(ChooseTileShapes(config_, batch, context, num_sms_), policy_.tiles);
}

ContextBucket ScheduleCache::bucket(size_t index) const {
  return BucketForContext(config_, bucket_bounds_.at(index));
}

size_t ScheduleCache::RepresentativeBucket(int64_t batch, size_t bucket_index) const {
  auto key = [&](size_t index) {
    const ContextBucket context = bucket(index);
    return std::make_pair(TilesFor(batch, context), context.max_sliding_pages);
  };
  const auto first = key(bucket_index);
  size_t largest = bucket_index;
  while (largest + 1 < bucket_bounds_.size() && key(largest + 1) == first) ++largest;
  return largest;
}

size_t ScheduleCache::Representative(int64_t batch, size_t bucket_index) {
  if (batch < 1 || batch > max_batch_) {
    throw Error("megakernel batch " + std::to_string(batch) + " is outside 1.." +
                std::to_string(max_batch_));
  }
  if (bucket_index >= bucket_bounds_.size()) {
    throw Error("megakernel bucket index " + std::to_string(bucket_index) + " is out of range");
  }
  auto [known, added] = representatives_.try_emplace({batch, bucket_index}, 0);
  if (added) known->second = RepresentativeBucket(batch, bucket_index);
  return known->second;
}

std::unique_ptr<Schedule> ScheduleCache::BuildVerified(int64_t batch, size_t representative) const {
  const ContextBucket context = bucket(representative);
  auto schedule = std::make_unique<Schedule>(
      BuildSchedule(config_, batch, context, num_sms_, TilesFor(batch, context), policy_));
  // A policy or tile choice that could hang the GPU is refused here, not found by the watchdog.
  const RunTimeWork ragged = StandardWork(config_, batch, context)[1];
  const VerifyReport report =
      VerifySchedule(config_, *schedule, ragged, VerifyChecks::kSynchronisation);
  if (!report.ok()) {
    throw Error("the megakernel schedule for batch " + std::to_string(batch) + " and " +
                std::to_string(context.max_context_tokens) +
                " tokens fails verification (check the schedule policy): " + report.Summary());
  }
  return schedule;
}

const Schedule& ScheduleCache::Get(int64_t batch, size_t bucket_index) {
  const std::pair<int64_t, size_t> key{batch, Representative(batch, bucket_index)};
  auto found = schedules_.find(key);
  if (found == schedules_.end()) {
    found = schedules_.emplace(key, BuildVerified(batch, key.second)).first;
  }
  return *found->second;
}

int64_t ScheduleCache::BuildMany(std::span<const std::pair<int64_t, size_t>> steps, int threads,
                                 std::chrono::steady_clock::time_point deadline,
                                 const std::function<void(int64_t, int64_t)>& progress) {
  std::vector<std::pair<int64_t, size_t>> missing;  // (batch, representative), each once
  for (const auto& [batch, bucket_index] : steps) {
    const std::pair<int64_t, size_t> key{batch, Representative(batch, bucket_index)};
    if (!schedules_.contains(key) &&
        std::find(missing.begin(), missing.end(), key) == missing.end()) {
      missing.push_back(key);
    }
  }
  if (missing.empty()) return 0;
  const int64_t to_build = static_cast<int64_t>(missing.size());
  std::vector<std::unique_ptr<Schedule>> built(missing.size());
  std::vector<std::exception_ptr> errors(missing.size());
  std::atomic<size_t> next{0};
  std::mutex mutex;  // guards `built`, `errors`, `done` and the calls of `progress`
  int64_t done = 0;
  const auto work = [&] {
    for (size_t i = next++; i < missing.size(); i = next++) {
      if (std::chrono::steady_clock::now() >= deadline) return;
      std::unique_ptr<Schedule> schedule;
      std::exception_ptr error;
      try {
        schedule = BuildVerified(missing[i].first, missing[i].second);
      } catch (...) {
        error = std::current_exception();
      }
      const std::lock_guard lock(mutex);
      if (error) {
        errors[i] = error;
        next = missing.size();  // the others stop after their current build
        return;
      }
      built[i] = std::move(schedule);
      if (progress) progress(++done, to_build);
    }
  };
  {
    std::vector<std::jthread> pool;
    const int64_t count = std::clamp<int64_t>(threads, 1, to_build);
    for (int64_t t = 0; t < count; ++t) {
      try {
        pool.emplace_back(work);
      } catch (const std::system_error&) {  // no more threads: the ones started do it all
        break;
      }
    }
    if (pool.empty()) work();
  }  // joined
  int64_t added = 0;
  for (size_t i = 0; i < missing.size(); ++i) {
    if (built[i]) {
      schedules_.emplace(missing[i], std::move(built[i]));
      ++added;
    }
  }
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  return added;
}

}  // namespace mkserve::megakernel
