// MegakernelDecoder: runs one decode step (B rows, one token each, ragged contexts over the paged
// KV pool) as a single persistent kernel launch and leaves fp32 logits [B][vocab] (logit_scale
// applied) where the caller asks, as the layered path's logits buffer holds them. It owns the
// schedules (one per batch size and context bucket, built once by the schedule builder), the
// counters, the scratch buffers and the launch; the weights, their panel copies
// (ProjectionPanels) and the KV pool stay the caller's.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/core/device_buffer.h"
#include "backends/cuda/core/device_weights.h"
#include "backends/cuda/core/kv_pool.h"
#include "backends/cuda/core/step_plan.h"
#include "backends/cuda/sampling/step_sampler.h"
#include "megakernel/device/projection_panels.h"
#include "megakernel/device/step_params.h"
#include "megakernel/device/step_upload.h"
#include "megakernel/device/step_watchdog.h"
#include "megakernel/schedule/model_support.h"
#include "megakernel/schedule/schedule.h"
#include "megakernel/schedule/schedule_cache.h"
#include "megakernel/schedule/schedule_policy.h"
#include "megakernel/schedule/tile_shapes.h"
#include "model/model_config.h"

namespace mkserve::megakernel {

// The most rows a step may have: the schedules' limit (the decoder test checks it against the
// layered path on a GPU). Larger batches stay on the layered path.
inline constexpr int64_t kMaxMegakernelBatch = kMaxBatch;

// A fault a test plants in one step (StepHooks::TakeStuckStep), so the watchdog path runs on a
// real kernel: kStuckWait gives SM 0's first task a wait that no arrival can meet.
enum class StepFault { kNone, kStuckWait };

struct MegakernelDecoderOptions {
  int64_t max_batch = kMaxMegakernelBatch;  // 1..kMaxMegakernelBatch
  // A step that has not finished after this long is abandoned: BackendFatalError.
  std::chrono::milliseconds watchdog{10000};
  bool record_timeline = false;  // per-task (start, end) of the last step: LastTimeline
  bool record_routing = false;   // the experts every MoE layer chose in the last step: LastRouting
  SchedulePolicy policy = SchedulePolicy::Default();
};

// Where a step leaves its picks: every row's argmax (by the kSample tasks, or without them,
// policy.include_sampling off, by the argmax kernel after the step) and, with kSample, the
// samples of the rows `in_step` holds, in its staged outputs.
struct StepSampling {
  int32_t* argmax = nullptr;                     // [batch], device
  const cuda::InStepSamples* in_step = nullptr;  // null: argmax only
};

class MegakernelDecoder {
 public:
  // `panels` holds the projections besides the experts in the kernel's read order (built from
  // `weights`); like the weights and the KV pool they stay the caller's.
  MegakernelDecoder(const ModelConfig& config, const cuda::DeviceWeights& weights,
                    const ProjectionPanels& panels, const cuda::KvPool& kv_pool,
                    MegakernelDecoderOptions options = {});
  ~MegakernelDecoder();
  MegakernelDecoder(const MegakernelDecoder&) = delete;
  MegakernelDecoder& operator=(const MegakernelDecoder&) = delete;

  // One decode step for every sequence of `plan` (each exactly one token; BuildStepPlan has
  // validated the block tables). Writes logits[row][vocab] for row = sequence index and what
  // `sampling` asks (the in-step samples only when samples_in_step()); blocks until the step is
  // done. Throws mkserve::Error for a plan it cannot run (prefill rows, too many rows, a context
  // beyond the largest bucket, no argmax output) and BackendFatalError, with the counters that
  // fell short, when the step does not finish within the watchdog.
  void Run(const cuda::StepPlan& plan, float* logits, const StepSampling& sampling,
           cudaStream_t stream, StepFault fault = StepFault::kNone);
  // Run in two halves, so that the next step can be enqueued while one runs: Start enqueues the
  // step on `slot` (0 or 1, each with its own upload and events: one step in flight on each) and
  // returns; Finish waits for it and throws as Run does. Row r whose `pick_rows[r]` is not -1
  // takes its token from row pick_rows[r] of the step started last on the other slot: the token
  // that step picked, kept in device memory (empty: every row's token is the plan's).
  void Start(const cuda::StepPlan& plan, float* logits, const StepSampling& sampling,
             cudaStream_t stream, int slot, std::span<const int32_t> pick_rows = {},
             StepFault fault = StepFault::kNone);
  void Finish(int slot);
  // Whether the schedules end with kSample (the policy's include_sampling): every step then
  // samples the rows StepSampling::in_step holds inside the kernel.
  bool samples_in_step() const { return options_.policy.include_sampling; }
  // Start-up warm-up: builds and verifies the schedules that steps of (rows, longest row's
  // context in tokens) would run, on up to `threads` threads (ScheduleCache::BuildMany, with its
  // deadline and progress), then uploads each before `deadline`. Returns how many schedules it
  // uploaded (the ones not ready before).
  int64_t Prepare(std::span<const std::pair<int64_t, int64_t>> steps, int threads,
                  std::chrono::steady_clock::time_point deadline,
                  const std::function<void(int64_t, int64_t)>& progress);
  // The context buckets' upper bounds in tokens: one schedule per (batch, bucket) at most.
  const std::vector<int64_t>& bucket_bounds() const { return cache_.bucket_bounds(); }

