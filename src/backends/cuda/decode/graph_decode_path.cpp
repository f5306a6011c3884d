#include "backends/cuda/decode/graph_decode_path.h"

#include <algorithm>

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

// A plain greedy decode step of `batch` rows whose block tables span `pages` pages in every KV
// group: the shape a graph is captured for (the values are the replaying step's).
StepPlan WarmUpPlan(int64_t batch, int64_t pages, int64_t num_groups) {
  StepPlan plan;
  plan.num_tokens = batch;
  plan.num_sequences = batch;
  plan.decode_only = true;
  plan.max_context_tokens = pages * kBlockTokens;
  plan.token_ids.assign(batch, 0);
  plan.positions.assign(batch, static_cast<int32_t>(pages * kBlockTokens - 1));
  for (int64_t s = 0; s < batch; ++s) {
    plan.seq_of_token.push_back(static_cast<int32_t>(s));
    plan.logit_rows.push_back({static_cast<int32_t>(s), static_cast<int32_t>(s), 0, {}});
    plan.logit_rows.back().needs.sample = true;
  }
  plan.slots.assign(num_groups, std::vector<int32_t>(batch, 0));
  plan.max_pages.assign(num_groups, pages);
  plan.block_tables.assign(num_groups, std::vector<int32_t>(batch * pages, 0));
  return plan;
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

void GraphDecodePath::Run(const StepPlan& plan, const InStepSamples* /*in_step*/,
                          cudaStream_t stream) {
  const StepPlan bucketed = BucketPlan(plan);
  const PackedMetadata packed = PackMetadata(bucketed);
  const std::vector<int64_t> key = KeyOf(bucketed);
  Graph* graph = nullptr;
  if (auto found = graphs_.find(key); found != graphs_.end()) {
    graph = found->second.get();
  } else if (!uncapturable_.contains(key)) {
    try {
      graph = &Capture(bucketed, packed, stream);
    } catch (const BackendFatalError&) {
      throw;
    } catch (const Error&) {
      uncapturable_.insert(key);  // e.g. no memory left for the graph: the step still runs
    }
  }
  if (graph == nullptr) return RunEager(plan, stream);
  MKSERVE_CUDA_CHECK(cudaMemcpyAsync(graph->metadata.data(), packed.values.data(),
                                     packed.values.size() * sizeof(int32_t), cudaMemcpyHostToDevice,
                                     stream));
  MKSERVE_CUDA_CHECK(cudaGraphLaunch(graph->exec, stream));
}

void GraphDecodePath::RunEager(const StepPlan& plan, cudaStream_t stream) {
  const DeviceMetadata meta = UploadMetadata(plan, c_.workspace.metadata, stream);
  const LayeredForward forward(c_, stream);
  forward.Run(plan, meta);
  forward.ComputeLogits(meta.logit_tokens, 0, plan.num_sequences);
}

int64_t GraphDecodePath::WarmUp(const DecodeWarmUp& request, cudaStream_t stream) {
  // +1: the decoded token's own slot.
  const int64_t pages = (request.max_context_tokens + 1 + kBlockTokens - 1) / kBlockTokens;
  std::vector<int64_t> buckets;
  for (int64_t bucket = 1; bucket <= PagesBucket(pages); bucket *= 2) buckets.push_back(bucket);
  const int64_t max_batch = std::min(request.max_batch, kLogitRowsPerChunk);
  const int64_t total = static_cast<int64_t>(buckets.size()) * max_batch;
  const int64_t num_groups = c_.kv_pool.layout().num_groups();
  int64_t done = 0, captured = 0;
  for (int64_t bucket : buckets) {
    for (int64_t batch = 1; batch <= max_batch; ++batch) {
      if (std::chrono::steady_clock::now() >= request.deadline) return captured;
      const StepPlan plan = WarmUpPlan(batch, bucket, num_groups);
      if (!graphs_.contains(KeyOf(plan))) {
        Capture(plan, PackMetadata(plan), stream);
        ++captured;
      }
      if (request.progress) request.progress(++done, total);
    }
  }
  return captured;
}

std::unique_ptr<DecodePath> MakeGraphDecodePath(const DecodePathContext& context) {
  return std::make_unique<GraphDecodePath>(context);
}

}  // namespace mkserve::cuda
