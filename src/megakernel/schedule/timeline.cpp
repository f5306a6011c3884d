#include "megakernel/schedule/timeline.h"

#include <algorithm>
#include <cstdint>
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

}  // namespace mkserve::megakernel
