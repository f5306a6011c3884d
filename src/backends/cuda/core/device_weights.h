// DeviceWeights: the model's weights in GPU memory, bf16, repacked at load into the layouts the
// kernels read. Each layer lives in ONE contiguous allocation (norm, fused QKV, O, FFN) so a
// persistent kernel can stream a layer front to back:
//   qkv            [q_width + 2 * kv_width][hidden]   rows q, then k, then v
//   o_proj         [hidden][q_width]
//   dense gate_up  [2 * I][hidden]                    gate rows first, then up
//   dense down     [hidden][I]
//   router         [num_experts][hidden]
//   experts gate_up per expert [2 * I][hidden] in panels, pairs (gate row i, up row i)
//   experts down    per expert [hidden][I] in panels, pairs of adjacent rows (weight_panels.h)
// The routed experts are stored in the GEMV bodies' read order (panels) because every reader of
// them is ours (the decode GEMV, the grouped GEMM, the megakernel) and no second copy of them
// fits beside the KV cache; everything else stays row-major for cuBLAS.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "backends/cuda/core/device_buffer.h"
#include "model/model_config.h"
#include "model/model_weights.h"

namespace mkserve::cuda {

using bf16 = __nv_bfloat16;

struct DeviceMlp {
  const bf16* gate_up = nullptr;  // [2 * intermediate][hidden]
  const bf16* down = nullptr;     // [hidden][intermediate]
  int64_t intermediate = 0;
};

struct DeviceLayer {
  const bf16* input_norm = nullptr;  // [hidden]
  const bf16* qkv = nullptr;
  const bf16* o_proj = nullptr;
  DeviceMlp dense;  // dense layers (gate_up == nullptr otherwise)
  const bf16* router = nullptr;
  const bf16* experts_gate_up = nullptr;  // ExpertGateUpPanels (weight_layout.h) per expert
  const bf16* experts_down = nullptr;     // ExpertDownPanels per expert
  int64_t expert_intermediate = 0;
  DeviceMlp shared;   // MoE layers with shared experts
  int64_t bytes = 0;  // the layer's whole allocation
};

// Called with (bytes done, bytes total) as tensors land on the GPU.
using UploadProgress = std::function<void(int64_t done_bytes, int64_t total_bytes)>;

class DeviceWeights {
 public:
  // Streams every tensor through a pinned staging buffer (no second full host copy). BF16, F16
  // and F32 sources are converted to bf16; FP8 is rejected with an mkserve::Error for now.
  static DeviceWeights Upload(const ModelConfig& config, const ModelWeights& weights,
                              const UploadProgress& progress);
  // normal(0, 0.02) weights from a counter-based RNG keyed on (seed, tensor), norm gammas near 1.
  static DeviceWeights Random(const ModelConfig& config, uint64_t seed);

  const bf16* embed() const { return embed_.data(); }
  const bf16* final_norm() const { return final_norm_.data(); }
  const bf16* lm_head() const { return lm_head_ != nullptr ? lm_head_ : embed_.data(); }
  const std::vector<DeviceLayer>& layers() const { return layers_; }
  int64_t total_bytes() const { return total_bytes_; }

 private:
  // Allocates every tensor (contents undefined) and sets the pointers.
  static DeviceWeights Allocate(const ModelConfig& config, bool tied_head);

  DeviceBuffer<bf16> embed_;
  DeviceBuffer<bf16> final_norm_;
  DeviceBuffer<bf16> lm_head_storage_;  // empty when tied
  const bf16* lm_head_ = nullptr;
  std::vector<bf16*> layer_bases_;
  std::vector<DeviceBuffer<bf16>> layer_storage_;
  std::vector<DeviceLayer> layers_;
  int64_t total_bytes_ = 0;
};

}  // namespace mkserve::cuda
