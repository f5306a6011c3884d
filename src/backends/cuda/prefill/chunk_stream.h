// ChunkStream: prompt chunks computed beside the steps (Backend::StartPromptChunk). A second CUDA
// stream, at the lowest priority, with its own workspace and cuBLAS handle, runs a chunk through
// the layered kernels while the steps go on on the backend's stream (the highest priority): the
// block scheduler hands SMs to the step's kernels first as the chunk's tiles retire, so a step
// slows by the chunk's share of the SMs and of HBM rather than waiting for the whole chunk.
// Weights and the KV pool are the backend's: the chunk writes only its own sequence's blocks, which
// the engine neither steps nor frees until the chunk has finished. A chunk longer than the
// workspace runs as consecutive pieces of the workspace's size, queued together (their metadata
// uploaded in one copy), so a long prompt leaves the stream idle only between chunks, each of which
// costs the engine's poll a step's time at most.
//
// Threads: Start (the engine thread) plans and uploads; a launcher thread of its own queues the
// kernels. A 32K-token chunk is some 3,500 launches, more than a stream's launch queue holds, so
// queuing them blocks until the GPU has drained most of the chunk: on the engine thread that
// stalled every stream for ~0.9 s per chunk (H200, docs/performance.md).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <condition_variable>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "backends/cuda/core/device_buffer.h"
#include "backends/cuda/core/step_metadata.h"
#include "backends/cuda/core/step_plan.h"
#include "backends/cuda/core/step_workspace.h"
#include "backends/cuda/decode/decode_path.h"
#include "engine/backend.h"

namespace mkserve::cuda {

class ChunkStream {
 public:
  // Chunks of up to max_tokens, in pieces of up to piece_tokens (the workspace, allocated now,
  // before the KV pool takes what is left of the GPU's memory).
  ChunkStream(const ModelConfig& config, const DeviceWeights& weights, const DeviceInfo& device,
              const CudaBackendOptions& options, int64_t max_tokens, int64_t piece_tokens);
  ~ChunkStream();
  ChunkStream(const ChunkStream&) = delete;
  ChunkStream& operator=(const ChunkStream&) = delete;

  int64_t max_tokens() const { return max_tokens_; }
  // Plans `chunk` (a bad chunk is a named error here, before any GPU work) and queues it; the
  // handle reports when it has finished. Throws mkserve::Error while the previous chunk runs.
  std::unique_ptr<PendingChunk> Start(const SequenceStep& chunk, KvPool& kv_pool);

 private:
  struct Job {  // one chunk, planned and uploaded, for the launcher
    std::vector<StepPlan> plans;
    std::vector<DeviceMetadata> metas;
    KvPool* kv_pool = nullptr;
    std::promise<void> launched;  // set once its kernels and done_ are queued
  };
  void LaunchLoop(int device);

  const ModelConfig& config_;
  const DeviceWeights& weights_;
  const DeviceInfo& device_;
  CudaBackendOptions options_;  // the backend's, without test hooks
  int64_t max_tokens_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  DeviceBuffer<uint8_t> cublas_workspace_;
  StepWorkspace workspace_;
  cudaEvent_t done_ = nullptr;              // recorded after each chunk
  std::shared_future<void> last_launched_;  // the latest chunk's

  std::mutex mutex_;
  std::condition_variable wake_;
  std::unique_ptr<Job> job_;  // posted by Start, taken by the launcher
  bool stopping_ = false;
  std::thread launcher_;  // last: started once the rest is built
};

}  // namespace mkserve::cuda
