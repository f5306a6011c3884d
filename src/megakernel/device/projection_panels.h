// ProjectionPanels: the megakernel's copies, in panels (weight_panels.h), of the projections it
// streams besides the routed experts: fused QKV, O-proj, the dense MLP and the LM head. The
// layered path and prefill read these through cuBLAS, which needs them row-major, so the kernel
// keeps a second copy (North: 3.0 GB, taken from the KV cache's budget when the megakernel is
// the decode path); the experts, 57 GB for North, are stored in panels once for every reader.
// Why panels at all: a warp round of the GEMV body then reads 4 KB contiguous instead of 8 rows
// x 64 bytes a copy instruction (H200, 8K, 49 layers, a build reading every projection that way:
// batch 1 2.70 -> 2.51 ms, 8 9.17 -> 8.72, 64 28.2 -> 26.7).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <vector>

#include "backends/cuda/core/device_buffer.h"
#include "backends/cuda/core/device_weights.h"
#include "model/model_config.h"

namespace mkserve::megakernel {

class ProjectionPanels {
 public:
  struct Layer {
    const __nv_bfloat16* qkv = nullptr;            // AdjacentRows(q + 2 kv width, hidden)
    const __nv_bfloat16* o_proj = nullptr;         // AdjacentRows(hidden, q width)
    const __nv_bfloat16* dense_gate_up = nullptr;  // GateUp(I, hidden); dense layers only
    const __nv_bfloat16* dense_down = nullptr;     // AdjacentRows(hidden, I); dense layers only
  };

  // Packs every copy on the GPU from `weights` (row-major); returns when they are done.
  ProjectionPanels(const ModelConfig& config, const cuda::DeviceWeights& weights);

  // What the constructor allocates for `config`: the KV budget leaves it free.
  static int64_t Bytes(const ModelConfig& config);

  const Layer& layer(int64_t layer_id) const { return layers_[layer_id]; }
  const __nv_bfloat16* lm_head() const { return lm_head_; }  // AdjacentRows(vocab, hidden)

 private:
  cuda::DeviceBuffer<__nv_bfloat16> storage_;
  std::vector<Layer> layers_;
  const __nv_bfloat16* lm_head_ = nullptr;
};

}  // namespace mkserve::megakernel