  // GPU time of the last step's kernel launch, milliseconds (the zeroing kernel included).
  float last_step_ms() const { return last_step_ms_; }
  // The schedule the last step ran (null before the first).
  const Schedule* last_schedule() const { return last_schedule_; }
  // The last step's per-task times when options.record_timeline (else empty), laid out as
  // TimelineToChromeTrace reads them: [sm * max_tasks_per_sm + index], zeros for no task.
  std::vector<TaskTimestamp> LastTimeline() const;
  // The last step's claimed items when options.record_timeline (else empty):
  // [queue * ItemTimelineStride(*last_schedule()) + item index].
  std::vector<ItemTimestamp> LastItemTimeline() const;
  // The last step's expert ids when options.record_routing (else empty), as RoutingOverride
  // takes them: [moe layer][row][top_k], in the order top-k picked them.
  std::vector<int32_t> LastRouting() const;
  // With it, the router logits those picks came from, as RoutingOverride::TracedLogits lays
  // them out: [moe layer][row][experts] (the step's scratch, read back before the next step).
  std::vector<float> LastRouterLogits() const;

 private:
  struct Uploaded;  // one schedule in device memory
  // One step in flight: its host data and events; `uploaded` is set from Start to Finish. Its
  // rows' tokens stay in `picks` until the slot's next step (the next step on the other slot
  // may take them from there).
  struct Slot {
    StepUpload upload;
    cudaEvent_t start = nullptr, done = nullptr;
    cudaEvent_t uploaded_event = nullptr;  // its copy, when it went on copy_stream_
    Uploaded* uploaded = nullptr;
    int64_t batch = 0;
    bool stuck = false;
    cuda::DeviceBuffer<int32_t> picks;  // [max_batch]: the last step's tokens, by row
  };
  Uploaded& UploadedFor(const Schedule& schedule);
  Slot& SlotAt(int slot);

  ModelConfig config_;
  MegakernelDecoderOptions options_;
  int num_sms_ = 0;
  std::vector<LayerParams> layers_;  // weights and caches; tables filled per step
  std::vector<int32_t> group_of_layer_;
  StepParams base_;  // buffers and geometry; per-step fields filled by Launch
  std::vector<cuda::DeviceBuffer<float>> float_buffers_;
  std::vector<cuda::DeviceBuffer<bf16>> bf16_buffers_;
  std::vector<cuda::DeviceBuffer<int32_t>> int_buffers_;
  Slot slots_[2];
  cudaStream_t copy_stream_ = nullptr;  // a slot's upload while the other slot's step runs
  cuda::DeviceBuffer<TaskTimestamp> timeline_;
  cuda::DeviceBuffer<ItemTimestamp> item_timeline_;
  cuda::DeviceBuffer<int32_t> pick_identity_;  // [max_batch * top_k]: 0, 1, 2, ...
  cuda::DeviceBuffer<int32_t> routing_;        // [layers][max_batch][top_k] when record_routing
  // kSample's exchanges, [max_batch] each when samples_in_step().
  cuda::DeviceBuffer<SampleBarriers> sample_barriers_;
  cuda::DeviceBuffer<SampleHistograms> sample_histograms_;
  cuda::DeviceBuffer<SampleSlots> sample_slots_;
  int64_t last_batch_ = 0;
  StepWatchdog watchdog_;
  ScheduleCache cache_;
  std::map<const Schedule*, std::unique_ptr<Uploaded>> uploaded_;
  const Schedule* last_schedule_ = nullptr;
  float last_step_ms_ = 0.0f;
};

}  // namespace mkserve::megakernel
