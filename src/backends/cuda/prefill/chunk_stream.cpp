#include "backends/cuda/prefill/chunk_stream.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/core/step_metadata.h"
#include "backends/cuda/core/step_plan.h"
#include "backends/cuda/core/stream_setup.h"
#include "backends/cuda/decode/layered_forward.h"

namespace mkserve::cuda {
namespace {

// Between two looks at an unfinished chunk: short against a step (milliseconds), long enough not
// to keep a host core busy.
constexpr std::chrono::microseconds kPollInterval(50);

// The workspace's size; checked before anything is allocated.
int64_t PieceTokens(int64_t max_tokens, int64_t piece_tokens) {
  if (max_tokens < 1 || piece_tokens < 1) {
    throw Error("ChunkStream: chunk and piece sizes must be positive, got " +
                std::to_string(max_tokens) + " and " + std::to_string(piece_tokens));
  }
  return std::min(max_tokens, piece_tokens);
}

CudaBackendOptions WithoutHooks(CudaBackendOptions options) {
  options.hooks = nullptr;  // per-op timing and forced routing belong to the steps they measure
  return options;
}

class PendingCudaChunk : public PendingChunk {
 public:
  PendingCudaChunk(std::shared_future<void> launched, cudaEvent_t done)
      : launched_(std::move(launched)), done_(done) {}
  ~PendingCudaChunk() override {  // errors were Wait's to report
    launched_.wait();
    cudaEventSynchronize(done_);
  }

  bool Wait(std::chrono::microseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    // Until the launcher has queued the chunk, done_ still reports the previous one.
    if (launched_.wait_until(deadline) != std::future_status::ready) return false;
    launched_.get();  // rethrows a failed launch
    while (true) {
      const cudaError_t status = cudaEventQuery(done_);
      if (status == cudaSuccess) return true;
      if (status != cudaErrorNotReady) MKSERVE_CUDA_CHECK(status);
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(kPollInterval);
    }
  }

 private:
  std::shared_future<void> launched_;
  cudaEvent_t done_;
};

}  // namespace

ChunkStream::ChunkStream(const ModelConfig& config, const DeviceWeights& weights,
                         const DeviceInfo& device, const CudaBackendOptions& options,
                         int64_t max_tokens, int64_t piece_tokens)
    : config_(config),
      weights_(weights),
      device_(device),
      options_(WithoutHooks(options)),
      max_tokens_(max_tokens),
      workspace_(config, PieceTokens(max_tokens, piece_tokens)) {
  stream_ = CreateStream(StreamPriority::kLowest);
  cublas_ = CreateCublas(cublas_workspace_);
  MKSERVE_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
  MKSERVE_CUDA_CHECK(cudaEventRecord(done_, stream_));  // nothing runs yet
  int ordinal = 0;
  MKSERVE_CUDA_CHECK(cudaGetDevice(&ordinal));
  launcher_ = std::thread([this, ordinal] { LaunchLoop(ordinal); });
}

ChunkStream::~ChunkStream() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  launcher_.join();  // after queuing a chunk still posted
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  if (done_ != nullptr) cudaEventDestroy(done_);
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

std::unique_ptr<PendingChunk> ChunkStream::Start(const SequenceStep& chunk, KvPool& kv_pool) {
  const bool launching =
      last_launched_.valid() &&
      last_launched_.wait_for(std::chrono::seconds(0)) != std::future_status::ready;
  const cudaError_t previous = launching ? cudaErrorNotReady : cudaEventQuery(done_);
  if (previous == cudaErrorNotReady) throw Error("a prompt chunk is still running");
  MKSERVE_CUDA_CHECK(previous);
  CheckPromptChunk(chunk, max_tokens_);
  auto job = std::make_unique<Job>();
  job->kv_pool = &kv_pool;
  // Pieces of the workspace's size, each planned (validated) before anything is queued.
  const int64_t piece_tokens = workspace_.max_num_tokens;
  for (size_t first = 0; first < chunk.token_ids.size(); first += piece_tokens) {
    StepInputs piece;
    piece.sequences.push_back(chunk);
    SequenceStep& step = piece.sequences.back();
    step.token_ids = chunk.token_ids.subspan(
        first, std::min<size_t>(piece_tokens, chunk.token_ids.size() - first));
    step.start_position = chunk.start_position + static_cast<int64_t>(first);
    job->plans.push_back(BuildStepPlan(config_, kv_pool.layout(), piece, piece_tokens));
  }
  // One upload for all pieces; it waits for this (idle) stream only.
  job->metas = UploadMetadata(job->plans, workspace_.metadata, stream_);
  last_launched_ = job->launched.get_future().share();
  {
    std::lock_guard lock(mutex_);
    job_ = std::move(job);
  }
  wake_.notify_one();
  return std::make_unique<PendingCudaChunk>(last_launched_, done_);
}

void ChunkStream::LaunchLoop(int device) {
  const cudaError_t selected = cudaSetDevice(device);  // this thread's launches go to that GPU
  while (true) {
    std::unique_ptr<Job> job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || job_ != nullptr; });
      if (job_ == nullptr) return;  // stopping, nothing posted
      job = std::move(job_);
    }
    try {
      MKSERVE_CUDA_CHECK(selected);
      const DecodePathContext context{config_, weights_, *job->kv_pool, workspace_,
                                      device_, cublas_,  options_};
      const LayeredForward forward(context, stream_);
      for (size_t i = 0; i < job->plans.size(); ++i) forward.Run(job->plans[i], job->metas[i]);
      MKSERVE_CUDA_CHECK(cudaEventRecord(done_, stream_));
      job->launched.set_value();
    } catch (...) {
      // Kernels queued before the failure may still write the chunk's blocks: the engine frees
      // them once Wait reports the error, so that waits for them first.
      cudaStreamSynchronize(stream_);
      job->launched.set_exception(std::current_exception());
    }
  }
}

}  // namespace mkserve::cuda
