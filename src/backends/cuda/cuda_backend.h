// CudaBackend: the layered CUDA implementation of Backend. One kernel per operation (cuBLAS for
// large GEMMs, our weight-streaming GEMV for decode-sized ones), the same paged KV block tables as
// the CPU backend, greedy sampling on the GPU. Any mix of prefill chunks and decode rows per step.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "backends/cuda/device_weights.h"
#include "backends/cuda/gpu_sampler.h"
#include "backends/cuda/kv_pool.h"
#include "backends/cuda/norm.h"
#include "backends/cuda/router_override.h"
#include "backends/cuda/step_plan.h"
#include "backends/cuda/step_profile.h"
#include "backends/cuda/step_workspace.h"
#include "engine/backend.h"

namespace mkserve::cuda {

struct CudaBackendOptions {
  double gpu_memory_fraction = 0.9;   // weights + scratch + KV cache
  std::optional<KvLayout> kv_layout;  // exact KV pool (tests); otherwise sized from the fraction
  int64_t max_num_tokens = 8192;      // tokens per step (prefill chunk + decode rows)
  int64_t max_batch = 64;             // sequences per step the sliding pools must hold
  bool use_cuda_graphs = false;       // replay plain-greedy decode steps from CUDA graphs
  bool random_weights = false;        // LoadCudaBackend: weights from the seed, not the checkpoint
  uint64_t seed = 0;
  UploadProgress progress;  // LoadCudaBackend: upload progress
};

class CudaBackend : public Backend {
 public:
  CudaBackend(ModelConfig config, DeviceWeights weights, const CudaBackendOptions& options);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string name() const override { return "cuda-layered"; }
  const ModelConfig& config() const override { return config_; }
  const KvLayout& kv_layout() const override { return kv_pool_->layout(); }
  StepOutputs Step(const StepInputs& inputs) override;

  // The benchmark's hooks: run the forward pass only (no sampling, no host sync), and read what
  // the last MoE layer routed.
  void Forward(const StepPlan& plan);
  StepPlan Plan(const StepInputs& inputs) const;
  int64_t CountDistinctExperts(int64_t num_tokens) const;  // of the last MoE layer run
  KvPool& kv_pool() { return *kv_pool_; }
  int64_t max_num_tokens() const { return workspace_->max_num_tokens; }
  void set_use_cuda_graphs(bool use) { options_.use_cuda_graphs = use; }
  bool options_use_graphs() const { return options_.use_cuda_graphs; }
  int64_t num_cuda_graphs() const { return static_cast<int64_t>(graphs_.size()); }
  const DeviceWeights& weights() const { return weights_; }
  cudaStream_t stream() const { return stream_; }
  // Times each op class of eager steps into `profiler` (null: off). Graph replay is skipped
  // while set, so every step is profiled.
  void set_profiler(StepProfiler* profiler) { profiler_ = profiler; }
  // Tests only: forces and/or traces expert routing in every MoE layer (null: off). The caller
  // owns it and sets its first row before each step. Keep CUDA graphs off while set: a capture
  // refuses it and a replayed graph would skip it.
  void set_routing_override(RoutingOverride* routing) { routing_override_ = routing; }

 private:
  struct DeviceMetadata;  // device pointers into a packed metadata buffer for one plan
  struct PackedMetadata {
    std::vector<int32_t> values;
    std::vector<size_t> offsets;
  };
  struct DecodeGraph;  // one captured decode step and its own metadata buffer
  static PackedMetadata PackMetadata(const StepPlan& plan);
  DeviceMetadata PointMetadata(const int32_t* base, const PackedMetadata& packed,
                               size_t num_groups);
  DeviceMetadata UploadMetadata(const StepPlan& plan);
  void Launch(const StepPlan& plan, const DeviceMetadata& meta);
  bool CanReplayGraph(const StepInputs& inputs) const;
  StepOutputs StepWithGraph(const StepInputs& inputs, const StepPlan& plan);
  DecodeGraph& CaptureGraph(const StepPlan& bucketed, const PackedMetadata& packed);
  void RunLayer(int64_t layer_id, const StepPlan& plan, const DeviceMetadata& meta);
  void RunAttention(int64_t layer_id, const StepPlan& plan, const DeviceMetadata& meta);
  void RunFfn(int64_t layer_id, int64_t num_tokens);
  void RunMlp(const DeviceMlp& mlp, int64_t num_tokens, float* out);
  PendingMoe TakePendingMoe();
  void ComputeLogits(size_t first_row, int64_t num_rows);
  void Sample(const StepInputs& inputs, const StepPlan& plan, StepOutputs* outputs);
  void SampleComputedRows(const StepInputs& inputs, const StepPlan& plan, size_t first,
                          int64_t count, StepOutputs* outputs);
  void Mark(StepOp op) {
    if (profiler_ != nullptr) profiler_->Mark(op, stream_);
  }

  ModelConfig config_;
  DeviceWeights weights_;
  CudaBackendOptions options_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  int num_sms_ = 0;
  std::unique_ptr<StepWorkspace> workspace_;
  std::unique_ptr<KvPool> kv_pool_;
  std::unique_ptr<GpuSampler> sampler_;     // made on first use
  const int32_t* logit_tokens_ = nullptr;   // device: token index of each logits row
  DeviceBuffer<uint8_t> cublas_workspace_;  // fixed, so cuBLAS never allocates inside a capture
  std::map<std::vector<int64_t>, std::unique_ptr<DecodeGraph>> graphs_;  // (batch, pages...)
  StepProfiler* profiler_ = nullptr;
  RoutingOverride* routing_override_ = nullptr;
  int64_t pending_moe_layer_ = -1;  // MoE layer whose combine the next AddNorm folds in
};

// A model directory (config.json + safetensors) or, with options.random_weights, random weights
// at that directory's geometry (North Mini Code's when model_dir is empty).
std::unique_ptr<CudaBackend> LoadCudaBackend(const std::filesystem::path& model_dir,
                                             const CudaBackendOptions& options);

}  // namespace mkserve::cuda
