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

}  // namespace mkserve::megakernel
