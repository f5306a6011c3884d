// BuildSchedule: the task lists of one decode step for (batch, context bucket) on num_sms SMs.
#pragma once

#include <cstdint>

#include "megakernel/schedule/schedule.h"
#include "model/model_config.h"

namespace mkserve::megakernel {

// Throws mkserve::Error when the batch, tiles or policy do not fit the model. The result is a
// plain value: build it once per (batch, bucket) and reuse it every step (see ScheduleCache).
Schedule BuildSchedule(const ModelConfig& config, int64_t batch, const ContextBucket& bucket,
                       int64_t num_sms, const TileShapes& tiles, const SchedulePolicy& policy);

}  // namespace mkserve::megakernel
