#include "megakernel/device/projection_panels.h"

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/core/panel_pack.h"
#include "backends/cuda/core/weight_panels.h"

namespace mkserve::megakernel {
namespace {

using cuda::PanelMatrix;

struct LayerShapes {
  PanelMatrix qkv, o_proj, dense_gate_up, dense_down;
  bool dense = false;
};

LayerShapes ShapesOf(const ModelConfig& config, int64_t layer_id) {
  const int64_t hidden = config.hidden_size, width = config.layers[layer_id].ffn_intermediate_size;
  LayerShapes s;
  s.qkv = PanelMatrix::AdjacentRows(config.q_width() + 2 * config.kv_width(), hidden);
  s.o_proj = PanelMatrix::AdjacentRows(hidden, config.q_width());
  s.dense = config.layers[layer_id].ffn == FfnKind::kDense;
  if (s.dense) {
    s.dense_gate_up = PanelMatrix::GateUp(width, hidden);
    s.dense_down = PanelMatrix::AdjacentRows(hidden, width);
  }
  return s;
}

PanelMatrix LmHeadShape(const ModelConfig& config) {
  return PanelMatrix::AdjacentRows(config.vocab_size, config.hidden_size);
}

int64_t Elements(const ModelConfig& config) {
  int64_t total = LmHeadShape(config).Elements();
  for (int64_t l = 0; l < config.num_layers; ++l) {
    const LayerShapes s = ShapesOf(config, l);
    total += s.qkv.Elements() + s.o_proj.Elements();
    if (s.dense) total += s.dense_gate_up.Elements() + s.dense_down.Elements();
  }
  return total;
}

}  // namespace

int64_t ProjectionPanels::Bytes(const ModelConfig& config) {
  return Elements(config) * static_cast<int64_t>(sizeof(__nv_bfloat16));
}

ProjectionPanels::ProjectionPanels(const ModelConfig& config, const cuda::DeviceWeights& weights)
    : storage_(Elements(config)) {
  __nv_bfloat16* next = storage_.data();  // every shape's size is a multiple of 1 KB
  auto pack = [&next](const __nv_bfloat16* src, const PanelMatrix& m) {
    cuda::PackPanels(src, m, 1, next, 0);
    const __nv_bfloat16* packed = next;
    next += m.Elements();
    return packed;
  };
  for (int64_t l = 0; l < config.num_layers; ++l) {
    const LayerShapes s = ShapesOf(config, l);
    const cuda::DeviceLayer& w = weights.layers()[l];
    Layer layer;
    layer.qkv = pack(w.qkv, s.qkv);
    layer.o_proj = pack(w.o_proj, s.o_proj);
    if (s.dense) {
      layer.dense_gate_up = pack(w.dense.gate_up, s.dense_gate_up);
      layer.dense_down = pack(w.dense.down, s.dense_down);
    }
    layers_.push_back(layer);
  }
  lm_head_ = pack(weights.lm_head(), LmHeadShape(config));
  MKSERVE_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace mkserve::megakernel
