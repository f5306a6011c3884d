#include "megakernel/schedule/schedule.h"

#include <algorithm>

namespace mkserve::megakernel {

int64_t Schedule::num_tasks() const {
  int64_t total = 0;
  for (const auto& list : sm_tasks) total += static_cast<int64_t>(list.size());
  return total;
}

int64_t Schedule::max_tasks_per_sm() const {
  size_t most = 0;
  for (const auto& list : sm_tasks) most = std::max(most, list.size());
  return static_cast<int64_t>(most);
}

std::vector<TaskDescriptor> Schedule::PackedTasks() const {
  const int64_t width = max_tasks_per_sm();
  TaskDescriptor nop{};
  nop.opcode = kNop;
  nop.wait0_counter = nop.wait1_counter = nop.signal_counter = kNoCounter;
  std::vector<TaskDescriptor> packed(sm_tasks.size() * width, nop);
  for (size_t sm = 0; sm < sm_tasks.size(); ++sm) {
    std::copy(sm_tasks[sm].begin(), sm_tasks[sm].end(), packed.begin() + sm * width);
  }
  return packed;
}

std::vector<uint32_t> Schedule::TaskCounts() const {
  std::vector<uint32_t> counts;
  for (const auto& list : sm_tasks) counts.push_back(static_cast<uint32_t>(list.size()));
  return counts;
}

}  // namespace mkserve::megakernel
