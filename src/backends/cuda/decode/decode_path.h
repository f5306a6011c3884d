// DecodePath: one way of running the decode rows of a step (every sequence runs one token). The
// backend plans the step, asks its paths in preference order whether they accept the plan, runs
// the first that does, then samples the rows the path left in the workspace. Paths are made by
// name from a DecodePathContext (decode_path_registry.h); docs/cuda-backend.md ("Decode paths")
// states the contract.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "backends/cuda/core/device_info.h"
#include "backends/cuda/core/device_weights.h"
#include "backends/cuda/core/kv_pool.h"
#include "backends/cuda/core/step_plan.h"
#include "backends/cuda/core/step_workspace.h"
#include "backends/cuda/cuda_backend_options.h"
#include "backends/cuda/sampling/step_sampler.h"
#include "common/error.h"
#include "model/model_config.h"

namespace mkserve::cuda {

// What a path may use; everything is owned by the backend and outlives the path.
struct DecodePathContext {
  const ModelConfig& config;
  const DeviceWeights& weights;
  KvPool& kv_pool;
  StepWorkspace& workspace;  // scratch of every step; the path leaves its logits here
  const DeviceInfo& device;
  cublasHandle_t cublas;  // bound to a fixed workspace: usable inside a capture
  const CudaBackendOptions& options;
};

// What DecodePath::WarmUp prepares: decode steps of 1..max_batch rows at contexts of up to
// max_context_tokens, until `deadline`.
struct DecodeWarmUp {
  int64_t max_batch = 0;
  int64_t max_context_tokens = 0;
  std::chrono::steady_clock::time_point deadline;
  // May be empty; called one call at a time, but maybe from threads the path starts.
  std::function<void(int64_t done, int64_t total)> progress;
};

class DecodePath {
 public:
  virtual ~DecodePath() = default;

  virtual std::string_view name() const = 0;
  // Whether Run can serve this plan. Only called with plan.decode_only set (every sequence runs
  // one token at its start_position, block tables validated); the path checks what it needs on
  // top: batch size, page buckets, the sampling of each logits row, hooks.
  virtual bool Accepts(const StepPlan& plan) const = 0;
  // Whether Run samples rows inside its own kernel: the backend then stages them first
  // (StepSampler::StageInStep) and passes them to Run.
  virtual bool SamplesInStep() const { return false; }
  // Whether Run returns only once the GPU has finished everything it enqueued (it waited for its
  // own event): the sampler then reads the step's outputs without synchronising the stream
  // again, a driver call of 10-15 us at batch 1.
  virtual bool WaitsForStep() const { return false; }
  // Runs the plan's tokens through the model on `stream` (writing their K/V into the pool), and
  // leaves logits row r of plan.logit_rows in workspace.logits[r * vocab ...] and its argmax in
  // workspace.sampled[r], or, for a row `in_step` holds (non-null only when SamplesInStep), its
  // sample in the staged outputs. May return before the GPU is done; the sampler reads on
  // `stream`.
  virtual void Run(const StepPlan& plan, const InStepSamples* in_step, cudaStream_t stream) = 0;
  // Run in two halves (CudaBackend::StartStep enqueues a step before the previous one's tokens
  // are read): whether this path has them. Start enqueues a plan Accepts took on `slot` (0 or
  // 1: one step in flight on each), leaving every row's argmax in `argmax` (device) and the
  // samples of the rows `in_step` holds in its outputs; it returns without waiting. Row r whose
  // `pick_rows[r]` is not -1 decodes the token that row pick_rows[r] of the step started last on
  // the other slot picked, taken on the device (empty: every row's token is the plan's). Finish
  // waits for the step on `slot` and throws what Run would.
  virtual bool Starts() const { return false; }
  virtual void Start(const StepPlan& plan, const InStepSamples* in_step,
                     std::span<const int32_t> pick_rows, int32_t* argmax, int slot,
                     cudaStream_t stream) {
    (void)plan, (void)in_step, (void)pick_rows, (void)argmax, (void)slot, (void)stream;
    throw Error(std::string(name()) + " runs steps only whole");
  }
  virtual void Finish(int slot) { (void)slot; }
  // Prepares ahead what Run would otherwise prepare on first use (graph captures), so live
  // requests do not wait for it; stops at the deadline. Returns how many items it prepared.
  // Serving never depends on it having run. Default: nothing to prepare.
  virtual int64_t WarmUp(const DecodeWarmUp& request, cudaStream_t stream) {
    (void)request;
    (void)stream;
    return 0;
  }
};

}  // namespace mkserve::cuda
