// Offsets (in bf16 elements) of each tensor inside one layer's contiguous allocation. Shared by
// the uploader, the random generator and the megakernel, so the layout is written down once.
#pragma once

#include <cstdint>

#include "backends/cuda/core/weight_panels.h"
#include "model/model_config.h"

namespace mkserve::cuda {

inline constexpr int64_t kWeightAlignElements = 128;  // 256-byte aligned tensor starts
inline constexpr int64_t kAbsent = -1;

struct LayerLayout {
  int64_t input_norm = kAbsent;
  int64_t qkv = kAbsent;
  int64_t o_proj = kAbsent;
  int64_t dense_gate_up = kAbsent;
  int64_t dense_down = kAbsent;
  int64_t router = kAbsent;
  int64_t experts_gate_up = kAbsent;
  int64_t experts_down = kAbsent;
  int64_t shared_gate_up = kAbsent;
  int64_t shared_down = kAbsent;
  int64_t total_elements = 0;
};

inline int64_t SharedExpertWidth(const ModelConfig& config) {
  return config.expert_intermediate_size * config.num_shared_experts;
}

// One routed expert's matrices, stored in panels (weight_panels.h) and back to back by expert.
MKSERVE_HOST_DEVICE inline PanelMatrix ExpertGateUpPanels(int64_t hidden, int64_t width) {
  return PanelMatrix::GateUp(width, hidden);
}
MKSERVE_HOST_DEVICE inline PanelMatrix ExpertDownPanels(int64_t hidden, int64_t width) {
  return PanelMatrix::AdjacentRows(hidden, width);
}

inline LayerLayout PlanLayerLayout(const ModelConfig& config, int64_t layer_id) {
  const LayerSpec& spec = config.layers[layer_id];
  const int64_t hidden = config.hidden_size;
  LayerLayout layout;
  int64_t next = 0;
  auto take = [&next](int64_t elements) {
    int64_t offset = next;
    next += (elements + kWeightAlignElements - 1) / kWeightAlignElements * kWeightAlignElements;
    return offset;
  };
  layout.input_norm = take(hidden);
  layout.qkv = take((config.q_width() + 2 * config.kv_width()) * hidden);
  layout.o_proj = take(hidden * config.q_width());
  const int64_t width = spec.ffn_intermediate_size;
  if (spec.ffn == FfnKind::kDense) {
    layout.dense_gate_up = take(2 * width * hidden);
    layout.dense_down = take(hidden * width);
  } else {
    layout.router = take(config.num_experts * hidden);
    layout.experts_gate_up =
        take(config.num_experts * ExpertGateUpPanels(hidden, width).Elements());
    layout.experts_down = take(config.num_experts * ExpertDownPanels(hidden, width).Elements());
    if (config.num_shared_experts > 0) {
      layout.shared_gate_up = take(2 * SharedExpertWidth(config) * hidden);
      layout.shared_down = take(hidden * SharedExpertWidth(config));
    }
  }
  layout.total_elements = next;
  return layout;
}

}  // namespace mkserve::cuda
