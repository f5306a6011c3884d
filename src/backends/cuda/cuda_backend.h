// CudaBackend: the CUDA implementation of Backend. A step is planned on the host (StepPlan); its
// decode rows (one token per sequence) run through the first decode path that accepts them
// (decode/decode_path.h: captured graphs, eager layered kernels, the megakernel), its
// prompt chunks through the layered kernels; a step holding both runs them as two sub-steps. The
// logits rows are sampled on the GPU (sampling/step_sampler.h). Steps run on a stream of the
// highest priority; prompt chunks started beside them run on a second one (prefill/chunk_stream.h).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backends/cuda/core/device_info.h"
#include "backends/cuda/core/device_weights.h"
#include "backends/cuda/core/kv_pool.h"
#include "backends/cuda/core/step_plan.h"
#include "backends/cuda/core/step_workspace.h"
#include "backends/cuda/cuda_backend_options.h"
#include "backends/cuda/decode/decode_path.h"
#include "backends/cuda/prefill/chunk_stream.h"
#include "backends/cuda/sampling/step_sampler.h"
#include "backends/cuda/started_step.h"
#include "engine/backend.h"

namespace mkserve::cuda {

struct WarmUpReport {
  int64_t prepared = 0;  // graphs captured (or what the decode paths prepare)
  double seconds = 0.0;
  int64_t device_bytes = 0;    // GPU memory it took
  bool stopped_early = false;  // at the time limit or on `error`
  std::string error;           // a transient failure that stopped it (serving goes on without)
};

class CudaBackend : public Backend {
 public:
  CudaBackend(ModelConfig config, DeviceWeights weights, const CudaBackendOptions& options);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string name() const override { return "cuda (" + options_.decode_path + " decode)"; }
  const ModelConfig& config() const override { return config_; }
  const KvLayout& kv_layout() const override { return kv_pool_->layout(); }
  StepOutputs Step(const StepInputs& inputs) override;
  // Decode steps whose path runs in halves (DecodePath::Starts) and whose rows are all picked on
  // the device are enqueued and returned from at once (StartedStep), a row decoding
  // kTokenSampledBefore taking its token on the device from `after`, the step started just
  // before; any other step runs as Step does.
  std::unique_ptr<PendingStep> StartStep(const StepInputs& inputs, PendingStep* after) override;
  bool runs_ahead() const override { return true; }
  int64_t max_prompt_chunk_tokens() const override {
    return chunk_stream_ ? chunk_stream_->max_tokens() : 0;
  }
  std::unique_ptr<PendingChunk> StartPromptChunk(const SequenceStep& chunk) override;

  // Prepares the decode paths for decode steps of 1..max_batch rows at contexts of up to
  // options.warmup_context_tokens (graph captures), within options.warmup_seconds, then runs a
  // 2-token prompt with one decode step and a prompt of up to 512 tokens (RunWarmUpSequences), so
  // the first live requests pay for neither the preparation nor the kernels' loading on first
  // launch. The server calls it after loading and before any request: the warm-up prompts write
  // the first KV blocks of every group. Steps work without it. `progress` (may be empty) gets
  // (done, total).
  WarmUpReport WarmUp(const std::function<void(int64_t done, int64_t total)>& progress);

  // Selects the decode paths of the next steps (CudaBackendOptions::decode_path; throws
  // mkserve::Error on an unknown name). The previous paths and what they held (graphs) go. The
  // KV pool left room only for the constructor's choice (DecodePathBytes): a path that needs more
  // (the megakernel's panel copies) allocates from what the memory fraction left over.
  void set_decode_path(const std::string& choice);
  const std::string& decode_path() const { return options_.decode_path; }
  // The decode path of this name among those in use, or null.
  const DecodePath* FindDecodePath(std::string_view name) const;
  // The name of the path that would run these decode-only inputs (benchmarks label their rows
  // with it: a path may decline a step and leave it to the next); empty when not decode-only.
  std::string_view DecodePathFor(const StepInputs& inputs) const;

  KvPool& kv_pool() { return *kv_pool_; }
  const StepWorkspace& workspace() const { return *workspace_; }
  int64_t max_num_tokens() const { return workspace_->max_num_tokens; }
  const DeviceWeights& weights() const { return weights_; }
  cudaStream_t stream() const { return stream_; }

 private:
  // WarmUp's prompts and decode steps (greedy, on the first blocks of every KV group).
  void RunWarmUpSequences();
  StepPlan Plan(const StepInputs& inputs) const;
  DecodePath* PickDecodePath(const StepPlan& plan) const;
  // The sequences `sequences` of `inputs` as a step of their own.
  static StepInputs Part(const StepInputs& inputs, const std::vector<size_t>& sequences);
  // Runs a part planned as `plan`; the results go to indices `sequences` of `outputs`.
  void RunPart(const StepInputs& part, const StepPlan& plan, const std::vector<size_t>& sequences,
               StepOutputs* outputs);
  // A planned step: its decode path when one accepts the plan, else the layered kernels.
  void RunPlanned(const StepInputs& inputs, const StepPlan& plan, StepOutputs* outputs);
  // The started step on `path`, or null when `inputs` cannot run that way (the caller runs them
  // as Step does).
  std::unique_ptr<PendingStep> TryStart(const StepInputs& inputs, PendingStep* after);
  // Reads the started steps still in flight (their slots' buffers become free).
  void ReadStartedSteps();
  // Every token through the layered kernels, then the logits rows in chunks of
  // kLogitRowsPerChunk, each sampled before the next is computed.
  void RunLayered(const StepInputs& inputs, const StepPlan& plan, StepOutputs* outputs);

  ModelConfig config_;
  DeviceWeights weights_;
  CudaBackendOptions options_;
  DeviceInfo device_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  DeviceBuffer<uint8_t> cublas_workspace_;  // fixed, so cuBLAS never allocates inside a capture
  std::unique_ptr<StepWorkspace> workspace_;
  std::unique_ptr<ChunkStream> chunk_stream_;  // when options.max_prompt_chunk_tokens > 0
  std::unique_ptr<KvPool> kv_pool_;
  std::unique_ptr<DecodePathContext> context_;
  std::vector<std::unique_ptr<DecodePath>> decode_paths_;  // preference order
  StepSampler sampler_;
  // Started steps: each slot's argmax rows, and the step in flight on it (null once read).
  HostMappedBuffer<int32_t> started_argmax_[2];
  StartedStep* in_flight_[2] = {nullptr, nullptr};
};

// Throws mkserve::Error for prompt-chunk options a CudaBackend refuses (a negative size, or chunks
// with the megakernel decode path); `mkserve serve` calls it before uploading weights.
void CheckPromptChunks(const CudaBackendOptions& options);

// A model directory (config.json + safetensors) or, with options.random_weights, random weights
// at that directory's geometry (North Mini Code's when model_dir is empty).
std::unique_ptr<CudaBackend> LoadCudaBackend(const std::filesystem::path& model_dir,
                                             const CudaBackendOptions& options);

}  // namespace mkserve::cuda
