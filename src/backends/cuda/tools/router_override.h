// Routing override, for tests only. Top-k routing is discontinuous: where a reference (HF in
// float32) has two experts within bf16 noise of each other, our bf16 path may legitimately pick
// the other one, and the flip then spreads through attention. To tell "kernel wrong" from
// "near-tie flipped", a test can force the reference's expert ids into every MoE layer (weights
// recomputed from OUR router logits, same sigmoid/softmax semantics as RouterTopK) and trace what
// our router would have chosen freely, plus our router logits. Attached to the backend's ToolHooks
// (tools/tool_hooks.h), it runs right after RouterTopK in every MoE layer.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "backends/cuda/core/device_buffer.h"
#include "model/model_config.h"

namespace mkserve::cuda {

class RoutingOverride {
 public:
  // Rows are token positions of ONE sequence (the test's): arrays are [moe layer][row][...].
  // `forced_ids` [num_moe_layers][num_rows][top_k] are the expert ids to use, or empty for our
  // own routing (trace only). Throws mkserve::Error on a wrong size, an id outside
  // [0, num_experts) or an id repeated within a row.
  RoutingOverride(const ModelConfig& config, int64_t num_rows,
                  const std::vector<int32_t>& forced_ids);

  // The next step's token i is row `first_row + i` (tests step one sequence at a time).
  void set_first_row(int64_t first_row) { first_row_ = first_row; }
  bool is_forced() const { return forced_ids_.count() > 0; }
  int64_t num_rows() const { return num_rows_; }

  // Our free top-k ids [num_moe_layers][num_rows][top_k] (-1 where no step routed that row) and
  // our router logits [num_moe_layers][num_rows][num_experts] (NaN where not routed).
  std::vector<int32_t> TracedIds() const;
  std::vector<float> TracedLogits() const;

  // After RouterTopK of layer `layer_id` over `num_tokens` rows: records the free choice and the
  // logits, then (forced) overwrites `expert_ids` and `weights`. Refuses a graph capture (the row
  // offset is a host value) and rows beyond num_rows.
  void Apply(int64_t layer_id, const float* logits, int64_t num_tokens, int32_t* expert_ids,
             float* weights, cudaStream_t stream) const;

 private:
  int64_t num_experts_ = 0;
  int64_t top_k_ = 0;
  ExpertSelection selection_ = ExpertSelection::kSigmoid;
  bool renormalize_ = false;
  std::vector<int64_t> moe_index_;  // per layer: index among MoE layers, -1 for dense
  int64_t num_moe_layers_ = 0;
  int64_t num_rows_ = 0;
  int64_t first_row_ = 0;
  DeviceBuffer<int32_t> forced_ids_;
  DeviceBuffer<int32_t> traced_ids_;
  DeviceBuffer<float> traced_logits_;
};

}  // namespace mkserve::cuda
