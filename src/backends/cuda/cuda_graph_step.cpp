// Decode steps replayed from CUDA graphs. A step qualifies when every sequence runs one token and
// samples on the GPU (argmax, or the GpuSampler after the replay): every decode step of serving
// except prompt logprobs, returned logits and more top logprobs than the GPU returns. Its plan is
// bucketed: each KV group's block tables are padded to a power-of-two page count, and the attention
// split count follows that bucket, so one graph per (batch, page buckets) serves every context
// inside the bucket; positions and tables are data the captured kernels read from the graph's
// metadata buffer.
#include <algorithm>
#include <string>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/decode_graph.h"
#include "backends/cuda/gpu_sampler.h"

namespace mkserve::cuda {
namespace {

int64_t PagesBucket(int64_t pages) {
  int64_t bucket = 1;
  while (bucket < pages) bucket *= 2;
  return bucket;
}

StepPlan BucketPlan(const StepPlan& plan) {
  StepPlan bucketed = plan;
  int64_t widest = 1;
  for (size_t g = 0; g < plan.max_pages.size(); ++g) {
    const int64_t pages = plan.max_pages[g], bucket = PagesBucket(pages);
    std::vector<int32_t> tables(plan.num_sequences * bucket, -1);
    for (int64_t s = 0; s < plan.num_sequences; ++s) {
      std::copy(plan.block_tables[g].begin() + s * pages,
                plan.block_tables[g].begin() + (s + 1) * pages, tables.begin() + s * bucket);
    }
    bucketed.block_tables[g] = std::move(tables);
    bucketed.max_pages[g] = bucket;
    widest = std::max(widest, bucket);
  }
  bucketed.max_context_tokens = widest * kBlockTokens;  // split counts follow the bucket
  return bucketed;
}

}  // namespace

bool CudaBackend::CanReplayGraph(const StepInputs& inputs) const {
  if (!options_.use_cuda_graphs || inputs.sequences.empty() ||
      static_cast<int64_t>(inputs.sequences.size()) > kLogitRowsPerChunk) {
    return false;
  }
  for (const SequenceStep& step : inputs.sequences) {
    const bool decode = step.token_ids.size() == 1 && step.sample && !step.return_logits &&
                        step.next_token_ids.empty() &&
                        SampledOnGpu(step.sampling, config_.vocab_size);
    if (!decode) return false;
  }
  return true;
}

CudaBackend::DecodeGraph& CudaBackend::CaptureGraph(const StepPlan& bucketed,
                                                    const PackedMetadata& packed) {
  auto graph = std::make_unique<DecodeGraph>();
  graph->metadata = DeviceBuffer<int32_t>(static_cast<int64_t>(packed.values.size()));
  const DeviceMetadata meta = PointMetadata(graph->metadata.data(), packed, bucketed.slots.size());
  MKSERVE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  MKSERVE_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  cudaGraph_t captured = nullptr;
  try {
    Launch(bucketed, meta);
    ComputeLogits(0, bucketed.num_sequences);
  } catch (...) {
    cudaStreamEndCapture(stream_, &captured);  // leave the stream usable
    if (captured != nullptr) cudaGraphDestroy(captured);
    throw;
  }
  MKSERVE_CUDA_CHECK(cudaStreamEndCapture(stream_, &captured));
  const cudaError_t status = cudaGraphInstantiate(&graph->exec, captured, 0);
  cudaGraphDestroy(captured);
  MKSERVE_CUDA_CHECK(status);
  std::vector<int64_t> key = {bucketed.num_sequences};
  key.insert(key.end(), bucketed.max_pages.begin(), bucketed.max_pages.end());
  DecodeGraph& stored = *graph;
  graphs_[key] = std::move(graph);
  return stored;
}

StepOutputs CudaBackend::StepWithGraph(const StepInputs& inputs, const StepPlan& plan) {
  const StepPlan bucketed = BucketPlan(plan);
  const PackedMetadata packed = PackMetadata(bucketed);
  std::vector<int64_t> key = {bucketed.num_sequences};
  key.insert(key.end(), bucketed.max_pages.begin(), bucketed.max_pages.end());
  auto found = graphs_.find(key);
  DecodeGraph& graph = found != graphs_.end() ? *found->second : CaptureGraph(bucketed, packed);
  MKSERVE_CUDA_CHECK(cudaMemcpyAsync(graph.metadata.data(), packed.values.data(),
                                     packed.values.size() * sizeof(int32_t), cudaMemcpyHostToDevice,
                                     stream_));
  MKSERVE_CUDA_CHECK(cudaGraphLaunch(graph.exec, stream_));
  StepOutputs outputs;
  outputs.results.resize(inputs.sequences.size());
  SampleComputedRows(inputs, plan, 0, plan.num_sequences, &outputs);  // the graph made the logits
  return outputs;
}

}  // namespace mkserve::cuda
