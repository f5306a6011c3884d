#include "megakernel/schedule/schedule_cache.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "model/presets.h"

namespace mkserve::megakernel {
namespace {

TEST(ScheduleCacheTest, SelectsTheSmallestBucketThatFitsAndReusesSchedules) {
  ScheduleCache cache(NmcPreset(4), 8, {1024, 4096, 8192, 16384}, 132, SchedulePolicy::Default());
  EXPECT_EQ(cache.BucketIndexFor(1), 0u);
  EXPECT_EQ(cache.BucketIndexFor(1024), 0u);
  EXPECT_EQ(cache.BucketIndexFor(1025), 1u);
  EXPECT_EQ(cache.BucketIndexFor(16384), 3u);
  EXPECT_THROW(cache.BucketIndexFor(16385), Error);
  EXPECT_THROW(cache.BucketIndexFor(0), Error);

  const Schedule& a = cache.Select(3, 900);
  EXPECT_EQ(a.batch, 3);
  EXPECT_EQ(&cache.Select(3, 1000), &a);  // same bucket: the cached schedule
  EXPECT_NE(&cache.Select(4, 1000), &a);
  // At batch 8, 8K and 16K choose the same tiles and window pages: one schedule, built for 16K.
  const Schedule& at_8k = cache.Select(8, 8000);
  EXPECT_EQ(&cache.Select(8, 16000), &at_8k);
  EXPECT_EQ(at_8k.bucket.max_context_tokens, 16384);
  EXPECT_EQ(cache.RepresentativeBucket(8, 2), 3u);
  EXPECT_EQ(cache.num_built(), 3u);
}

TEST(ScheduleCacheTest, RejectsBadConfigurations) {
  const ModelConfig config = NmcPreset(4);
  EXPECT_THROW(ScheduleCache(config, 65, {1024}, 132, SchedulePolicy::Default()), Error);
  EXPECT_THROW(ScheduleCache(config, 8, {}, 132, SchedulePolicy::Default()), Error);
  EXPECT_THROW(ScheduleCache(config, 8, {4096, 1024}, 132, SchedulePolicy::Default()), Error);
  EXPECT_THROW(ScheduleCache(config, 8, {1024}, 0, SchedulePolicy::Default()), Error);
  ScheduleCache cache(config, 8, {1024}, 132, SchedulePolicy::Default());
  EXPECT_THROW(cache.Get(9, 0), Error);
  EXPECT_THROW(cache.Get(1, 1), Error);
}

TEST(ScheduleCacheTest, APolicyThatCouldHangIsRefusedWhenItsScheduleIsBuilt) {
  SchedulePolicy policy = SchedulePolicy::Default();
  std::erase(policy.layer_waves, Wave::kJoin);
  policy.layer_waves.insert(policy.layer_waves.begin(), Wave::kJoin);
  ScheduleCache cache(TinyPreset(), 4, {1024}, 3, policy);
  try {
    cache.Get(2, 0);
    FAIL() << "a schedule with the join before its inputs was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("order_violation"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cache.num_built(), 0u);
}

TEST(ScheduleCacheTest, ThePolicysTileOverridesReachEverySchedule) {
  SchedulePolicy policy = SchedulePolicy::FromJson(
      nlohmann::json::parse(R"({"tiles": {"qkv_tile": 32, "expert_up_tile": 16}})"));
  EXPECT_EQ(SchedulePolicy::FromJson(policy.ToJson()), policy);
  ScheduleCache cache(NmcPreset(4), 8, {1024}, 132, policy);
  for (int64_t batch : {1, 8}) {
    const Schedule& schedule = cache.Get(batch, 0);
    EXPECT_EQ(schedule.tiles.qkv_tile, 32);
    EXPECT_EQ(schedule.tiles.expert_up_tile, 16);
    EXPECT_EQ(schedule.tiles.oproj_tile, ChooseTileShapes(NmcPreset(4), batch, cache.bucket(0), 132)
                                             .oproj_tile);  // untouched fields keep the choice
  }
  // A name that is no field fails when the policy is read, a value that does not divide its
  // dimension when the schedule is built.
  EXPECT_THROW(SchedulePolicy::FromJson(nlohmann::json::parse(R"({"tiles": {"qkv": 32}})")), Error);
  EXPECT_THROW(SchedulePolicy::FromJson(nlohmann::json::parse(R"({"tiles": {"qkv_tile": "a"}})")),
               Error);
  // So is one the device could not run: K ranges of 4 elements (16-byte loads), 33 splits (the
  // partials hold 32), an odd QKV tile (RoPE pairs).
  for (const auto& [name, value] : std::vector<std::pair<std::string, int64_t>>{
           {"qkv_tile", 48}, {"router_splits", 512}, {"sliding_splits", 33}, {"qkv_tile", 1}}) {
    policy.tiles = {{name, value}};
    ScheduleCache bad(NmcPreset(4), 8, {1024}, 132, policy);
    try {
      bad.Get(1, 0);
      ADD_FAILURE() << name << " = " << value << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
}

// A schedule's task lists as bytes: what the device runs.
std::vector<uint8_t> TaskBytes(const Schedule& schedule) {
  const std::vector<TaskDescriptor> tasks = schedule.PackedTasks();
  const auto* begin = reinterpret_cast<const uint8_t*>(tasks.data());
  return {begin, begin + tasks.size() * sizeof(TaskDescriptor)};
}

TEST(ScheduleCacheTest, BuildManyBuildsOnThreadsWhatGetBuildsAlone) {
  const std::vector<int64_t> bounds = {1024, 4096, 8192, 16384};
  ScheduleCache many(NmcPreset(4), 6, bounds, 132, SchedulePolicy::Default());
  ScheduleCache alone(NmcPreset(4), 6, bounds, 132, SchedulePolicy::Default());
  std::vector<std::pair<int64_t, size_t>> steps;
  for (size_t bucket = 0; bucket < bounds.size(); ++bucket) {
    for (int64_t batch = 6; batch >= 1; --batch) steps.emplace_back(batch, bucket);
  }
  steps.emplace_back(2, 0);  // twice: built once
  std::vector<int64_t> reported, totals;
  const int64_t built = many.BuildMany(steps, 3, std::chrono::steady_clock::time_point::max(),
                                       [&](int64_t done, int64_t total) {
                                         reported.push_back(done);
                                         totals.push_back(total);
                                       });
  ASSERT_GT(built, 6);  // buckets share schedules, not all of them
  ASSERT_LT(built, 24);
  EXPECT_EQ(many.num_built(), static_cast<size_t>(built));
  std::vector<int64_t> counted(built);
  for (int64_t i = 0; i < built; ++i) counted[i] = i + 1;
  EXPECT_EQ(reported, counted);  // one call each, counting up, never two at once
  EXPECT_EQ(totals, std::vector<int64_t>(built, built));
  for (const auto& [batch, bucket] : steps) {
    const Schedule& schedule = many.Get(batch, bucket);
    EXPECT_EQ(schedule.batch, batch);
    EXPECT_EQ(TaskBytes(schedule), TaskBytes(alone.Get(batch, bucket)))
        << "batch " << batch << ", bucket " << bucket;
  }
  EXPECT_EQ(many.num_built(), static_cast<size_t>(built));  // Get built nothing more
  EXPECT_EQ(alone.num_built(), many.num_built());
  EXPECT_EQ(many.BuildMany(steps, 3, std::chrono::steady_clock::time_point::max()), 0);
}

TEST(ScheduleCacheTest, BuildManyStopsAtItsDeadlineAndRefusesBadSteps) {
  ScheduleCache cache(NmcPreset(4), 4, {1024, 8192}, 132, SchedulePolicy::Default());
  const std::vector<std::pair<int64_t, size_t>> steps = {{1, 0}, {2, 0}, {3, 1}};
  int calls = 0;
  EXPECT_EQ(cache.BuildMany(steps, 2, std::chrono::steady_clock::now(),
                            [&](int64_t, int64_t) { ++calls; }),
            0);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(cache.num_built(), 0u);
  // A pair outside the cache's range is refused before anything is built.
  const std::vector<std::pair<int64_t, size_t>> bad = {{1, 0}, {5, 0}};
  EXPECT_THROW(cache.BuildMany(bad, 2, std::chrono::steady_clock::time_point::max()), Error);
  const std::vector<std::pair<int64_t, size_t>> far = {{1, 0}, {1, 2}};
  EXPECT_THROW(cache.BuildMany(far, 2, std::chrono::steady_clock::time_point::max()), Error);
  EXPECT_EQ(cache.num_built(), 0u);
}

TEST(ScheduleCacheTest, BuildManyThrowsTheVerifiersRefusalAfterItsThreadsStop) {
  SchedulePolicy policy = SchedulePolicy::Default();
  std::erase(policy.layer_waves, Wave::kJoin);
  policy.layer_waves.insert(policy.layer_waves.begin(), Wave::kJoin);
  ScheduleCache cache(TinyPreset(), 4, {1024}, 3, policy);
  const std::vector<std::pair<int64_t, size_t>> steps = {{1, 0}, {2, 0}, {3, 0}, {4, 0}};
  try {
    cache.BuildMany(steps, 4, std::chrono::steady_clock::time_point::max());
    FAIL() << "schedules with the join before its inputs were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("order_violation"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cache.num_built(), 0u);
}

TEST(ContextBucketTest, PagesFollowTheWindow) {
  const ModelConfig config = NmcPreset(4);  // window 4096 tokens = 64 pages
  const ContextBucket small = BucketForContext(config, 1000);
  EXPECT_EQ(small.max_full_pages, 16);
  EXPECT_EQ(small.max_sliding_pages, 16);
  const ContextBucket large = BucketForContext(config, 100000);
  EXPECT_EQ(large.max_full_pages, 1563);
  EXPECT_EQ(large.max_sliding_pages, 65);  // a window need not start on a page boundary
  EXPECT_EQ(DefaultBucketBounds(20000),
            (std::vector<int64_t>{1024, 2048, 4096, 8192, 16384, 20000}));
  EXPECT_EQ(DefaultBucketBounds(1000), (std::vector<int64_t>{1000}));
}

}  // namespace
}  // namespace mkserve::megakernel
