// GraphDecodePath: decode steps replayed from CUDA graphs of the layered kernels. A step
// qualifies when every sequence runs one token and samples it on the GPU (argmax, or the
// GpuSampler after the replay): every decode step of serving except prompt logprobs, returned
// logits and more top logprobs than the GPU returns. The plan is bucketed (BucketPlan: block
// tables padded to a power-of-two page count per KV group, attention splits by the bucket), so
// one graph per (batch, page buckets) serves every context inside the bucket; positions and
// tables are data the captured kernels read from the graph's own metadata buffer.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "backends/cuda/core/step_metadata.h"
#include "backends/cuda/decode/decode_path.h"

namespace mkserve::cuda {

class GraphDecodePath : public DecodePath {
 public:
  explicit GraphDecodePath(const DecodePathContext& context);
  ~GraphDecodePath() override;

  std::string_view name() const override { return "graph"; }
  bool Accepts(const StepPlan& plan) const override;
  void Run(const StepPlan& plan, const InStepSamples* in_step, cudaStream_t stream) override;
  // Captures the graphs of batch 1..max_batch for every page bucket a context of up to
  // max_context_tokens needs, smallest buckets first.
  int64_t WarmUp(const DecodeWarmUp& request, cudaStream_t stream) override;

  int64_t num_graphs() const { return static_cast<int64_t>(graphs_.size()); }

 private:
  struct Graph;  // one captured decode step and the metadata buffer its kernels read
  Graph& Capture(const StepPlan& bucketed, const PackedMetadata& packed, cudaStream_t stream);
  // The eager kernels, for a step whose graph could not be captured.
  void RunEager(const StepPlan& plan, cudaStream_t stream);

  const DecodePathContext& c_;
  std::map<std::vector<int64_t>, std::unique_ptr<Graph>> graphs_;  // (batch, pages per group)
  // Keys whose capture failed with a transient error (out of memory): run eager, never retried.
  std::set<std::vector<int64_t>> uncapturable_;
};

std::unique_ptr<DecodePath> MakeGraphDecodePath(const DecodePathContext& context);

}  // namespace mkserve::cuda
