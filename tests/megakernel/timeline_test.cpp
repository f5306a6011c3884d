#include "megakernel/schedule/timeline.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "megakernel/schedule/schedule_builder.h"
#include "model/presets.h"

namespace mkserve::megakernel {
namespace {

// The tiny model's schedule for `batch` rows on 2 SMs.
Schedule TinySchedule(int64_t batch) {
  const ModelConfig config = TinyPreset(2);
  const ContextBucket bucket = BucketForContext(config, 256);
  return BuildSchedule(config, batch, bucket, 2, ChooseTileShapes(config, batch, bucket, 2),
                       SchedulePolicy::Default());
}

TEST(TimelineTest, TasksBecomeSlicesOnTheirSmTrack) {
  const Schedule schedule = TinySchedule(1);
  const int64_t width = schedule.max_tasks_per_sm();
  std::vector<TaskTimestamp> records(2 * width, TaskTimestamp{0, 0, 0});
  records[0] = {1'000'000, 1'000'000, 1'002'500};          // SM 0 task 0: the embed, 2.5 us
  records[width + 1] = {1'003'000, 1'003'600, 1'004'000};  // SM 1 task 1, waited 0.6 us
  const nlohmann::json trace = nlohmann::json::parse(TimelineToChromeTrace(schedule, records));

  std::vector<nlohmann::json> slices;
  for (const auto& event : trace["traceEvents"]) {
    if (event["ph"] == "X") slices.push_back(event);
  }
  ASSERT_EQ(slices.size(), 2u);  // slots without a record are skipped
  EXPECT_EQ(slices[0]["tid"], 0);
  EXPECT_EQ(slices[0]["name"], "embed L0");
  EXPECT_DOUBLE_EQ(slices[0]["ts"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(slices[0]["dur"].get<double>(), 2.5);
  EXPECT_EQ(slices[1]["tid"], 1);
  EXPECT_DOUBLE_EQ(slices[1]["ts"].get<double>(), 3.0);
  EXPECT_EQ(slices[1]["args"]["sequence"], schedule.sm_tasks[1][1].arg[kArgSequence]);
  EXPECT_EQ(slices[1]["args"]["task_index"], 1);
  EXPECT_DOUBLE_EQ(slices[1]["args"]["wait_us"].get<double>(), 0.6);
  EXPECT_DOUBLE_EQ(slices[0]["args"]["wait_us"].get<double>(), 0.0);
}

TEST(TimelineTest, CsvHasATaskLineAndAnItemLinePerRecord) {
  const Schedule schedule = TinySchedule(2);
  const int64_t width = schedule.max_tasks_per_sm();
  const uint32_t stride = ItemTimelineStride(schedule);
  ASSERT_FALSE(schedule.queues.empty());
  ASSERT_GT(stride, 1u);
  std::vector<TaskTimestamp> records(2 * width, TaskTimestamp{0, 0, 0});
  records[0] = {1'000'000, 1'000'000, 1'002'500};
  std::vector<ItemTimestamp> items(schedule.queues.size() * stride, ItemTimestamp{});
  const size_t q = schedule.queues.size() - 1;
  items[q * stride + 1] = {1'001'000, 1'001'500, 1'004'000, 1, 1};
  const std::string csv = TimelineToCsv(schedule, records, items);
  ASSERT_EQ(schedule.queues[q].kind, QueueKind::kLmHead);  // the last queue: the LM head's tail
  const std::string kind = "lm_head";
  EXPECT_EQ(csv,
            "what,sm,index,opcode,layer,tile,split,start,ready,end\n"
            "task,0,0,embed,0,0,0,0.000,0.000,2.500\n"
            "item,1," +
                std::to_string(q) + "," + kind + "," + std::to_string(schedule.queues[q].layer) +
                ",1,0,1.000,1.500,4.000\n");
  items.pop_back();
  EXPECT_THROW(TimelineToCsv(schedule, records, items), Error);
}

TEST(TimelineTest, BadBuffersAreRejected) {
  const Schedule schedule = TinySchedule(1);
  std::vector<TaskTimestamp> records(3);
  EXPECT_THROW(TimelineToChromeTrace(schedule, records), Error);
  records.assign(2 * schedule.max_tasks_per_sm(), TaskTimestamp{0, 0, 0});
  records[0] = {10, 10, 5};  // ends before it starts
  EXPECT_THROW(TimelineToChromeTrace(schedule, records), Error);
  records[0] = {10, 4, 20};  // ready before it starts
  EXPECT_THROW(TimelineToChromeTrace(schedule, records), Error);
  records[0] = {10, 25, 20};  // ready after it ends
  EXPECT_THROW(TimelineToChromeTrace(schedule, records), Error);
}

}  // namespace
}  // namespace mkserve::megakernel
