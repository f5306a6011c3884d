#include "backends/cuda/decode/graph_decode_path.h"

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/core/device_buffer.h"
#include "backends/cuda/decode/layered_forward.h"

namespace mkserve::cuda {
namespace {

std::vector<int64_t> KeyOf(const StepPlan& bucketed) {
  std::vector<int64_t> key = {bucketed.num_sequences};
  key.insert(key.end(), bucketed.max_pages.begin(), bucketed.max_pages.end());
  return key;
}

}  // namespace

struct GraphDecodePath::Graph {
  cudaGraphExec_t exec = nullptr;
  DeviceBuffer<int32_t> metadata;
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  ~Graph() {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
  }
};

GraphDecodePath::GraphDecodePath(const DecodePathContext& context) : c_(context) {}

GraphDecodePath::~GraphDecodePath() = default;

bool GraphDecodePath::Accepts(const StepPlan& plan) const {
  // Hooks must see every kernel; a replay would skip them (and a capture refuses a forced route).
  if (c_.options.hooks && c_.options.hooks->active()) return false;
  if (!plan.decode_only || plan.num_sequences == 0 || plan.num_sequences > kLogitRowsPerChunk ||
      static_cast<int64_t>(plan.logit_rows.size()) != plan.num_sequences) {
    return false;
  }
  for (const LogitRow& row : plan.logit_rows) {
    if (!row.needs.sample || row.needs.host_logits) return false;
  }
  return true;
}

GraphDecodePath::Graph& GraphDecodePath::Capture(const StepPlan& bucketed,
                                                 const PackedMetadata& packed,
                                                 cudaStream_t stream) {
  auto graph = std::make_unique<Graph>();
  graph->metadata = DeviceBuffer<int32_t>(static_cast<int64_t>(packed.values.size()));
  const DeviceMetadata meta = PointMetadata(graph->metadata.data(), packed, bucketed.slots.size());
  const LayeredForward forward(c_, stream);
  MKSERVE_CUDA_CHECK(cudaStreamSynchronize(stream));
  MKSERVE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  cudaGraph_t captured = nullptr;
  try {
    forward.Run(bucketed, meta);
    forward.ComputeLogits(meta.logit_tokens, 0, bucketed.num_sequences);
  } catch (...) {
    cudaStreamEndCapture(stream, &captured);  // leave the stream usable
    if (captured != nullptr) cudaGraphDestroy(captured);
    throw;
  }
  MKSERVE_CUDA_CHECK(cudaStreamEndCapture(stream, &captured));
  const cudaError_t status = cudaGraphInstantiate(&graph->exec, captured, 0);
  cudaGraphDestroy(captured);
  MKSERVE_CUDA_CHECK(status);
  Graph& stored = *graph;
  graphs_[KeyOf(bucketed)] = std::move(graph);
  return stored;
}

void GraphDecodePath::Run(const StepPlan& plan, cudaStream_t stream) {
  const StepPlan bucketed = BucketPlan(plan);
  const PackedMetadata packed = PackMetadata(bucketed);
  auto found = graphs_.find(KeyOf(bucketed));
  Graph& graph = found != graphs_.end() ? *found->second : Capture(bucketed, packed, stream);
  MKSERVE_CUDA_CHECK(cudaMemcpyAsync(graph.metadata.data(), packed.values.data(),
                                     packed.values.size() * sizeof(int32_t), cudaMemcpyHostToDevice,
                                     stream));
  MKSERVE_CUDA_CHECK(cudaGraphLaunch(graph.exec, stream));
}

std::unique_ptr<DecodePath> MakeGraphDecodePath(const DecodePathContext& context) {
  return std::make_unique<GraphDecodePath>(context);
}

}  // namespace mkserve::cuda
