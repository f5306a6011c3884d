// Timeline export: the per-task timestamps the kernel records (when its timeline option is on)
// as a Chrome / Perfetto trace, one track per SM, one slice per task.
#pragma once

#include <span>
#include <string>

#include "megakernel/schedule/schedule.h"
#include "megakernel/task_abi.h"

namespace mkserve::megakernel {

// records: the device buffer copied back, [num_sms][max_tasks_per_sm] as the kernel writes it
// (records[sm * max_tasks_per_sm + task_index]). Slots of tasks that did not run (start and end
// both 0) are skipped. Times become microseconds from the earliest start; a slice's args carry
// its wait (start to ready). Throws mkserve::Error when the buffer has the wrong size or a
// record's start, ready and end are out of order.
std::string TimelineToChromeTrace(const Schedule& schedule, std::span<const TaskTimestamp> records);

// The item timeline's row width (ItemTimestamp): the schedule's largest queue capacity.
uint32_t ItemTimelineStride(const Schedule& schedule);

// A recorded step as CSV for scripts/megakernel_timeline.py, times in microseconds from the
// earliest task start, one line per task and one per claimed item:
//   what,sm,index,opcode,layer,tile,split,start,ready,end
//   task,<sm>,<task index>,<opcode name>,<layer>,<tile>,<split>,...
//   item,<sm>,<queue>,<queue kind>,<queue layer>,<item index>,0,...
// items: [queues * ItemTimelineStride(schedule)] as the kernel writes them (claimed = 0: no
// item). Throws mkserve::Error when a buffer has the wrong size.
std::string TimelineToCsv(const Schedule& schedule, std::span<const TaskTimestamp> records,
                          std::span<const ItemTimestamp> items);

}  // namespace mkserve::megakernel
