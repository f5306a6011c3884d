// Schedule: what the builder produces for one (batch, context bucket): the per-SM task lists in
// one global order, the counter table, the work queues, and the buffers to zero before each step.
#pragma once

#include <cstdint>
#include <vector>

#include "megakernel/schedule/context_bucket.h"
#include "megakernel/schedule/schedule_policy.h"
#include "megakernel/schedule/tile_shapes.h"
#include "megakernel/task_abi.h"

namespace mkserve::megakernel {

// One uint32 counter in global memory. Every counter belongs to one producer wave of one layer
// (never reused within a step); all are zeroed before each step.
struct CounterInfo {
  Wave producer = Wave::kCount;
  int32_t layer = 0;  // the producer's layer: 0 for kEmbed, num_layers for kLmHead
  uint32_t unit = 0;  // index within its (producer, layer) group
  // Arrivals every waiter expects. For counters fed by claimed work items this holds when the
  // counter is used at all: an (expert, row block) no row was routed to gets no arrivals and has
  // no waiters.
  uint32_t expected_arrivals = 0;
  bool fed_by_claims = false;
  // The previous layer's join arrives here too when this layer fuses its norm (an O-proj
  // counter): the waiters on it then also see the residual the join wrote.
  bool joined_by_previous_layer = false;
};

enum class QueueKind { kAttention, kExpertGateUp, kExpertDown, kLmHead };

// A bounded work queue: a claim cursor (zeroed each step), a count (written by the host for
// attention queues, by kMoeFinalize for expert queues; the LM head's is its `capacity`, in its
// claim tasks) and up to `capacity` item records (none for the LM head: items are tiles). Every
// attention queue of a step holds the same items (they do not depend on the layer).
struct QueueInfo {
  QueueKind kind = QueueKind::kAttention;
  int32_t layer = 0;
  uint32_t capacity = 0;
};

struct ScratchToZero {
  ScratchBuffer buffer = kScratchAttnOut;
  uint64_t bytes = 0;  // zero the first `bytes` of the buffer
};

struct Schedule {
  int64_t batch = 0;
  ContextBucket bucket;
  int64_t num_sms = 0;
  TileShapes tiles;
  std::vector<std::vector<TaskDescriptor>> sm_tasks;  // [num_sms] lists, each in global order
  std::vector<CounterInfo> counters;
  std::vector<QueueInfo> queues;
  std::vector<ScratchToZero> zero_before_step;  // besides all counters

  int64_t num_tasks() const;
  int64_t max_tasks_per_sm() const;
  // Device upload form: [num_sms][max_tasks_per_sm], short lists padded with kNop (never run: the
  // per-SM counts bound each list).
  std::vector<TaskDescriptor> PackedTasks() const;
  std::vector<uint32_t> TaskCounts() const;
};

}  // namespace mkserve::megakernel
