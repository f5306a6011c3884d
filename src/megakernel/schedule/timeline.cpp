#include "megakernel/schedule/timeline.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "megakernel/schedule/opcode_names.h"

namespace mkserve::megakernel {

std::string TimelineToChromeTrace(const Schedule& schedule,
                                  std::span<const TaskTimestamp> records) {
  const int64_t width = schedule.max_tasks_per_sm();
  const size_t expected = schedule.sm_tasks.size() * static_cast<size_t>(width);
  if (records.size() != expected) {
    throw Error("timeline has " + std::to_string(records.size()) + " records, the schedule needs " +
                std::to_string(schedule.sm_tasks.size()) + " SMs x " + std::to_string(width) +
                " tasks = " + std::to_string(expected));
  }
  uint64_t origin = std::numeric_limits<uint64_t>::max();
  for (size_t sm = 0; sm < schedule.sm_tasks.size(); ++sm) {
    for (size_t i = 0; i < schedule.sm_tasks[sm].size(); ++i) {
      const TaskTimestamp& record = records[sm * width + i];
      if (record.start_ns == 0 && record.end_ns == 0) continue;
      if (record.ready_ns < record.start_ns || record.end_ns < record.ready_ns) {
        throw Error("timeline record of SM " + std::to_string(sm) + " task " + std::to_string(i) +
                    " is out of order: start " + std::to_string(record.start_ns) + ", ready " +
                    std::to_string(record.ready_ns) + ", end " + std::to_string(record.end_ns) +
                    " ns");
      }
      origin = std::min(origin, record.start_ns);
    }
  }

  nlohmann::json events = nlohmann::json::array();
  for (size_t sm = 0; sm < schedule.sm_tasks.size(); ++sm) {
    events.push_back({{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", 0},
                      {"tid", sm},
                      {"args", {{"name", "SM " + std::to_string(sm)}}}});
    for (size_t i = 0; i < schedule.sm_tasks[sm].size(); ++i) {
      const TaskTimestamp& record = records[sm * width + i];
      if (record.start_ns == 0 && record.end_ns == 0) continue;
      const TaskDescriptor& task = schedule.sm_tasks[sm][i];
      const std::string op(OpcodeName(task.opcode));
      events.push_back(
          {{"ph", "X"},
           {"name", op + " L" + std::to_string(task.layer)},
           {"cat", op},
           {"pid", 0},
           {"tid", sm},
           {"ts", static_cast<double>(record.start_ns - origin) / 1000.0},
           {"dur", static_cast<double>(record.end_ns - record.start_ns) / 1000.0},
           {"args",
            {{"layer", task.layer},
             {"tile", task.tile},
             {"split", task.split},
             {"rows", std::to_string(task.row_begin) + ".." + std::to_string(task.row_end)},
             {"task_index", i},
             {"wait_us", static_cast<double>(record.ready_ns - record.start_ns) / 1000.0},
             {"sequence", task.arg[kArgSequence]}}}});
    }
  }
  return nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ns"}}.dump();
}

uint32_t ItemTimelineStride(const Schedule& schedule) {
  uint32_t stride = 0;
  for (const QueueInfo& q : schedule.queues) stride = std::max(stride, q.capacity);
  return stride;
}

std::string TimelineToCsv(const Schedule& schedule, std::span<const TaskTimestamp> records,
                          std::span<const ItemTimestamp> items) {
  const int64_t width = schedule.max_tasks_per_sm();
  const size_t stride = ItemTimelineStride(schedule);
  if (records.size() != schedule.sm_tasks.size() * static_cast<size_t>(width) ||
      items.size() != schedule.queues.size() * stride) {
    throw Error("timeline CSV: " + std::to_string(records.size()) + " task and " +
                std::to_string(items.size()) + " item records, the schedule needs " +
                std::to_string(schedule.sm_tasks.size() * width) + " and " +
                std::to_string(schedule.queues.size() * stride));
  }
  uint64_t origin = std::numeric_limits<uint64_t>::max();
  for (const TaskTimestamp& t : records) {
    if (t.start_ns != 0) origin = std::min(origin, t.start_ns);
  }
  auto us = [&](uint64_t ns) {
    return (static_cast<double>(ns) - static_cast<double>(origin)) / 1e3;
  };
  std::string out = "what,sm,index,opcode,layer,tile,split,start,ready,end\n";
  char line[256];
  for (size_t sm = 0; sm < schedule.sm_tasks.size(); ++sm) {
    for (size_t i = 0; i < schedule.sm_tasks[sm].size(); ++i) {
      const TaskDescriptor& task = schedule.sm_tasks[sm][i];
      const TaskTimestamp& t = records[sm * width + i];
      if (t.start_ns == 0) continue;
      std::snprintf(line, sizeof(line), "task,%zu,%zu,%s,%u,%u,%u,%.3f,%.3f,%.3f\n", sm, i,
                    std::string(OpcodeName(task.opcode)).c_str(), task.layer, task.tile, task.split,
                    us(t.start_ns), us(t.ready_ns), us(t.end_ns));
      out += line;
    }
  }
  static constexpr const char* kKind[] = {"attention", "expert_gate_up", "expert_down", "lm_head"};
  for (size_t q = 0; q < schedule.queues.size(); ++q) {
    for (size_t i = 0; i < stride; ++i) {
      const ItemTimestamp& t = items[q * stride + i];
      if (t.claimed == 0) continue;
      std::snprintf(line, sizeof(line), "item,%u,%zu,%s,%d,%zu,0,%.3f,%.3f,%.3f\n", t.sm, q,
                    kKind[static_cast<int>(schedule.queues[q].kind)], schedule.queues[q].layer, i,
                    us(t.start_ns), us(t.ready_ns), us(t.end_ns));
      out += line;
    }
  }
  return out;
}

}  // namespace mkserve::megakernel
